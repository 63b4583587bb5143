"""Errors raised by llm-do; each names the entry, toolset or file involved and says what to do.

The approval errors live in `approval`, beside the request they carry.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai.exceptions import ToolFailed

__all__ = [
    "ConfigurationError",
    "InvalidSettings",
    "LlmDoError",
    "MaxDepthExceeded",
    "ScopeError",
    "ToolsetError",
    "UnknownHandle",
]


class LlmDoError(Exception):
    """Base class of every error llm-do raises itself."""


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


class UnknownHandle(ToolFailed):
    """A tool was given a handle that is not open in this toolset; the model sees the message."""
