"""What happens in a run, as events, and who hears them.

Scopes, gates and handle maps announce what they do (a call started, an approval was asked, a
handle was opened, an object was adopted) to the `Sink` of the call (or run) they belong to. A
sink forwards each event to the run's observers: tracing, leak tracking and a live stream are
observers. The current call's sink is in the context variable `CURRENT`, which is None when nobody
observes the run: an unobserved run pays one lookup where an event would be announced, and nothing
more. A sink is emptied when its call ends, so that a callback that captured the call's context
afterwards reaches nothing.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias

if TYPE_CHECKING:
    from pydantic_ai.messages import AgentStreamEvent, ModelResponse
    from pydantic_ai.models import Model
    from pydantic_ai.usage import RunUsage

    from .approval import ApprovalRequest
    from .attachments import AttachmentInfo
    from .run import Outcome, RunReport, RunResult
    from .scopes import Scope

__all__ = [
    "CURRENT",
    "Adopted",
    "AgentStarted",
    "ApprovalDecided",
    "ApprovalRequested",
    "CallEnded",
    "CallEvent",
    "CallStarted",
    "CallWarning",
    "CallTag",
    "Event",
    "FinalizerFailed",
    "HandedOver",
    "HandleClosed",
    "HandleOpened",
    "HandleRolledBack",
    "LlmDoEvent",
    "Observer",
    "ResponseCompleted",
    "RunEnded",
    "RunFailed",
    "RunFinished",
    "RunStarted",
    "Sink",
    "StreamEvent",
    "TeardownEnded",
]


@dataclass(frozen=True, slots=True)
class CallTag:
    """Which call an event belongs to: enough to place it in the run's call tree."""

    id: str
    """The call's id in its run (`call_1` is the top-level call)."""
    parent: str | None
    """The id of the call that started this one; None for the top-level call."""
    entry: str
    depth: int
    chain: tuple[str, ...]
    """Entry names from the top-level call down to this one."""
    tool_call_id: str | None
    """The parent's pydantic-ai tool call that started this call (an agent used as a tool); None for the
    top-level call and for calls made from Python (`CallScope.call_agent`)."""


class Event:
    """Base class of every event; `call` is the call it happened in (None: the run itself)."""

    __slots__ = ()
    call: CallTag | None


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


# -- the scopes' own bookkeeping (tracing and leak checks observe it; never streamed) ----------------


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


@dataclass(frozen=True, slots=True)
class Adopted(Event):
    """A scope took ownership of an object (it will release it when the scope ends)."""

    owner: object
    scope: Scope | None
    obj: object
    label: str
    call: None = None


@dataclass(frozen=True, slots=True)
class TeardownEnded(Event):
    """A scope released everything it owned."""

    owner: object
    call: None = None


@dataclass(frozen=True, slots=True)
class FinalizerFailed(Event):
    """Releasing an object failed, or took longer than its time budget (`error` is a `TimeoutError` then)."""

    label: str
    error: BaseException
    call: None = None


@dataclass(frozen=True, slots=True)
class HandedOver(Event):
    """A run's per-run objects were given to its caller in `holder` (its result or report)."""

    holder: object
    objs: tuple[object, ...]
    call: None = None


class Observer(Protocol):
    """Hears the events of the runs it observes. `notify` runs in the task where the event happened,
    synchronously: it must not block, and it must not raise."""

    def notify(self, event: Event) -> None: ...


class Sink:
    """Where one call (or run) announces its events: its tag and the run's observers."""

    __slots__ = ("call", "observers")

    def __init__(self, call: CallTag | None, observers: tuple[Observer, ...]) -> None:
        self.call = call
        self.observers = observers

    def emit(self, event: Event) -> None:
        for observer in self.observers:
            observer.notify(event)

    def close(self) -> None:
        """The call has ended: a context snapshot that still holds this sink reaches no observer."""
        self.observers = ()

    def __repr__(self) -> str:
        return f"Sink({self.call.id if self.call is not None else 'run'}, observers={len(self.observers)})"


CURRENT: ContextVar[Sink | None] = ContextVar("llm_do_sink", default=None)
"""The sink of the call running in this context; None when nobody observes its run."""
