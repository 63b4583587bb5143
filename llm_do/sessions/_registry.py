"""`SessionRegistry`: a runtime's sessions by id, the ones closing, and their closing when the runtime closes.

An id names one open session at a time. A session that starts closing is no longer open (its id opens a
new session), but opening its id waits until it has closed: it may still be waiting for its run, whose
turn the next run must see. Each closing is a system task of the registry's, waited out when the runtime
closes, before the global objects the sessions use are torn down.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from ..approvals._requests import Approver, check_approver
from ..errors import RuntimeClosed
from ..scopes._bus import Sink
from ..scopes._owner import ScopeOwner
from ..scopes._tasks import SystemTasks
from ._history import HistoryStore
from ._inbox import Inbox
from ._session import Releasable, Session, SessionBusy, SessionError, SessionRuntime

if TYPE_CHECKING:
    from ..results import RunResult


class SessionRegistry:
    """The sessions of one runtime: opened by id, resumed while open, closed with the runtime. It is their
    host: what a `Session` asks of its runtime goes through it."""

    __slots__ = (
        "_closing",
        "_closing_ids",
        "_open",
        "_runtime",
        "cleanup_timeout",
        "closed",
        "globals",
        "idle_timeout",
        "sessions",
    )

    def __init__(
        self, runtime: SessionRuntime, globals_owner: ScopeOwner, *, cleanup_timeout: float, idle_timeout: float
    ) -> None:
        self._runtime = runtime
        self.globals = globals_owner
        """The owner of the runtime's global objects, which the sessions' objects may use."""
        self.cleanup_timeout = cleanup_timeout
        self.idle_timeout = idle_timeout
        self.closed = False
        """Set when the runtime starts closing: no session opens any more."""
        self._open: dict[str, Session] = {}
        self.sessions: Mapping[str, Session] = MappingProxyType(self._open)
        """The sessions open now, by id."""
        self._closing = SystemTasks()
        self._closing_ids: dict[str, tuple[Session, asyncio.Task[None]]] = {}
        """The closing of each session id still closing: the id opens again once it is done."""

    async def open(
        self,
        session_id: str,
        approver: Approver | None = None,
        overrides: Callable[[], Releasable] | None = None,
    ) -> Session:
        """The session `session_id`, opened (its history loaded from the store) or resumed (its history read
        again: a version check when nothing changed), its idle clock started again; `approver`, when given,
        answers its approvals from now on (`Runtime.session`). `overrides()` makes the overrides of a session
        opened now; a session already open keeps its own."""
        if approver is not None:
            check_approver(approver)
        while True:
            if self.closed:  # (checked again after a load: the runtime may have closed meanwhile)
                raise RuntimeClosed
            closing = self._closing_ids.get(session_id)
            if closing is not None:  # its run may still be going: one run at a time, its history saved first
                if closing[0].running_here():
                    raise SessionBusy(session_id)  # (from within that run: waiting would wait for itself)
                await asyncio.wait((closing[1],))
                continue
            session = self._open.get(session_id)
            if session is None or session.closed:
                session = self._open[session_id] = Session._create(
                    self,
                    session_id,
                    globals_owner=self.globals,
                    cleanup_timeout=self.cleanup_timeout,
                    idle_timeout=self.idle_timeout,
                    overrides=None if overrides is None else overrides(),
                )
            elif overrides is not None:
                raise SessionError(
                    f"session {session_id!r} is open already, with the overrides it was opened with; overrides "
                    "apply to a session as it opens: close it first (session.aclose()), or give them to one run "
                    "(runtime.run(..., overrides=...))"
                )
            try:
                await session.load()
            except BaseException:
                if not session.loaded:  # never used: close it, or its id stays open without an idle clock
                    session.start_closing()
                raise
            if not session.closed:  # (it may have idled out while its history loaded)
                break
        if approver is not None:
            session.approver = approver
        session.arm()  # opening it counts as activity: its idle clock starts again
        return session

    def holds(self, session: Session) -> bool:
        """Whether `session` is one of the sessions open here."""
        return self._open.get(session.id) is session

    async def aclose(self) -> asyncio.CancelledError | None:
        """Close every open session (their runs have ended) and wait until each closing one has closed,
        whatever is cancelled meanwhile; the cancellation that arrived meanwhile, if any."""
        self.closed = True
        for session in list(self._open.values()):
            session.start_closing()
        return await self._closing.wait()

    # -- what its sessions ask of it (the SessionHost protocol) ---------------------------------

    @property
    def history_store(self) -> HistoryStore:
        return self._runtime.history_store

    @property
    def run(self) -> Callable[..., Awaitable[RunResult]]:
        return self._runtime.run

    @property
    def inbox(self) -> Inbox:
        return self._runtime.inbox

    def background_sink(self) -> Sink | None:
        return self._runtime.background_sink()

    def closing(self, session: Session, close: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        """Close `session` with `close()` in a system task: no longer open (its id opens a new session), and
        waited out when the runtime closes."""
        if self._open.get(session.id) is session:
            del self._open[session.id]
        task = self._closing.spawn(close)
        self._closing_ids[session.id] = (session, task)
        task.add_done_callback(lambda _: self._closed_id(session))
        return task

    def _closed_id(self, session: Session) -> None:
        closing = self._closing_ids.get(session.id)
        if closing is not None and closing[0] is session:
            del self._closing_ids[session.id]

    def __repr__(self) -> str:
        return f"SessionRegistry({len(self._open)} open, {len(self._closing)} closing)"
