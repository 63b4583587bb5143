"""What happens in a run, as events: calls, approvals, handles, and what a live run streams.

Each event names the call it happened in (`CallTag`). They are announced on the bus of the call's
scope (`llm_do.scopes`: `Sink`, `Observer`), which also carries the scopes' own bookkeeping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from .scopes._bus import CallTag, Event

if TYPE_CHECKING:
    from pydantic_ai.messages import AgentStreamEvent, ModelResponse
    from pydantic_ai.models import Model
    from pydantic_ai.usage import RunUsage

    from .approvals._requests import ApprovalRequest
    from .files._attachments import AttachmentInfo
    from .results import Outcome, RunReport, RunResult

__all__ = [
    "AgentStarted",
    "ApprovalDecided",
    "ApprovalRequested",
    "CallEnded",
    "CallEvent",
    "CallStarted",
    "CallWarning",
    "CallTag",
    "Event",
    "HandleClosed",
    "HandleOpened",
    "HandleRolledBack",
    "LlmDoEvent",
    "ResponseCompleted",
    "RunEnded",
    "RunFailed",
    "RunFinished",
    "RunStarted",
    "StreamEvent",
]


# -- llm-do's own events, which a live run streams ------------------------------------------------


@dataclass(frozen=True, slots=True)
class CallStarted(Event):
    """A call of an entry started (its toolsets are being acquired)."""

    call: CallTag
    toolsets: tuple[str, ...]
    attachments: tuple[AttachmentInfo, ...] = ()
    """The files the call received (never their bytes)."""


@dataclass(frozen=True, slots=True)
class AgentStarted(Event):
    """The call's pydantic-ai agent starts its run, with this model."""

    call: CallTag
    model: Model | str | None


@dataclass(frozen=True, slots=True)
class CallEnded(Event):
    """A call ended, after its teardown; `usage` is its own (children not included)."""

    call: CallTag
    outcome: Outcome
    usage: RunUsage
    error: BaseException | None


@dataclass(frozen=True, slots=True)
class CallWarning(Event):
    """What a call's model reply looked like when it was not what it seemed (also in `CallRecord.warnings`)."""

    call: CallTag
    message: str


@dataclass(frozen=True, slots=True)
class ApprovalRequested(Event):
    """A tool call waits for an answer; answer it with `LiveRun.decide(request.approval_id, ...)`.

    A call its policy denies, or that the approval mode decides, asks nobody: only its `ApprovalDecided` comes."""

    call: CallTag | None
    request: ApprovalRequest
    decision: str
    """The policy's verdict that asks for it (`ask`)."""


@dataclass(frozen=True, slots=True)
class ApprovalDecided(Event):
    """The decision on a requested tool call: `approved`, else `why` it was denied."""

    call: CallTag | None
    request: ApprovalRequest
    approved: bool
    why: str | None = None
    error: BaseException | None = None
    """What deciding raised (no approver, say), if it raised."""


@dataclass(frozen=True, slots=True)
class HandleOpened(Event):
    call: CallTag | None
    handle: str


@dataclass(frozen=True, slots=True)
class HandleClosed(Event):
    """A tool took a handle back (`Handles.pop`): it commits or closes what was behind it."""

    call: CallTag | None
    handle: str


@dataclass(frozen=True, slots=True)
class HandleRolledBack(Event):
    """A handle still open when its scope ended was released (rolled back, never committed)."""

    call: CallTag | None
    handle: str
    error: BaseException | None = None
    """What the release raised, if it failed."""


# -- what only a live run streams ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CallEvent(Event):
    """One pydantic-ai event of a call's agent run (a part of the model's response, a tool call, its result)."""

    call: CallTag
    event: AgentStreamEvent


@dataclass(frozen=True, slots=True)
class ResponseCompleted(Event):
    """A model response of the call is complete: its parts and its usage."""

    call: CallTag
    response: ModelResponse


@dataclass(frozen=True, slots=True)
class RunFinished(Event):
    """The last event of a run that succeeded."""

    result: RunResult
    call: None = None


@dataclass(frozen=True, slots=True)
class RunFailed(Event):
    """The last event of a run that failed or was cancelled; `report` is what it left (None if it never started)."""

    error: BaseException
    report: RunReport | None
    call: None = None


LlmDoEvent: TypeAlias = (
    "CallStarted | AgentStarted | CallEnded | CallWarning | ApprovalRequested | ApprovalDecided "
    "| HandleOpened | HandleClosed | HandleRolledBack"
)
"""llm-do's own events, as a live run streams them."""

StreamEvent: TypeAlias = "CallEvent | ResponseCompleted | LlmDoEvent | RunFinished | RunFailed"
"""What `Runtime.stream` yields."""


# -- the run's own bookkeeping (tracing and leak checks observe it; never streamed) -------------------


@dataclass(frozen=True, slots=True)
class RunStarted(Event):
    entry: str
    call: None = None


@dataclass(frozen=True, slots=True)
class RunEnded(Event):
    """The run ended, after its teardown; `holder` is the result or report handed to its caller."""

    outcome: Outcome
    error: BaseException | None
    usage: RunUsage | None
    holder: RunResult | RunReport | None
    call: None = None
