"""URLs kept out of what llm-do writes down: error texts and log lines show no database URL, no password, and
no server URL's password or query values (where tokens are often passed)."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, parse_qsl, unquote, urlsplit

__all__ = ["scrubbed", "shown_url", "with_url_shown"]

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
