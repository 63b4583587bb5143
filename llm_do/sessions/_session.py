"""`Session`: one conversation across runs, opened by an id the application chooses.

`GLOBAL (runtime) ⊃ SESSION ⊃ RUN ⊃ CALL`. A session owns what a person keeps between requests:
its per-session objects (`SessionLocalSingleton` providers and per-session toolsets), its
"approve for session" answers, its approver, its conversation's history and its usage. It runs
one run at a time. It closes when the application closes it, when it has been idle for
`session_idle_timeout`, or when the runtime closes; its objects are then torn down like a run's.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from pydantic_ai.messages import ModelMessage
from pydantic_ai.usage import RunUsage

from ..approvals._grants import Grants
from ..approvals._requests import ApprovalChoice, ApprovalNotPending, ApprovalRequest, Approver
from ..errors import LlmDoError
from ..scopes._box import Box, current_box, session_context
from ..scopes._bus import Sink
from ..scopes._owner import ScopeOwner
from ..scopes._scope import NoPublicConstructor, Scope
from ..scopes._tasks import system_task, system_timer
from ._history import HistoryConflict, HistoryError, HistoryStore, StoredHistory, takes
from ._inbox import Inbox, OpenQuestion

if TYPE_CHECKING:
    from ..results import RunResult


class SessionError(LlmDoError):
    """A session was used in a way it cannot be: closed, from another runtime, or given its own history."""


class SessionBusy(SessionError):
    """A run was started in a session that is running another one."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            f"session {session_id!r} is running another run: a session runs one at a time, because a "
            "message sent meanwhile was written without seeing the answer to the one before. Wait for "
            "the run in progress to end (or cancel it) and send the message again, or use another session."
        )


class Releasable(Protocol):
    """What a session's overrides are to it (`llm_do.di`'s `Overrides`): released when it closes."""

    async def close(self, budget: float) -> bool:
        """Release them, each within `budget` seconds; True when a cancellation arrived meanwhile."""
        ...


class Answerable(Protocol):
    """A run whose questions can be answered by id: a live run (`LiveRun`)."""

    @property
    def pending(self) -> tuple[ApprovalRequest, ...]: ...
    def decide(self, approval_id: str, choice: ApprovalChoice, note: str | None = None) -> None: ...


class SessionRuntime(Protocol):
    """What a session needs from the runtime it belongs to."""

    @property
    def history_store(self) -> HistoryStore: ...
    @property
    def run(self) -> Callable[..., Awaitable[RunResult]]: ...
    @property
    def inbox(self) -> Inbox: ...
    def background_sink(self) -> Sink | None: ...


class SessionHost(SessionRuntime, Protocol):
    """What a session needs from the registry that opened it: its runtime's, and a closing it waits out."""

    def closing(self, session: Session, close: Callable[[], Awaitable[None]]) -> asyncio.Task[None]: ...


class Session(metaclass=NoPublicConstructor):
    """One conversation: its objects, approvals, history and usage, shared by its runs, one run at a time.

    Open it with `await runtime.session(session_id)`; run in it with `await session.run(entry, input)`
    (or `runtime.run(..., session=session)`). Each run is given the conversation so far as its
    `message_history`; the top-level call's messages become the history for the next run, and are
    saved to the runtime's `HistoryStore`.
    """

    def __init__(
        self,
        host: SessionHost,
        session_id: str,
        *,
        globals_owner: ScopeOwner,
        cleanup_timeout: float,
        idle_timeout: float,
        approver: Approver | None = None,
        overrides: Releasable | None = None,
    ) -> None:
        self.id = session_id
        self.overrides = overrides
        """The providers this session overrides for its runs and its objects (`runtime.session(id, overrides=...)`)."""
        self.approver = approver
        """Answers this session's approvals, unless a run has its own (a live run always does: it is its own
        approver); None: the runtime's approver."""
        self.usage = RunUsage()
        """Usage summed over the session's runs."""
        self.history: list[ModelMessage] = []
        """The conversation so far (the last run's top-level messages), as last read from the store (by
        `runtime.session(id)`, `refresh()` and each run's start) or saved."""
        self.version = 0
        """The store's version of the history, as last read or saved (0: the store keeps none)."""
        self.box = Box(overrides=overrides)
        self.owner = ScopeOwner(
            Scope.PER_SESSION,
            cleanup_timeout,
            globals_owner,
            cache={},
            context=functools.partial(session_context, self.box),  # its objects' tasks keep no run
            where=f"session {session_id!r}",  # a failed cleanup's log says whose it was
            late_cancel=False,  # closed in a system task (`start_closing`), which no run awaits
        )
        self.grants = Grants()
        """The calls approved for the rest of this session."""
        self._built = False
        """Whether the session's per-session providers have been made (by its first run)."""
        self.made: dict[str, Any] = {}
        """The agents its runs made to keep for the session (`CallScope.make_agent(..., keep="session")`), by name,
        each with its plan: callable in its later runs, forgotten when it closes."""
        self._host: SessionHost | None = host
        self._idle_timeout = idle_timeout
        self._timer: asyncio.TimerHandle | None = None
        self._loaded = False
        self._loading = asyncio.Lock()
        self._running: asyncio.Future[Any] | None = None
        self._answerable: Answerable | None = None
        """The session's live run while it runs: its questions are the session's inbox."""
        self._closed = False
        self._closing: asyncio.Future[None] | None = None
        self._ended = asyncio.Event()

    @property
    def busy(self) -> bool:
        """Whether a run is in progress in this session."""
        return self._running is not None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def loaded(self) -> bool:
        """Whether the session's history has been read from the store."""
        return self._loaded

    async def wait_closed(self) -> None:
        """Wait until the session has closed and torn down its objects (closed by the application, for
        being idle, or with its runtime)."""
        await self._ended.wait()

    async def build_once(self, make: Callable[[], Awaitable[object]]) -> None:
        """Make the session's per-session objects with `make`, on its first run only (a run that fails to make
        them leaves them to the next)."""
        if not self._built:
            await make()
            self._built = True

    @property
    def per_session(self) -> Mapping[str, Any]:
        """The session's per-session objects by provider (or toolset) name, while it is open."""
        return MappingProxyType(dict(self.owner.named))

    # -- the inbox --------------------------------------------------------------------------------

    @property
    def pending(self) -> tuple[ApprovalRequest, ...]:
        """The session's open questions, in the order they were asked: those of its live run
        (`runtime.stream(..., session=...)`) in this process that wait for an answer; none when no live run is in
        progress here. Questions of a run that is not live go to its approver, and are not listed. `questions()`
        lists them wherever they wait (another web process, a parked job)."""
        answerable = self._answerable
        return () if answerable is None else answerable.pending

    def decide(self, approval_id: str, choice: ApprovalChoice, note: str | None = None) -> None:
        """Answer the session's open question `approval_id` (`approve`, `approve_for_session` or `deny`; `note`
        is shown to the model when denied), from any task of the runtime's event loop, as `LiveRun.decide` does. Raises
        `ApprovalNotPending`, which names only this session's open questions, for an id that is not one of
        them. Who may answer is the application's to check."""
        answerable = self._answerable
        if answerable is None:
            raise ApprovalNotPending(approval_id, (), f"session {self.id!r}")
        try:
            answerable.decide(approval_id, choice, note)
        except ApprovalNotPending as refused:
            raise ApprovalNotPending(approval_id, refused.pending, f"session {self.id!r}") from None

    async def questions(self) -> tuple[OpenQuestion, ...]:
        """The session's open questions wherever they wait: its live run's here (`pending`), then those of the
        places its runtime's inbox asks (`runtime.inbox`: a live run of it in another web process, a parked run of
        it), each an `OpenQuestion` saying what it asks, its ids, whose it is and where it waits."""
        return await self._open_host().inbox.questions(self.id, self.pending)

    async def answer(self, approval_id: str, choice: ApprovalChoice, note: str | None = None) -> None:
        """Answer the session's open question `approval_id` wherever it waits (`questions()`): its live run's here
        as `decide` does, else in the first place of the runtime's inbox that holds it. Raises
        `ApprovalNotPending`, naming the session's open questions, when none holds it."""
        if any(request.approval_id == approval_id for request in self.pending):
            self.decide(approval_id, choice, note)
            return
        inbox = self._open_host().inbox
        if not await inbox.answer(self.id, approval_id, choice, note):
            found = await inbox.questions(self.id, self.pending)
            raise ApprovalNotPending(approval_id, tuple(q.approval_id for q in found), f"session {self.id!r}")

    async def run(self, entry: Any, input_data: Any, **options: Any) -> RunResult:
        """`runtime.run(entry, input_data, session=self, **options)`."""
        return await self._open_host().run(entry, input_data, session=self, **options)

    # -- what the runtime does with it -----------------------------------------------------------

    def _open_host(self) -> SessionHost:
        host = self._host
        if host is None or self._closed:
            raise SessionError(
                f"session {self.id!r} is closed (by the application, for being idle, or with its runtime); "
                f"open it again with runtime.session({self.id!r}): its history continues from the runtime's store"
            )
        return host

    async def load(self) -> None:
        """Read the history from the store as the session is opened (`runtime.session(id)`, not in a session
        closed meanwhile: its opener opens another): in full the first time, then as `refresh` does, so that
        what the application reads of an open session (`session.history`) is the store's, and costs a version
        check when nothing changed; a deleted conversation (no message, a version) loads as none."""
        if self._loaded:
            if not self._closed:
                await self.refresh()
            return
        async with self._loading:
            if not self._loaded and not self._closed:
                stored = await self._stored(None)
                self.history, self.version = stored.messages, stored.version
                self._loaded = True

    async def refresh(self) -> None:
        """Read the history again from the store, as a run starts and as the session is opened: another process
        sharing the store (a second web process, a worker that ran a parked run of it) may have continued or
        deleted the conversation. The store is given the session's copy, so that an unchanged conversation is
        not read again (a version check) and a continued one may be read from where the copy ends. A stored
        version is the truth, even with no message (deleted: the session's copy goes); a store that keeps none
        of it (version 0: evicted, `limit=0`) leaves the session's own copy. While a run holds the session, its
        history is the one the run read as it started, whose version its turn is saved over: only the run's own
        task reads it then (as it starts); for anyone else, refreshing does nothing until the run ends."""
        holder = self._running
        if holder is not None and holder is not asyncio.current_task():
            return
        held = StoredHistory(self.history, self.version) if self._loaded else None
        stored = await self._stored(held)
        if stored.version or stored.messages:
            self.history = stored.messages
        self.version = stored.version  # what the run's turn replaces when it is saved
        self._loaded = True

    async def _stored(self, held: StoredHistory | None) -> StoredHistory:
        store = self._open_host().history_store
        # In a system task: a connection pool's timers keep the context of the task that last released a
        # connection, and a run's must not outlive the run.
        if held is None or not takes(store, "load", "held"):
            stored = await system_task(store.load, self.id)
        else:
            stored = await system_task(functools.partial(store.load, self.id, held=held))
        if not isinstance(stored, StoredHistory):
            raise HistoryError(
                f"history store {store!r}: load({self.id!r}) returned {type(stored).__name__}, not a StoredHistory; "
                "a store's load returns the messages with their version: StoredHistory(messages, version) "
                "(see the HistoryStore protocol)"
            )
        return stored

    def hold(self, holder: asyncio.Future[Any], answerable: Answerable | None = None) -> None:
        """A run starts in this session (`holder` is its task; `answerable`, its live run, if it is one);
        refuses when another run holds it."""
        self._open_host()
        if self._running is not None:
            raise SessionBusy(self.id)
        self._running = holder
        self._answerable = answerable
        holder.add_done_callback(self._let_go)  # a run cancelled before it started never releases it
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _let_go(self, holder: asyncio.Future[Any]) -> None:
        if self._running is holder:
            self.release(None)

    def release(self, usage: RunUsage | None) -> None:
        """The run that held the session ended: count its usage and start the idle clock again."""
        self._running = None
        self._answerable = None
        if usage is not None:
            self.usage.incr(usage)
        if not self._closed:
            self.arm()

    async def remember(self, messages: list[ModelMessage]) -> None:
        """Save a run's top-level conversation to the store, and keep it as the history; `HistoryConflict`
        when the store's conversation is no longer the one the run started from (another process went on).

        The run's messages start with the history it was given: the store is told how many of them are that
        history unchanged (`kept`), and writes only the turn after them. When the run changed that history (a
        capability that compacts or edits it, pydantic-ai repairing its end), `kept` is 0 and the store
        replaces the whole conversation, over the same version check."""
        if not messages:
            return  # a function entry's top-level call has no conversation: the history stays
        messages = list(messages)
        host = self._host  # (still there while the session closes: it waits for this run)
        if host is not None:
            store = host.history_store
            kept = _kept(self.history, messages)  # (the history the run started from: see `refresh`)
            if kept and takes(store, "save", "kept"):
                save = functools.partial(store.save, self.id, messages, version=self.version, kept=kept)
            else:
                save = functools.partial(store.save, self.id, messages, version=self.version)
            saved = await system_task(save)  # in a system task, as in `_stored`
            if saved is None:
                raise HistoryConflict(self.id, messages)
            self.version = saved
        self.history = messages

    def arm(self) -> None:
        """Start (again) the clock after which an idle session closes; not while a run holds it."""
        if self._running is not None or self._closed:
            return
        if self._timer is not None:
            self._timer.cancel()
        # In an empty context: a timer keeps the context it was armed in (a run's) until it is due.
        self._timer = system_timer(self._idle_timeout, self._idled)

    def _idled(self) -> None:
        self._timer = None
        if self._running is None:
            self.start_closing()  # never a busy session: its run re-arms the clock when it ends

    def start_closing(self) -> asyncio.Future[None]:
        """Start closing the session (once), in a system task of its registry's, which its runtime waits out."""
        if self._closing is None:
            self._closed = True
            host = self._host
            assert host is not None  # (only the closing lets go of it)
            # A system task: whoever asked (a run's task, a timer) must not reach the teardown.
            self._closing = host.closing(self, self._close)
        return self._closing

    async def aclose(self) -> None:
        """Close the session: wait for its run, if one is in progress, then tear down its objects.

        Idempotent; a cancelled caller stops waiting, not the closing. Called from within the session's
        own run, it does not wait (it would wait for itself): the session closes when that run ends. The
        history stays in the runtime's store; the session's approvals and objects go.
        """
        closing = self.start_closing()
        if self.running_here():
            return
        await asyncio.shield(closing)  # a cancelled caller stops waiting, not the closing

    def running_here(self) -> bool:
        """Whether the caller runs in this session's run (its tools, the tasks they start)."""
        box = current_box()
        return box is not None and box.session is self.box and box.values is not None  # (a run's box: it has values)

    async def _close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        running = self._running
        if running is not None:
            await asyncio.wait((running,))
        host, self._host = self._host, None
        if host is None:
            return
        try:
            try:
                await self.owner.close(None, host.background_sink())  # (raises a finalizer's stop request, at its end)
            finally:
                if self.overrides is not None:  # what they rebuilt, after what the session built from it
                    await self.overrides.close(self.owner.teardown.timeout)  # (a session's close hears no cancel)
        finally:
            self.overrides = None
            self.box.close()
            self.grants = Grants()
            self.made = {}
            self.history = []
            self._ended.set()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "busy" if self.busy else "idle"
        return f"Session({self.id!r}, {state})"


def _kept(history: list[ModelMessage], messages: list[ModelMessage]) -> int:
    """How many of `messages` are `history` unchanged, at their start: all of it, or none (0) when the run
    changed any of it. A message is compared as an object (the same object, else an equal one): pydantic-ai
    replaces a message it changes, never edits it in place."""
    count = len(history)
    return count if count and messages[:count] == history else 0  # (a list compares items by identity first)
