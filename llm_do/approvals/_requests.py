"""The asking protocol: a question about one call (`ApprovalRequest`), the approver's answer (`Approval`),
asking an approver within a time limit, and the errors when a call is denied or nobody may answer it."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import secrets
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, get_args

from ..errors import ConfigurationError, LlmDoError
from ..scopes._tasks import system_timer

if TYPE_CHECKING:
    from ..files._attachments import AttachmentInfo


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
    """The id of this question (`apr_...`), unique across sessions, runs and jobs: two runs never share one,
    even when their models give their tool calls the same ids (a replayed recording). A job's question keeps
    its id when the job runs again, so its stored decision finds it. Answer a live run's question with it
    (`LiveRun.decide`, `Session.decide`)."""
    call_id: str
    """The id of the llm-do call whose tool call this is (`CallRecord.id`)."""
    tool_call_id: str | None
    """pydantic-ai's id of the tool call (`ToolCallPart.tool_call_id`), to attach the question to the tool
    call a user interface already shows; None for `CallScope.call_agent` from Python."""
    attachments: tuple[AttachmentInfo, ...] = ()
    """The files the call hands over: name, size, media type and digest (never their bytes)."""
    session_id: str | None = None
    """Whose question it is: the id of the session whose run asks; None for a run given no session."""


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


WAYS_OUT = (
    "give the run an approver (Runtime(approver=...), runtime.session(id, approver=...) or "
    "runtime.run(..., approver=...); a live run, runtime.stream(...), is its own), or set approval_mode "
    "(LLM_DO_APPROVAL_MODE) to 'approve_all' or 'reject_all', or declare the tools safe (a ToolPolicy for the "
    "toolset, @tool(read_only=True) for a tool)"
)
"""What to do when a question has no one to answer it (`ApprovalUnavailable`, `NoApproverWarning`)."""


class ApprovalUnavailable(LlmDoError):
    """A call needs approval, the mode is `prompt`, and the run has no approver to ask."""

    def __init__(self, request: ApprovalRequest) -> None:
        self.request = request
        super().__init__(
            f"entry {request.entry!r} called tool {request.tool!r} of toolset {request.toolset!r}, which needs "
            f"approval ({request.reason}), but approval_mode is 'prompt' and the run has no approver: {WAYS_OUT}."
        )


class NoApproverWarning(UserWarning):
    """A run starts that no one can answer (`prompt` mode, no approver for the run, its session or the `Runtime`, and
    not a live run) while some toolsets' calls can ask: such a call would fail with `ApprovalUnavailable`. Said once
    per runtime; filter it (`warnings.filterwarnings("ignore", category=NoApproverWarning)`) to silence it."""


class RunSuspended(LlmDoError):
    """Raised by an approver that leaves its question open outside the run, to be answered when the run is made
    again (a parked job: `llm_do.jobs.RunParked`); the run ends.

    The run's other parallel calls are not cut short by it: each goes on to its end, or to a suspension of its
    own, before the exception leaves the tool calls they run beside (what they paid for is kept, and their
    questions are left open together)."""


Approver: TypeAlias = Callable[[ApprovalRequest], Approval | ApprovalChoice | Awaitable[Approval | ApprovalChoice]]
"""Sync or async. A sync approver runs in a worker thread, so it may block (a terminal prompt).
Questions of different runs, and those of one model response, reach it at the same time: an approver
that can ask only one at a time serialises itself."""


class ApprovalNotPending(LlmDoError):
    """A decision named an approval that is not waiting for an answer there (`LiveRun.decide`, `Session.decide`)."""

    def __init__(self, approval_id: str, pending: tuple[str, ...], where: str = "this run") -> None:
        self.approval_id = approval_id
        self.pending = pending
        """The ids that are pending there."""
        waiting = ", ".join(pending) if pending else "none"
        super().__init__(
            f"approval {approval_id!r} is not pending in {where} (pending: {waiting}); answer an id listed in its "
            "`pending`: an ApprovalRequested event of the run's stream that has no ApprovalDecided yet"
        )


def approval_id(space: str, path: Sequence[tuple[str, str | None]], tool_call_id: str) -> str:
    """The id of a question: from its run's id space (`approval_space`), the call's path (each entry from the
    top-level call down, with the parent's tool call that started it) and the tool call's id."""
    text = json.dumps([space, list(path), tool_call_id], separators=(",", ":"), ensure_ascii=False)
    return "apr_" + hashlib.sha256(text.encode()).hexdigest()[:16]


_STABLE: ContextVar[str | None] = ContextVar("llm_do_stable_approval_ids", default=None)


@contextmanager
def stable_approval_ids(space: str) -> Iterator[None]:
    """Runs started in the block take their questions' ids from `space` (a job's), not from a space of their
    own: a run made again asks the same question with the same id, which a stored decision needs."""
    token = _STABLE.set(space)
    try:
        yield
    finally:
        _STABLE.reset(token)


def approval_space() -> str:
    """The id space of a run starting now: the one `stable_approval_ids` gives, else a new random one, so that
    no two runs (of any session, runtime or process) share a question id."""
    stable = _STABLE.get()
    return f"stable {stable}" if stable is not None else "run " + secrets.token_hex(16)


def own_approval_ids() -> None:
    """Runs started from the current context on (a tool's own runs, in its run's task) get id spaces of their
    own, whatever `stable_approval_ids` gave the run that started them."""
    if _STABLE.get() is not None:
        _STABLE.set(None)


def parks(approver: object) -> bool:
    """Whether `approver` never waits for a person: it parks each question it is asked (as a job's, raising
    `RunParked`), so it is still asked once the process stops asking (`stop_asking`), and its run parks instead of
    being denied. An approver says so with a true `parks` attribute."""
    return getattr(approver, "parks", False) is True


def check_approver(approver: object) -> None:
    """Refuse an approver that cannot be called."""
    if approver is not None and not callable(approver):
        raise ConfigurationError(f"approver must be a callable taking an ApprovalRequest, got {approver!r}")


async def ask_within(
    approver: Approver, request: ApprovalRequest, seconds: float, asking: set[Any] | None = None
) -> Approval | None:
    """The approver's answer, or None when it gave none within `seconds` (it is then cancelled), or before one of
    `asking`'s deadlines was called (each is the deadline of a question still waiting).

    The approver is awaited in the asking task, so its answer reaches the call without a turn of
    the event loop in between; the deadline cancels that task, as `asyncio.timeout` does, and is
    armed in an empty context: a timer keeps its context until it is due or purged, and the run's
    context must not outlive the run."""
    task = asyncio.current_task()
    assert task is not None, "an approver is asked from a task"
    cancelling = task.cancelling()
    deadline = _Deadline(task)
    timer = system_timer(seconds, deadline)
    if asking is not None:  # where whoever stops asking (a shutdown) finds this deadline, to end it now
        asking.add(deadline)
    try:
        answer = await ask_approver(approver, request)
    except (Exception, asyncio.CancelledError):
        if deadline.expired and task.uncancel() <= cancelling:
            return None  # the deadline cancelled it: what the approver did next is of no use
        raise  # its own error, or a cancellation from outside (which wins over the deadline)
    finally:
        timer.cancel()
        if asking is not None:
            asking.discard(deadline)
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
