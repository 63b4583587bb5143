"""Errors raised by llm-do. Each names the entry, toolset or file involved and says what to do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic_ai.exceptions import ToolFailed

if TYPE_CHECKING:
    from .approval import ApprovalRequest

__all__ = [
    "ApprovalDenied",
    "ApprovalUnavailable",
    "ConfigurationError",
    "InvalidSettings",
    "LlmDoError",
    "MaxDepthExceeded",
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


class UnknownHandle(ToolFailed):
    """A tool was given a handle that is not open in this toolset; the model sees the message."""


class ApprovalDenied(LlmDoError):
    """A gated call was denied, and there is no model to tell: `approval_on_deny='raise'`, or a direct call.

    Direct calls are `CallScope.call_tool` and `CallScope.call_agent` from Python code.
    """

    def __init__(self, request: ApprovalRequest, why: str) -> None:
        self.request = request
        self.why = why
        super().__init__(
            f"entry {request.entry!r}: the call to tool {request.tool!r} of toolset {request.toolset!r} "
            f"was denied: {why}. Catch ApprovalDenied to carry on, or set approval_on_deny='tell_model' "
            "(LLM_DO_APPROVAL_ON_DENY) so that a model reads the denial as the tool's result."
        )


class ApprovalUnavailable(LlmDoError):
    """A call needs approval, the mode is `prompt`, and the runtime has no approver to ask."""

    def __init__(self, request: ApprovalRequest) -> None:
        self.request = request
        super().__init__(
            f"entry {request.entry!r} called tool {request.tool!r} of toolset {request.toolset!r}, which needs "
            f"approval ({request.reason}), but approval_mode is 'prompt' and the Runtime has no approver. "
            "Pass Runtime(..., approver=...) or set approval_mode (LLM_DO_APPROVAL_MODE) to "
            "'approve_all' or 'reject_all'."
        )
