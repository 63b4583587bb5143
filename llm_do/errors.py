"""Errors raised by llm-do, and how they show what they name (`listing`, `shortened`, `causes`, and URLs shown
without their secrets: `shown_url`, `scrubbed`).

Each error names the entry, toolset or file involved and says what to do. Errors that belong to one room live
there, beside what they carry (the approval errors beside the request, `UnknownHandle` beside `Handles`).
Standard library only: the command imports this module before anything else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from urllib.parse import parse_qs, parse_qsl, unquote, urlsplit

__all__ = [
    "ConfigurationError",
    "DecisionRefused",
    "RuntimeClosed",
    "InvalidSettings",
    "LlmDoError",
    "MaxDepthExceeded",
    "ScopeError",
    "ToolsetError",
    "causes",
    "extra_missing",
    "scrubbed",
    "shown_url",
    "with_url_shown",
    "listing",
    "shortened",
]


class LlmDoError(Exception):
    """Base class of the errors llm-do raises itself, but those that are another library's class by design (a
    pydantic-ai error, a `LookupError`, ...): docs/errors.md lists every one a caller can catch."""


class DecisionRefused(LlmDoError):
    """A decision that cannot apply where it was sent: its approval is not pending there (unknown, decided already,
    another queue's job's, or refused by the process that holds the run)."""


class ConfigurationError(LlmDoError):
    """Bad wiring found when a runtime loads: unknown toolset, duplicate tools, bad entry."""


class InvalidSettings(ConfigurationError):
    """Settings failed validation. `problems` has one line per variable: its value and the expected form."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        if len(self.problems) == 1:
            head = f"invalid setting {self.problems[0]}"
        else:
            head = "invalid settings:\n" + "\n".join(f"  {problem}" for problem in self.problems)
        super().__init__(f"{head}\nFix the value (environment, .env file or container config), or unset it.")


class ToolsetError(LlmDoError):
    """A toolset factory produced something unusable, or a tool could not be found."""


class MaxDepthExceeded(LlmDoError):
    """A nested call would go deeper than `RuntimeConfig.max_depth`."""

    def __init__(self, chain: tuple[str, ...], max_depth: int) -> None:
        self.chain = chain
        self.max_depth = max_depth
        super().__init__(
            f"call depth {len(chain) - 1} exceeds max_depth={max_depth}: "
            f"{' -> '.join(chain)}. Raise max_depth (LLM_DO_MAX_DEPTH) if this nesting is intended, "
            "or stop the entries from calling each other without end."
        )


class ScopeError(LlmDoError):
    """A scoped object was used outside its scope: a per-run object after its run, a call after it ended."""


class ScopeMismatch(ScopeError, TypeError):
    """A toolset's provider is overridden by a provider of another scope, whose instances would not keep its
    lifetime (a `TypeError` too)."""


class RuntimeClosed(LlmDoError, RuntimeError):
    """A run or session was asked of a `Runtime` that is closed (a `RuntimeError` too)."""

    def __init__(self) -> None:
        super().__init__("this Runtime is closed; create a new one")


# -- how errors show what they name --------------------------------------------------------------------------


def extra_missing(extra: str, needed_by: str, module: str) -> ModuleNotFoundError:
    """The error of a module that an extra of llm-do installs, missing: it names the extra and how to install it."""
    return ModuleNotFoundError(
        f"{needed_by} needs the {extra} extra, which is not installed (no module named {module!r}): "
        f'pip install "llm-do[{extra}]"',
        name=module,
    )


def listing(names: Iterable[str], *, empty: str = "none", ordered: bool = True) -> str:
    """Names as an error lists them (`a, b, c`, sorted unless `ordered` is False), or `empty` when there are none."""
    shown = sorted(names) if ordered else list(names)
    return ", ".join(shown) or empty


def shortened(value: object, limit: int, *, quoted: bool = False, one_line: bool = False) -> str:
    """`value` as text (its `repr` when `quoted`; on one line, spaces collapsed, when `one_line`), cut to at most
    `limit` characters, ending with `...` when cut."""
    text = repr(value) if quoted else value if isinstance(value, str) else str(value)
    if one_line:
        text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def causes(error: BaseException) -> Iterator[BaseException]:
    """`error`, then every exception it was raised from or during, and the members of exception groups, once each."""
    seen: set[int] = set()
    stack: list[BaseException] = [error]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        stack.extend(found for found in (current.__cause__, current.__context__) if found is not None)


# -- URLs kept out of what llm-do writes down: error texts and log lines show no database URL, no password, and no
# server URL's password or query values (where tokens are often passed).

_USER_PASSWORD = re.compile(r"://[^/@:]*:([^/@]*)@")
_HIDDEN = "***"


def scrubbed(text: str, url: str) -> str:
    """`text` without `url`, its password, or any part of them that a driver may have quoted (each shown as `***`)."""
    return _replaced(text, {url: _HIDDEN, unquote(url): _HIDDEN}, _passwords(url))


def shown_url(url: str) -> str:
    """`url` as it may be shown: its password and the values of its query are `***`, its fragment is dropped."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return _USER_PASSWORD.sub(f"://***:{_HIDDEN}@", url.split("?")[0])
    netloc = parts.netloc
    if password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}:{_HIDDEN}@{host}"
    query = "&".join(f"{key}={_HIDDEN}" for key, _ in parse_qsl(parts.query, keep_blank_values=True))
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")


def with_url_shown(text: str, url: str) -> str:
    """`text` (an error about `url`, say) with `url` shown as `shown_url` does, and its password and query values
    hidden wherever else they appear."""
    try:
        values = [value for _, value in parse_qsl(urlsplit(url).query) if len(value) > 2]
    except ValueError:
        values = []
    shown = shown_url(url)
    return _replaced(text, {url: shown, unquote(url): shown}, [*_passwords(url), *values])


def _replaced(text: str, wholes: dict[str, str], secrets: list[str]) -> str:
    replacements = dict(wholes)
    for secret in secrets:
        if secret:
            replacements.setdefault(secret, _HIDDEN)
            replacements.setdefault(unquote(secret), _HIDDEN)
    for found in sorted(replacements, key=len, reverse=True):
        text = text.replace(found, replacements[found])
    return text


def _passwords(url: str) -> list[str]:
    """The passwords `url` holds: after the user name, in `?password=`, or in `password=` of a `key=value` string
    (found even in a URL `urlsplit` refuses)."""
    found = [word.partition("=")[2].strip("'") for word in url.split() if word.startswith("password=")]
    try:
        parts = urlsplit(url)
        found += [parts.password or "", *parse_qs(parts.query).get("password", [])]
    except ValueError:  # an unclosed `[` of an IPv6 host, say: the user part is still read
        found += _USER_PASSWORD.findall(url)
    return found
