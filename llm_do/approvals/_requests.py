"""The asking protocol: a question about one call (`ApprovalRequest`), the approver's answer (`Approval`),
asking an approver within a time limit, and the errors when a call is denied or nobody may answer it."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, get_args

from ..errors import ConfigurationError, LlmDoError
from ..scopes import system_timer

if TYPE_CHECKING:
    from ..files import AttachmentInfo

__all__ = [
    "Approval",
    "ApprovalChoice",
    "ApprovalDenied",
    "ApprovalRequest",
    "ApprovalUnavailable",
    "Approver",
    "CHOICES",
    "RunSuspended",
    "approval_id",
    "ask_approver",
    "ask_within",
    "check_approver",
]


ApprovalChoice: TypeAlias = Literal["approve", "approve_for_session", "deny"]

CHOICES: tuple[str, ...] = get_args(ApprovalChoice)


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One call that needs a decision, as the approver sees it."""

    entry: str
    """The entry whose call wants to use the tool."""
    depth: int
    """That call's depth: 0 for the top-level call."""
    chain: tuple[str, ...]
    """Entry names from the top-level call down to `entry`."""
    toolset: str
    tool: str
    args: Mapping[str, Any]
    """The validated arguments (read-only)."""
    reason: str
    """Why it needs approval: the policy entry, the tool's own flag, or the rule's reason."""
    description: str
    """One human-readable line describing the call, for a prompt or a log."""
    approval_id: str
    """A stable id of this question (`apr_...`): the same call at the same place of a run, replayed, gets
    the same id. Answer a live run's question with it (`LiveRun.decide`)."""
    call_id: str
    """The id of the llm-do call whose tool call this is (`CallRecord.id`)."""
    tool_call_id: str | None
    """pydantic-ai's id of the tool call (`ToolCallPart.tool_call_id`), to attach the question to the tool
    call a user interface already shows; None for `CallScope.call_agent` from Python."""
    attachments: tuple[AttachmentInfo, ...] = ()
    """The files the call hands over: name, size, media type and digest (never their bytes)."""


@dataclass(frozen=True, slots=True)
class Approval:
    """The approver's answer. `approve_for_session` also approves identical calls for the rest of the session."""

    choice: ApprovalChoice
    note: str | None = None
    """Shown to the model (or in `ApprovalDenied`) when the call is denied."""

    def __post_init__(self) -> None:
        if self.choice not in CHOICES:
            raise ValueError(f"Approval.choice must be one of {', '.join(map(repr, CHOICES))}, got {self.choice!r}")

    @classmethod
    def approve(cls, note: str | None = None) -> Approval:
        return cls("approve", note)

    @classmethod
    def for_session(cls, note: str | None = None) -> Approval:
        return cls("approve_for_session", note)

    @classmethod
    def deny(cls, note: str | None = None) -> Approval:
        return cls("deny", note)


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


class RunSuspended(LlmDoError):
    """Raised by an approver that leaves its question open outside the run, to be answered when the run is made
    again (a parked job: `llm_do.jobs.RunParked`); the run ends.

    The run's other parallel calls are not cut short by it: each goes on to its end, or to a suspension of its
    own, before the exception leaves the tool calls they run beside (what they paid for is kept, and their
    questions are left open together)."""


Approver: TypeAlias = Callable[[ApprovalRequest], Approval | ApprovalChoice | Awaitable[Approval | ApprovalChoice]]
"""Sync or async. A sync approver runs in a worker thread, so it may block (a terminal prompt).
Questions of different runs reach it at the same time: an approver that can ask only one at a
time serialises itself."""


def approval_id(path: Sequence[tuple[str, str | None]], tool_call_id: str) -> str:
    """The stable id of a question: from the call's path (each entry from the top-level call down, with
    the parent's tool call that started it) and the tool call's id."""
    text = json.dumps([list(path), tool_call_id], separators=(",", ":"), ensure_ascii=False)
    return "apr_" + hashlib.sha256(text.encode()).hexdigest()[:16]


def check_approver(approver: object) -> None:
    """Refuse an approver that cannot be called."""
    if approver is not None and not callable(approver):
        raise ConfigurationError(f"approver must be a callable taking an ApprovalRequest, got {approver!r}")


async def ask_within(approver: Approver, request: ApprovalRequest, seconds: float) -> Approval | None:
    """The approver's answer, or None when it gave none within `seconds` (it is then cancelled).

    The approver is awaited in the asking task, so its answer reaches the call without a turn of
    the event loop in between; the deadline cancels that task, as `asyncio.timeout` does, and is
    armed in an empty context: a timer keeps its context until it is due or purged, and the run's
    context must not outlive the run."""
    task = asyncio.current_task()
    assert task is not None, "an approver is asked from a task"
    cancelling = task.cancelling()
    deadline = _Deadline(task)
    timer = system_timer(seconds, deadline)
    try:
        answer = await ask_approver(approver, request)
    except (Exception, asyncio.CancelledError):
        if deadline.expired and task.uncancel() <= cancelling:
            return None  # the deadline cancelled it: what the approver did next is of no use
        raise  # its own error, or a cancellation from outside (which wins over the deadline)
    finally:
        timer.cancel()
    if deadline.expired:  # it answered although its time was up (it caught the cancellation)
        if task.uncancel() > cancelling:
            raise asyncio.CancelledError  # the task was cancelled from outside too
        return None
    return answer


class _Deadline:
    """Cancels the task asking an approver when the time for an answer is up."""

    __slots__ = ("expired", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.expired = False

    def __call__(self) -> None:
        self.expired = True
        self.task.cancel()


async def ask_approver(approver: Approver, request: ApprovalRequest) -> Approval:
    """The approver's answer to `request` (a sync approver runs in a worker thread)."""
    if _is_async(approver):
        result: Any = await approver(request)  # type: ignore[misc]
    else:
        result = await asyncio.to_thread(approver, request)  # a blocking prompt must not block the loop
        if inspect.isawaitable(result):
            result = await result
    if isinstance(result, Approval):
        return result
    if isinstance(result, str) and result in CHOICES:
        return Approval(result)  # type: ignore[arg-type]
    raise TypeError(
        f"the approver returned {result!r} for tool {request.tool!r} of toolset {request.toolset!r}; "
        "return an llm_do.Approval or one of 'approve', 'approve_for_session', 'deny'"
    )


def _is_async(func: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__)
