"""`RunScope`: one top-level run, opened and closed like every scope level.

Entering it gives the run's task its box, makes its `RunState` and per-run objects; leaving it tears
them down, hands the caller its result or report, then forgets everything, so that nothing a callback
or task captured during the run reaches the run's objects afterwards.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from types import MappingProxyType, TracebackType
from typing import Any, Protocol, cast

from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.messages import ModelMessage
from pydantic_ai.usage import RunUsage

from ..approvals._grants import Grants
from ..approvals._requests import Approver, approval_space
from ..di._config import RuntimeConfig
from ..di._container import ContainerParts, Resources
from ..di._overrides import Overrides
from ..di._specs import ToolsetSpec
from ..errors import ScopeError
from ..events import RunEnded, RunStarted
from ..results import RunReport, RunResult, RunState, outcome_of
from ..scopes._box import Box, open_run_box, session_context
from ..scopes._bus import CURRENT_SINK, HandedOver, Observer, Sink
from ..scopes._owner import ScopeOwner
from ..scopes._scope import NoPublicConstructor, Scope
from ..scopes._tasks import built
from ..scopes._thread import RunThread
from ..sessions._session import Session
from ._servers import owned


class RunHost(Protocol):
    """What a run needs from the plan of the runtime that loaded its entries."""

    @property
    def config(self) -> RuntimeConfig: ...
    @property
    def parts(self) -> ContainerParts: ...
    async def new_state(self) -> RunState: ...


class Globals(Protocol):
    """What a run needs from the runtime's global scope: the owner of the global objects, the resources."""

    @property
    def owner(self) -> ScopeOwner: ...
    @property
    def resources(self) -> Resources: ...


class Named(Protocol):
    @property
    def name(self) -> str: ...


class RunScope(metaclass=NoPublicConstructor):
    """One run: its owner (the per-run objects), its `RunState`, its box, and who observes it."""

    __slots__ = (
        "_globals",
        "_grants",
        "_returned",
        "_state",
        "approval_space",
        "approver",
        "box",
        "entry",
        "handler",
        "host",
        "made",
        "overrides",
        "owner",
        "report",
        "result",
        "session",
    )

    def __init__(
        self,
        host: RunHost,
        globals_: Globals,
        entry: Named,
        observers: tuple[Observer, ...] | None,
        *,
        approver: Approver | None = None,
        session: Session | None = None,
        overrides: Overrides | None = None,
        handler: EventStreamHandler[Any] | None = None,
    ) -> None:
        self.host = host
        self.overrides = overrides
        """The providers this run overrides (`Runtime.run(overrides=...)`), if any."""
        self._globals = globals_
        self.approver = approver
        """Who answers the run's approvals (the run's own, else its session's, else the runtime's)."""
        self.session = session
        """The session the run belongs to; None: the run is a session of its own."""
        self.approval_space = approval_space()
        """Where the ids of the run's questions come from: the run's own (or a job's, for all its runs)."""
        self._grants = None if session is None else session.grants
        self.entry = entry
        self.owner = ScopeOwner(
            Scope.PER_RUN,
            host.config.cleanup_timeout,
            globals_.owner if session is None else session.owner,
            # (tracing, leak tracking, a live stream): the run's calls tell them too
            sink=None if observers is None else Sink(None, observers),
            cache={},
        )
        self.handler = handler
        """The `event_stream_handler` of the run's agent runs (a live run's, the runtime's), if any."""
        self.box: Box | None = None
        self._state: RunState | None = None
        self._returned: tuple[Any, list[ModelMessage]] | None = None
        """The top-level call's output and conversation, for the result (`returned`)."""
        self.result: RunResult | None = None
        """What the run's caller gets, once the run has ended well."""
        self.report: RunReport | None = None
        """What a failed or cancelled run leaves (None if it failed before its state existed)."""
        self.made: dict[str, Any] = {}
        """The agents made in this run (`CallScope.make_agent`), each with its plan: forgotten when the run ends."""

    def returned(self, output: Any, messages: list[ModelMessage]) -> None:
        """The top-level call has returned `output`, its conversation being `messages`: the run's result, once its
        objects are torn down."""
        self._returned = (output, messages)

    @property
    def grants(self) -> Grants:
        """The "approve for session" answers of the run's session; a run without one has its own."""
        grants = self._grants
        if grants is None:
            grants = self._grants = Grants()
        return grants

    def scope_of(self, spec: ToolsetSpec) -> Scope | None:
        """Where this run keeps its object of `spec`: where it is declared to, no longer than the overrides that
        reach it last (the run's, its session's); None when an override gives the object, which is nobody's here."""
        if self.gives(spec.provider):
            return None
        scope = spec.scope
        for overrides in (self.overrides, self.session_overrides):
            if overrides is not None:
                scope = overrides.scope_of(spec.provider, scope)
        return scope

    def gives(self, provider: object) -> bool:
        """Whether the run's overrides (or its session's) give `provider`'s object, which no scope of the run owns."""
        return any(
            overrides is not None and overrides.gives(provider)
            for overrides in (self.overrides, self.session_overrides)
        )

    @property
    def session_overrides(self) -> Overrides | None:
        """The overrides of the run's session, if it has any."""
        session = self.session
        return None if session is None else cast("Overrides | None", session.overrides)

    @property
    def usage(self) -> RunUsage | None:
        """The run's usage, once it has ended (None if it failed before its state existed)."""
        holder = self.result or self.report
        return None if holder is None else holder.usage

    @property
    def state(self) -> RunState:
        state = self._state
        if state is None:
            raise ScopeError("this run has ended (or not started): its state is gone")
        return state

    async def __aenter__(self) -> RunScope:
        host = self.host
        parts = host.parts
        self._globals.resources.note_overrides()
        session = self.session
        self.box = open_run_box(
            None if session is None else session.box, self.overrides, RunThread(host.config.cleanup_timeout)
        )
        sink = self.owner.sink
        if sink is not None:
            CURRENT_SINK.set(sink)  # the run's own task: nothing to restore
            sink.emit(RunStarted(self.entry.name))
        for provider in parts.context_locals:
            provider.reset()
        try:
            self._state = await host.new_state()
            if parts.per_session:
                # made by a session's first run, owned by the session (a run given none is its own session), in
                # a context of no run: the tasks and timers they start must not keep this run (or its caller's
                # context) for the session's life
                owner, box = (self.owner, self.box) if session is None else (session.owner, session.box)
                given = self.overrides if session is None else self.session_overrides

                def making() -> asyncio.Task[None]:
                    adopting = _adopt(owner, parts.per_session, "per-session", sink, given)
                    return asyncio.get_running_loop().create_task(adopting, context=session_context(box))

                await (making() if session is None else session.build_once(making))
            await _adopt(self.owner, parts.per_run, "per-run", sink, self.overrides)
        except BaseException as error:
            await self._end(error)
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._end(exc)

    async def _end(self, exc: BaseException | None) -> None:
        """Tear down the per-run objects, build the result or report, tell the observers, forget it all.

        Raises `CancelledError` when a cancellation arrived during the teardown of a run that ended well."""
        owner = self.owner
        per_run: Mapping[str, Any] = MappingProxyType(dict(owner.named))  # what its close forgets
        interrupted = late = False
        stop: BaseException | None = None
        try:
            try:
                await owner.close(exc)
            except asyncio.CancelledError:  # arrived during the teardown of a run that ended well: raised below
                interrupted = True
            except BaseException as error:  # a finalizer's stop request (KeyboardInterrupt): raised once all is done
                stop = error
            try:
                if self.overrides is not None:  # what they rebuilt, after what the run built from it
                    interrupted = await self.overrides.close(owner.teardown.timeout) or interrupted
            finally:  # the run's thread, once every finalizer it may run has run: a cancellation arriving
                # meanwhile lands after the run's teardown, as if it had landed once the run had ended
                thread = None if self.box is None else self.box.thread
                late = thread is not None and await thread.close() and exc is None
            if interrupted:
                exc = asyncio.CancelledError()
            self._hand_over(exc if stop is None else stop, per_run)
        finally:  # forget the run's objects (after their teardown): the box, the state, the output
            if self.box is not None:
                self.box.close()
            self._state = self._returned = None
            self.made = {}
            if owner.sink is not None:
                owner.sink.close()
            for provider in self.host.parts.context_locals:
                provider.reset()
        if stop is not None:
            try:
                raise stop
            finally:
                stop = None
        if interrupted or late:
            raise asyncio.CancelledError

    def _hand_over(self, exc: BaseException | None, per_run: Mapping[str, Any]) -> None:
        """Build the result (or report) and tell the observers that the run ended."""
        state = self._state
        outcome = outcome_of(exc)
        holder: RunResult | RunReport | None = None
        if state is not None:
            calls, log = state.calls_in_order(), tuple(state.log)
            if exc is None:
                output, messages = self._returned or (None, [])
                holder = self.result = RunResult(output, state.usage, messages, calls, log, per_run)
            else:
                holder = self.report = RunReport(outcome, state.usage, calls, log, per_run)
        sink = self.owner.sink
        if sink is not None:
            if holder is not None and per_run:
                sink.emit(HandedOver(holder, tuple(per_run.values())))
            sink.emit(RunEnded(outcome, exc, self.usage, holder))


async def _adopt(
    owner: ScopeOwner,
    provided: tuple[tuple[str, Callable[[], Any]], ...],
    scope: str,
    sink: Sink | None,
    overrides: Overrides | None = None,
) -> None:
    """Resolve each (name, provider) and have `owner` adopt what it builds, under that name (an object the run's
    overrides give is reported under it, and left to whoever gave it)."""
    for name, provider in provided:
        obj = await built(provider())
        if overrides is not None and overrides.gives(provider):
            owner.name(name, obj)
            continue
        await owner.adopt(owned(obj, name), f"{scope} provider {name!r}", name, sink)
