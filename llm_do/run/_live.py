"""Live runs: one stream per run, every call's events in it, and the run's approvals answered from it.

`Runtime.stream(...)` opens a `LiveRun`. The live run is one more observer of its run (it hears
llm-do's own events: calls, approvals, handles), the `event_stream_handler` of every agent run of
every call in it (pydantic-ai's events, tagged with their call), and the run's approver (a question
waits until `LiveRun.decide` answers it). Its buffer is bounded: when the consumer does not read,
the run waits at its next model event. A consumer that leaves cancels the run and waits for its
teardown.

A resumable live run (`Runtime.stream(..., resumable=True)`) keeps going when its consumer leaves: it keeps
a log of its events, and every consumer, the first or one that comes later (`Runtime.live_run(session_id)`),
reads it from the start and then follows the run. The run never waits for a consumer; the log keeps every
event until it holds `keep` of them, and from then on drops the deltas of model responses that have completed
(each `ResponseCompleted` carries its whole response).
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import logging
import uuid
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.messages import AgentStreamEvent, FinalResultEvent, PartDeltaEvent, PartEndEvent, PartStartEvent
from pydantic_ai.result import AgentStream

from ..approvals._requests import (
    Approval,
    ApprovalChoice,
    ApprovalNotPending,
    ApprovalRequest,
    Approver,
    ask_approver,
    parks,
)
from ..events import (
    AgentStarted,
    ApprovalDecided,
    ApprovalRequested,
    CallEnded,
    CallEvent,
    CallStarted,
    CallTag,
    CallWarning,
    Event,
    HandleClosed,
    HandleOpened,
    HandleRolledBack,
    ResponseCompleted,
    RunFailed,
    RunFinished,
    StreamEvent,
)
from ..results import RunResult, run_report
from ..scopes._tasks import wait_out

logger = logging.getLogger("llm_do")

_STREAMED: frozenset[type[Event]] = frozenset(
    {CallStarted, AgentStarted, CallEnded, ApprovalRequested, ApprovalDecided, HandleOpened, HandleClosed}
    | {HandleRolledBack, CallWarning}
)
"""llm-do's own events a live run passes on (the scopes' bookkeeping stays with tracing and leak checks)."""
_DELTAS = (PartStartEvent, PartDeltaEvent, PartEndEvent, FinalResultEvent)
"""The events of a model response being streamed, which its `ResponseCompleted` sums up."""


class LiveRun:
    """A run being streamed: iterate it for its events, answer its approvals with `decide`.

    The events come in the order they happened (the calls of a run run concurrently: events of
    different calls interleave; each call's own are in order). The last event is `RunFinished` (with
    the result) or `RunFailed` (with the exception and the run's report); iteration then stops. It
    never raises the run's exception: `await run.result()` does, as `Runtime.run` would.
    """

    def __init__(
        self,
        entry: str,
        buffer: int,
        approver: Approver | None = None,
        *,
        model_events: bool = True,
        resumable: bool = False,
        keep: int = 10_000,
    ) -> None:
        self.entry = entry
        self.message_id = f"msg_{uuid.uuid4().hex}"
        """The id of the answer this run gives, as a web page's message (`llm_do.web` sends it in `start`)."""
        self.resumable = resumable
        """Whether the run keeps going when its consumer leaves, and every consumer reads it from the start."""
        """The name of the entry being run."""
        self.model_events = model_events
        """Whether the agents' pydantic-ai events are streamed (else llm-do's own only)."""
        self._limit = buffer
        self._events: deque[StreamEvent] = deque()
        self._model_events = 0
        """How many `CallEvent`s the buffer holds (llm-do's own events are few and never wait)."""
        self._readable = asyncio.Event()
        self._room = asyncio.Event()
        self._pending: dict[str, tuple[ApprovalRequest, asyncio.Future[Approval]]] = {}
        self._asked: dict[str, ApprovalRequest] = {}
        """Every question asked so far, by approval id, in the order they were asked."""
        self._approver = approver
        self._ended = False
        self._left = False
        """The consumer left: nothing more is buffered, and the run never waits for room."""
        self._outcome: RunResult | BaseException | None = None
        self._keep = keep
        self._seqs: list[int] = []
        self._log: list[StreamEvent] = []
        """A resumable run's events (`_seqs`: their numbers, rising; compaction leaves gaps)."""
        self._grew = asyncio.Event()
        self._compact_at = keep
        self.driver: asyncio.Task[None] | None = None
        """The task running a resumable run whose first consumer left."""
        self._withdrawn: dict[str, asyncio.Future[None]] = {}
        """Questions withdrawn (`withdraw`): each done once the run's approver call for it has returned."""

    # -- what the consumer uses ----------------------------------------------------

    @property
    def pending(self) -> tuple[ApprovalRequest, ...]:
        """The run's questions waiting for an answer, in the order they were asked."""
        return tuple(request for request, answer in self._pending.values() if not answer.done())

    @property
    def asked(self) -> tuple[ApprovalRequest, ...]:
        """Every question the run asked so far, answered or not, in the order they were asked (a page's answer
        to a question that is no longer pending was answered already, while one never asked is not this run's)."""
        return tuple(self._asked.values())

    def decide(self, approval_id: str, choice: ApprovalChoice, note: str | None = None) -> None:
        """Answer the pending question `approval_id`: `approve`, `approve_for_session` or `deny` (`note` is
        shown to the model when denied). Raises `ApprovalNotPending` for an id not waiting in this run."""
        answer = Approval(choice, note)
        found = self._pending.get(approval_id)
        if found is None or found[1].done():
            raise ApprovalNotPending(approval_id, tuple(request.approval_id for request in self.pending))
        found[1].set_result(answer)

    def answer(self, approval_id: str) -> asyncio.Future[Approval] | None:
        """The future the answer to pending question `approval_id` comes in (from `decide`, or the stream's
        approver), or the exception that withdrew it; None when the question is not pending."""
        found = self._pending.get(approval_id)
        return None if found is None else found[1]

    def withdraw(self, approval_id: str, error: BaseException) -> asyncio.Future[None] | None:
        """End the pending question `approval_id` with `error` instead of an answer: it is no longer pending (a
        later `decide` is refused with `ApprovalNotPending`), and the call that asked it raises `error` (a
        `RunSuspended`: the question is left open elsewhere, a parked job's). A future done once the run's
        call has taken `error` (the question's wait, and its deadline, are over); None when the question is not
        pending (answered already, or unknown), so that nothing was withdrawn."""
        found = self._pending.get(approval_id)
        if found is None or found[1].done():
            return None
        found[1].set_exception(error)
        waiter = self._withdrawn.get(approval_id)
        if waiter is None:
            waiter = self._withdrawn[approval_id] = asyncio.get_running_loop().create_future()
        return waiter

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        return self._follow() if self.resumable else self._iterate()

    @property
    def ended(self) -> bool:
        """Whether the run has ended (its last event is in the stream)."""
        return self._ended

    async def result(self) -> RunResult:
        """The run's result, once it has ended (the events not read yet are dropped); raises the run's
        exception, with its report (`llm_do.run_report(error)`), if it failed."""
        if self.resumable:
            while not self._ended:
                await self._grew.wait()
        else:
            async for _ in self._iterate():
                pass
        outcome = self._outcome
        if isinstance(outcome, BaseException):
            raise outcome
        assert outcome is not None
        return outcome

    async def _iterate(self) -> AsyncIterator[StreamEvent]:
        events = self._events
        while True:
            while not events:
                if self._ended:
                    return
                self._readable.clear()
                await self._readable.wait()
            event = events.popleft()
            if type(event) is CallEvent:
                self._model_events -= 1
                self._room.set()
            yield event

    async def _follow(self) -> AsyncIterator[StreamEvent]:
        """A resumable run's events from the start of its log, then as they come."""
        seen = -1
        while True:
            grew = self._grew
            seqs = self._seqs
            at = bisect.bisect_right(seqs, seen)
            if at < len(seqs):
                seen = seqs[at]
                yield self._log[at]
                continue
            if self._ended:
                return
            await grew.wait()

    # -- what the run uses ---------------------------------------------------------

    def notify(self, event: Event) -> None:
        """An observer of the run: llm-do's own events join the stream."""
        kind = type(event)
        if kind not in _STREAMED:
            return
        if kind is ApprovalRequested:
            request = event.request  # type: ignore[attr-defined]
            self._pending.setdefault(request.approval_id, (request, asyncio.get_running_loop().create_future()))
            self._asked.setdefault(request.approval_id, request)
        elif kind is ApprovalDecided:
            self._pending.pop(event.request.approval_id, None)  # type: ignore[attr-defined]
        self._put(event)  # type: ignore[arg-type]

    @property
    def parks(self) -> bool:
        """Whether the stream's approver parks each question it is asked (`llm_do.jobs.LiveParking`'s): then it is
        still asked once the runtime stops asking (`Runtime.stop_asking`), and the run parks instead of a denial."""
        return parks(self._approver)

    async def __call__(self, request: ApprovalRequest) -> Approval:
        """The run's approver: the answer given with `decide` (or by the approver given to the stream, if it
        answers first)."""
        found = self._pending.get(request.approval_id)
        if found is None:  # asked without an ApprovalRequested event: an approver called directly
            found = self._pending[request.approval_id] = (request, asyncio.get_running_loop().create_future())
            self._asked.setdefault(request.approval_id, request)
        answer = found[1]
        try:
            if self._approver is None or answer.done():
                return await answer
            asking = asyncio.ensure_future(ask_approver(self._approver, request))
            asking.add_done_callback(functools.partial(_relay, answer))  # the approver answers, unless `decide` did
            try:
                return await answer
            finally:
                if not asking.done():
                    asking.cancel()
        finally:
            withdrawn = self._withdrawn.pop(request.approval_id, None)
            if withdrawn is not None and not withdrawn.done():
                withdrawn.set_result(None)

    async def handle(self, ctx: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
        """The `event_stream_handler` of every agent run in the run: each event joins the stream, tagged."""
        tag = _tag_of(ctx)
        async for event in events:
            await self._put_model(CallEvent(tag, event))
        self._completed(tag, events)

    def _completed(self, tag: CallTag, events: AsyncIterable[AgentStreamEvent]) -> None:
        if isinstance(events, AgentStream):
            self._put(ResponseCompleted(tag, events.response))

    def _put(self, event: StreamEvent) -> None:
        if self.resumable:
            self._logged(event)
            return
        if self._left:
            return
        self._events.append(event)
        self._readable.set()

    async def _put_model(self, event: CallEvent) -> None:
        if self.resumable:  # never waits: the log is bounded by compaction instead
            self._logged(event)
            return
        while self._model_events >= self._limit and not self._left:
            self._room.clear()
            await self._room.wait()  # backpressure: the run waits until the consumer reads
        if self._left:
            return
        self._model_events += 1
        self._events.append(event)
        self._readable.set()

    def _logged(self, event: StreamEvent) -> None:
        self._seqs.append(self._seqs[-1] + 1 if self._seqs else 0)
        self._log.append(event)
        if len(self._log) > self._compact_at:
            self._compact()
        grew, self._grew = self._grew, asyncio.Event()
        grew.set()

    def _compact(self) -> None:
        """Drop the deltas of the model responses that have completed, once the log holds `keep` events."""
        completed: dict[str, int] = {}
        for index, event in enumerate(self._log):
            if type(event) is ResponseCompleted:
                completed[event.call.id] = index
        kept = [
            index
            for index, event in enumerate(self._log)
            if not (
                type(event) is CallEvent
                and isinstance(event.event, _DELTAS)
                and index < completed.get(event.call.id, -1)
            )
        ]
        self._seqs = [self._seqs[index] for index in kept]
        self._log = [self._log[index] for index in kept]
        self._compact_at = max(self._keep, len(self._log) + self._keep // 2)

    def _end(self, outcome: RunResult | BaseException) -> None:
        self._outcome = outcome
        if isinstance(outcome, BaseException):
            self._put(RunFailed(outcome, run_report(outcome)))
        else:
            self._put(RunFinished(outcome))
        self._ended = True
        self._pending.clear()
        self._readable.set()
        self._grew.set()

    def _leave(self) -> None:
        self._left = True
        self._events.clear()
        self._model_events = 0
        self._room.set()

    def handler(self, also: EventStreamHandler[Any] | None) -> EventStreamHandler[Any]:
        """The event stream handler of the run's agent runs: this stream, and `also` (the runtime's) beside it."""
        if also is None:
            return self.handle
        guarded = GuardedHandler(also)

        async def both(ctx: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
            tag = _tag_of(ctx)

            async def relay() -> AsyncIterator[AgentStreamEvent]:
                async for event in events:
                    await self._put_model(CallEvent(tag, event))
                    yield event

            relayed = relay()
            await guarded(ctx, relayed)
            async for _ in relayed:  # what the runtime's handler left unread still joins the stream
                pass
            self._completed(tag, events)

        return both

    def __repr__(self) -> str:
        return f"LiveRun({self.entry!r}, buffered={len(self._events)}, pending={len(self.pending)})"


class GuardedHandler:
    """The runtime's `event_stream_handler` for one run: what it raises is logged once per run on the
    `llm_do` logger and never fails the run (pydantic-ai drains the events it left unread)."""

    __slots__ = ("handler", "logged")

    def __init__(self, handler: EventStreamHandler[Any]) -> None:
        self.handler = handler
        self.logged = False

    async def __call__(self, ctx: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
        try:
            await self.handler(ctx, events)
        except Exception:
            if not self.logged:
                self.logged = True
                logger.exception(
                    "the runtime's event_stream_handler %r raised; the run goes on without it for these events "
                    "(logged once per run)",
                    self.handler,
                )


def _relay(answer: asyncio.Future[Approval], asking: asyncio.Future[Approval]) -> None:
    """The stream's approver has answered (or failed): that is the question's answer, unless it has one already."""
    if answer.done():
        if not asking.cancelled():
            asking.exception()  # retrieved: an approver's failure after the answer is of no use
        return
    if asking.cancelled():
        answer.cancel()  # the approver was cancelled by another than this live run
        return
    error = asking.exception()
    if error is None:
        answer.set_result(asking.result())
    else:
        answer.set_exception(error)


def _tag_of(ctx: RunContext[Any]) -> CallTag:
    scope: Any = ctx.deps
    sink = getattr(scope, "sink", None)
    if sink is not None and sink.call is not None:
        tag: CallTag = sink.call
        return tag
    return scope._tag()  # type: ignore[no-any-return]


Launch = Callable[["LiveRun"], Awaitable[RunResult]]
"""Starts the run with a live run as its observer, event stream handler and approver."""
Outcome = RunResult | BaseException
"""How a run ended: its result, or the exception it raised (or was cancelled with)."""
OnEnd = Callable[[Outcome], Awaitable[Outcome]]
"""Awaited with a live run's outcome once the run and its teardown are done, before the stream's last event;
what it returns is the outcome the stream ends with."""


@asynccontextmanager
async def open_stream(
    entry: str,
    buffer: int,
    approver: Approver | None,
    launch: Launch,
    *,
    model_events: bool = True,
    resumable: bool = False,
    keep: int = 10_000,
    on_end: OnEnd | None = None,
) -> AsyncIterator[LiveRun]:
    """Start a run as a live run; leaving the block before the run ended cancels it and waits for its teardown,
    unless it is resumable: it then goes on (`LiveRun.driver`), and the runtime waits for it when it closes.
    `on_end` is awaited with the run's outcome before the stream's last event, and gives the outcome it ends with."""
    live = LiveRun(entry, buffer, approver, model_events=model_events, resumable=resumable, keep=keep)

    async def drive() -> None:
        outcome: Outcome
        try:
            outcome = await launch(live)
        except BaseException as error:  # the run's failure is an event (and `result()` raises it)
            outcome = error
        if on_end is not None:
            try:
                outcome = await on_end(outcome)
            except BaseException as error:
                outcome = error
        live._end(outcome)

    task = asyncio.get_running_loop().create_task(drive())
    try:
        yield live
    finally:
        if resumable and not task.done():  # it goes on: the runtime waits for its run when it closes
            live.driver = task
            task.add_done_callback(functools.partial(_let_go, live))
        else:
            live._leave()
            if not task.done():
                task.cancel()
                cancelled = await wait_out((task,))  # its teardown is waited for even when this wait is cancelled
                if cancelled is not None:
                    raise cancelled
        del task


def _let_go(live: LiveRun, task: asyncio.Task[None]) -> None:
    live.driver = None
