"""`CallFacts`: one gated tool call, as approvals decide it, worked out once where the call enters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..files import Attachment

__all__ = ["CallFacts"]


@dataclass(frozen=True, slots=True)
class CallFacts:
    """A call to tool `tool` of the toolset named `toolset`: what its policy, its approver and its gate need."""

    toolset: str
    tool: str
    args: Mapping[str, Any]
    """The arguments policies and approvers see (an empty list of attachments is left out)."""
    call_id: str
    """What the call is known by in its llm-do call: the model's tool call id, `direct_<n>` for
    `CallScope.call_tool`, `python:<toolset>.<tool>#<n>` for `CallScope.call_agent`."""
    tool_call: bool = True
    """Whether `call_id` names a pydantic-ai tool call (not so for `call_agent`): its question names it, and the
    tool may ask for approval itself."""
    requires_approval: bool = False
    """The tool is declared `requires_approval=True`."""
    annotations: Mapping[str, Any] | None = None
    """An MCP tool's annotations (`{}` when it has none), when they decide: no policy is declared for its toolset."""
    attachments: Sequence[str] = ()
    """Names of the files the call hands over."""
    shown: tuple[Attachment, ...] | None = None
    """Those files already read (a call made from Python), shown to the approver whatever the verdict; None: they
    are read when an approver is asked."""
    approved: bool = False
    """pydantic-ai runs the call approved (`RunContext.tool_call_approved`): by the gate's capability, or another."""
    direct: bool = False
    """Made from Python: decided in place, and a denial raises `ApprovalDenied` (there is no model to tell)."""
    asked: bool = False
    """The tool asked for approval itself (it raised `ApprovalRequired`): no policy is evaluated."""
