"""`Runtime`: runs entries against a loaded configuration, each run in a context of its own."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import gc
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.trace import Tracer, TracerProvider
from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.messages import ModelMessage
from pydantic_ai.usage import RunUsage

from .. import tracing
from ..approvals._facts import ToolTraits
from ..approvals._policy import ToolPolicy, Verdict
from ..approvals._requests import (
    WAYS_OUT,
    ApprovalChoice,
    ApprovalNotPending,
    Approver,
    NoApproverWarning,
    check_approver,
    own_approval_ids,
)
from ..di._config import RuntimeConfig
from ..di._container import Container
from ..di._overrides import Overrides, OverridesSource
from ..di._specs import ToolsetSource
from ..errors import ConfigurationError, RuntimeClosed, ScopeError
from ..files._attachments import Attachment, check_call
from ..results import RunResult, attach_report, finished_report
from ..scopes._box import current_box
from ..scopes._bus import Observer, Sink
from ..scopes._scope import Scope
from ..scopes._tasks import wait_out
from ..scopes._tracking import trackers
from ..sessions._history import HistoryStore, InMemoryHistoryStore
from ..sessions._inbox import Inbox, OpenQuestion
from ..sessions._registry import SessionRegistry
from ..sessions._session import Session, SessionBusy, SessionError
from ..toolkit._toolset import known_tool_traits
from ..tracing.observer import TracingObserver
from ._call_scope import CallScope
from ._entry import Entry
from ._live import GuardedHandler, LiveRun, OnEnd, open_stream
from ._plan import GlobalScope, Plan, PoliciesSource
from ._run_scope import RunScope

_PACKAGE = str(Path(__file__).resolve().parent.parent)
"""llm-do's own directory: a warning names the first line outside it (the user's)."""


class Runtime:
    """Runs entries with their resources. Use `async with Runtime(...)` or call `aclose()`.

    Toolset names resolve against `toolsets`, then the container's providers, then the other entries
    (an entry named as a toolset becomes a tool that calls it); unknown names and duplicate tools are
    reported here, at load time. An entry may name a toolset by reference too: a provider of the
    container (`App.tools`, or the container's own `app.tools`) or another entry. Approval policies come
    from the toolset classes' `default_policy`, the container's `approval_policies`, `policies` (by name
    or reference; or a provider that builds them), then `config.approval_policies`, later ones
    winning per name; `approver` answers calls that need approval in `prompt` mode.

    `event_stream_handler` is given to every agent run of every call (what it raises is logged once
    per run and does not fail it). Runs are traced through `tracer_provider`, else the global provider
    (docs/observability.md). Sessions keep their conversations in `history_store`, by default in
    memory (docs/sessions.md). Closing the runtime shuts down the container's `Resource`s, unless
    `shutdown_resources=False` (the container's own `shutdown_resources()` does: see `RuntimeResource`).
    """

    def __init__(
        self,
        container: Container | None = None,
        *,
        entries: Iterable[Entry] = (),
        toolsets: Mapping[str, ToolsetSource] | None = None,
        config: RuntimeConfig | None = None,
        policies: PoliciesSource | None = None,
        approver: Approver | None = None,
        event_stream_handler: EventStreamHandler[Any] | None = None,
        tracer_provider: TracerProvider | None = None,
        history_store: HistoryStore | None = None,
        shutdown_resources: bool = True,
    ) -> None:
        self.container = container
        self.config = config if config is not None else RuntimeConfig.from_container(container)
        self.usage = RunUsage()
        """Usage summed over every run of this runtime."""
        self._plan = Plan(
            container,
            entries=entries,
            toolsets=toolsets,
            config=self.config,
            policies=policies,
            approver=approver,
            event_stream_handler=event_stream_handler,
        )
        self._globals = GlobalScope(container, self.config.cleanup_timeout, shutdown_resources)
        self._tracing = tracing.Tracing(tracer_provider)
        self.history_store: HistoryStore = history_store if history_store is not None else InMemoryHistoryStore()
        """Where sessions keep their conversations between runs (and restarts, with a persistent store)."""
        self.inbox = Inbox()
        """Where the questions of this runtime's sessions wait besides its own live runs (another web process's,
        a parked job's): `questions` and `answer` ask it; `llm_do.jobs.LiveParking` and the chat router given a
        database add themselves."""
        self._closed = False
        self._abandoned = False
        self._running: dict[asyncio.Task[RunResult], RunScope] = {}
        """The runs in flight: each one's task and scope."""
        self._live: dict[str, LiveRun] = {}
        """The resumable live runs in flight, by session id."""
        self._sessions = SessionRegistry(
            self,
            self._globals.owner,
            cleanup_timeout=self.config.cleanup_timeout,
            idle_timeout=self.config.session_idle_timeout,
        )
        self._told_no_approver = False
        """Whether a run that no one could answer has said so (`NoApproverWarning`, once per runtime)."""
        self._nothing_to_ask: set[str] = set()
        """The entries whose runs reach no toolset whose calls can ask."""

    @property
    def entry_tools(self) -> frozenset[str]:
        """Toolset names that call another entry (agent-as-tool)."""
        return self._plan.entry_tools

    @property
    def capturable(self) -> tuple[str, ...]:
        """Per-run providers whose instances a context snapshot taken during a run can keep alive."""
        return self._plan.parts.capturable

    def entry(self, name: str) -> Entry:
        """The loaded entry called `name`."""
        return self._plan.entry(name)

    @property
    def entries(self) -> Mapping[str, Entry]:
        """The loaded entries, by name."""
        return MappingProxyType(self._plan.entries)

    def toolsets_of(self, entry: str) -> tuple[str, ...]:
        """The names of entry `entry`'s toolsets, in order: those it names by reference (a provider, an entry)
        by the name the runtime found for them."""
        self._plan.entry(entry)  # (ConfigurationError for an unknown entry)
        return self._plan.plan_of(entry).names

    # -- approvals: what they decide before a call (what `llm-do list` and `check` show) ----------

    def policy(self, toolset: str) -> ToolPolicy:
        """The approval policy of toolset `toolset`, settings overrides included. A name without a declared
        policy gets the policy of its tools nobody declared safe (`approval_default`, `ask` unless set
        otherwise); its tools declared read-only, its agents and its MCP tools are decided by what they
        declare instead, with the overrides on top: `verdict` tells, tool by tool."""
        return self._plan.approvals.policy(toolset)

    def declares_policy(self, toolset: str) -> bool:
        """Whether a policy is declared for toolset `toolset` (its class's `default_policy`, the container's
        `approval_policies`, `Runtime(policies=)`): then it decides every tool, whatever the tools declare."""
        return self._plan.approvals.declared(toolset)

    def verdict(
        self,
        toolset: str,
        tool: str,
        *,
        requires_approval: bool = False,
        annotations: Mapping[str, Any] | None = None,
        read_only: bool = False,
        agent: bool = False,
    ) -> Verdict:
        """The verdict a call to `tool` of `toolset` gets before the policy's rule (if any) sees its arguments.
        For an MCP tool, pass its annotations (`{}` when it has none), and for a tool declared read-only,
        `read_only=True` (for a call to an entry, `agent=True`): without a declared policy they decide."""
        traits = ToolTraits(read_only=read_only, requires_approval=requires_approval, agent=agent)
        return self._plan.approvals.verdict(toolset, tool, annotations=annotations, traits=traits)

    def tool_verdicts(self, toolset: str) -> dict[str, Verdict] | None:
        """The verdict of each tool of toolset `toolset` before any rule, as a call gets it; None when its tools
        are only known once it is built (a plain factory, an MCP server: use `verdict` with each tool's
        annotations)."""
        approvals = self._plan.approvals
        traits = known_tool_traits(self._plan.provides(toolset))
        if traits is None:
            return None
        return {tool: approvals.verdict(toolset, tool, traits=declared) for tool, declared in traits.items()}

    # -- running ---------------------------------------------------------------

    async def session(
        self, session_id: str, *, approver: Approver | None = None, overrides: OverridesSource | None = None
    ) -> Session:
        """Open the session `session_id`, or resume it if it is open: a conversation across runs.

        `session_id` is the application's (a conversation id, a user id). A new session starts with
        the history the runtime's `history_store` has for that id. `approver`, when given, answers the
        session's approvals (unless a run has its own; a live run is its own approver). `overrides` swap
        providers for the session's runs and objects alone, as `run`'s do for one run; they are given as the
        session opens (`SessionError` for a session open already). See docs/sessions.md.
        """
        if self._closed:
            raise RuntimeClosed
        made = None
        if overrides:
            self._plan.overrides(overrides, Scope.PER_SESSION)  # checked now: a wrong key fails here
            made = functools.partial(self._plan.overrides, overrides, Scope.PER_SESSION)
        return await self._sessions.open(session_id, approver, made)

    @property
    def sessions(self) -> Mapping[str, Session]:
        """The sessions open now, by id."""
        return self._sessions.sessions

    async def questions(self, session_id: str) -> tuple[OpenQuestion, ...]:
        """Session `session_id`'s open questions wherever they wait, open here or not: its live run's in this
        process, then those of the places the inbox asks (`Session.questions`)."""
        session = self._sessions.sessions.get(session_id)
        return await self.inbox.questions(session_id, () if session is None else session.pending)

    async def answer(self, session_id: str, approval_id: str, choice: ApprovalChoice, note: str | None = None) -> None:
        """Answer session `session_id`'s open question `approval_id` wherever it waits, open here or not
        (`Session.answer`): `ApprovalNotPending`, naming its open questions, when it is none of them."""
        session = self._sessions.sessions.get(session_id)
        if session is not None:
            await session.answer(approval_id, choice, note)
        elif not await self.inbox.answer(session_id, approval_id, choice, note):
            found = await self.inbox.questions(session_id)
            raise ApprovalNotPending(approval_id, tuple(q.approval_id for q in found), f"session {session_id!r}")

    async def run(
        self,
        entry: Entry | str,
        input_data: Any,
        *,
        message_history: list[ModelMessage] | None = None,
        trace_parent: tracing.TraceParent | None = None,
        approver: Approver | None = None,
        attachments: Sequence[Attachment] = (),
        session: Session | str | None = None,
        overrides: OverridesSource | None = None,
    ) -> RunResult:
        """Run an entry as one top-level request, in a context of its own.

        `attachments` are files handed to the entry with its input (`Attachment.read(root, path)`,
        `Attachment.from_bytes(name, data)`), checked against `config.attachments`' limits first
        (an `AttachmentError` when they do not fit); see docs/attachments.md.

        If the run fails, its exception propagates unchanged; `llm_do.run_report(error)` gives
        what the run left (its per-run objects, usage and calls).

        `message_history` (an earlier run's `RunResult.messages`) continues that conversation: the
        top-level call's agent gets it; child calls start their own.

        `trace_parent` (a W3C `traceparent`, or the mapping `llm_do.tracing.inject_trace_context()`
        returned in another process) makes the run's span a child of that remote span.

        `session` (a `Session`, or the id of one, opened if need be) runs it in that conversation:
        with its history, objects, approvals and approver; one run at a time (`SessionBusy`).
        Without one, the run is a session of its own. `approver` answers this run's approvals
        instead of the session's or the runtime's approver.

        `overrides` swap providers for this run alone (`{Container.db: case_db}`: a provider of the container,
        its class's, or its name, to an object or a provider): the run, its nested calls and everything built
        in it from the container see the swapped object, and no other run does; an object given is never torn
        down by llm-do. See docs/scopes.md, "Overrides for one run".
        """
        return await self._start(
            entry,
            input_data,
            message_history=message_history,
            trace_parent=trace_parent,
            approver=approver,
            attachments=attachments,
            session=session,
            overrides=overrides,
        )

    def stream(
        self,
        entry: Entry | str,
        input_data: Any,
        *,
        message_history: list[ModelMessage] | None = None,
        trace_parent: tracing.TraceParent | None = None,
        approver: Approver | None = None,
        attachments: Sequence[Attachment] = (),
        session: Session | str | None = None,
        model_events: bool = True,
        resumable: bool = False,
        on_end: OnEnd | None = None,
        overrides: OverridesSource | None = None,
    ) -> AbstractAsyncContextManager[LiveRun]:
        """Run an entry as `run` does, as a live run: `async with runtime.stream(...) as run: async for event
        in run: ...` yields every call's pydantic-ai events and llm-do's own, ending with `RunFinished` or
        `RunFailed` (see docs/streaming.md).

        The live run is the run's approver: `run.decide(approval_id, choice)` answers its questions
        (`approver`, if given, is asked too, and the first answer wins; the session's and the runtime's
        approvers are not asked). Leaving the block before the run
        ended cancels it; the block is left once its teardown is done. The arguments are `run`'s, and
        `model_events=False` streams llm-do's own events only: the agents' model requests are then not
        streamed (as in a plain run, which a model or server that cannot stream needs).

        `resumable=True`: leaving the block does not cancel the run, which goes on (the runtime waits for it
        when it closes); every consumer reads its events from the start, then follows it, and a run of a
        session is found again with `live_run(session_id)` (see docs/streaming.md, "Runs that outlive their
        connection"). `on_end(outcome)`, awaited with the run's result or exception once its teardown is done, gives
        the outcome the stream ends with (`llm_do.jobs.LiveParking` parks a run there).
        """
        name = entry if isinstance(entry, str) else entry.name
        key = None if session is None or not resumable else session if isinstance(session, str) else session.id

        async def run_live(live: LiveRun) -> RunResult:
            return await self._start(
                entry,
                input_data,
                message_history=message_history,
                trace_parent=trace_parent,
                approver=approver,
                attachments=attachments,
                session=session,
                live=live,
                overrides=overrides,
            )

        async def launch(live: LiveRun) -> RunResult:
            if key is not None:
                if key in self._live:
                    raise SessionBusy(key)
                self._live[key] = live
            try:
                return await run_live(live)
            finally:
                if key is not None and self._live.get(key) is live:
                    del self._live[key]

        if approver is not None:
            check_approver(approver)
        return open_stream(
            name,
            self.config.stream_buffer,
            approver,
            launch,
            model_events=model_events,
            resumable=resumable,
            keep=self.config.resume_buffer,
            on_end=on_end,
        )

    def live_run(self, session_id: str) -> LiveRun | None:
        """The resumable live run of session `session_id` in flight, if any: iterate it for every event from
        the start, then the rest; answer its questions with `decide`. Whether the one asking may see it is the
        application's to check, as for any session."""
        return self._live.get(session_id)

    async def _start(
        self,
        entry: Entry | str,
        input_data: Any,
        *,
        message_history: list[ModelMessage] | None,
        trace_parent: tracing.TraceParent | None,
        approver: Approver | None,
        attachments: Sequence[Attachment],
        session: Session | str | None,
        live: LiveRun | None = None,
        overrides: OverridesSource | None = None,
    ) -> RunResult:
        if self._closed:
            raise RuntimeClosed
        swapped = self._plan.overrides(overrides, Scope.PER_RUN) if overrides else None
        if approver is not None:
            check_approver(approver)
        name = entry if isinstance(entry, str) else entry.name
        target = self._plan.entry(name)
        if not isinstance(entry, str) and entry is not target:
            raise ConfigurationError(f"entry {name!r} is not the one this runtime loaded under that name")
        handed = tuple(attachments)
        if handed:
            if not all(isinstance(item, Attachment) for item in handed):
                raise TypeError("Runtime.run(attachments=...) takes llm_do.Attachment objects: Attachment.read(...)")
            check_call(handed, self.config.attachments)
        held = None if session is None else await self._free_session(session, message_history)
        if self._closed:  # it closed while the session's history loaded: this run never starts
            raise RuntimeClosed
        if swapped is not None and held is not None:
            self._plan.check_session_overrides(swapped, held.id)
        run = self._run_scope(target, held, approver, live, swapped)
        task = asyncio.get_running_loop().create_task(
            self._run(run, target, input_data, message_history, trace_parent, handed),
            context=contextvars.copy_context(),
        )
        if held is not None:
            try:
                held.hold(task, live)
            except BaseException:
                task.cancel()  # never started: nothing to tear down
                raise
        self._running[task] = run
        try:
            result = await task
        except BaseException as error:
            self._running.pop(task, None)  # awaiting a task ends only once it is done
            # What the run left: its report, or, when the run ended well (the caller's cancellation landed
            # before the caller resumed, or keeping the session's history failed), what it did (a commit).
            report = run.report if run.report is not None or run.result is None else finished_report(run.result)
            if report is not None:
                attach_report(error, report)
            if isinstance(error, asyncio.CancelledError):
                self._abandoned = True  # pydantic-ai's abandoned generators: settled at close
            # Until the loop turns, asyncio's wakeup callback still holds the failed task, and so the
            # exception's frames and the run's toolsets. Turn it once so nothing outlives the run.
            # (A second cancellation arriving here raises CancelledError, as the caller asked.)
            del task, error
            await asyncio.sleep(0)
            raise
        self._running.pop(task, None)
        return result

    async def _free_session(self, session: Session | str, message_history: list[ModelMessage] | None) -> Session:
        """The session a run is to hold, checked before anything starts: open, this runtime's, not busy."""
        if isinstance(session, str):
            session = await self.session(session)
        elif not self._sessions.holds(session):
            raise SessionError(
                f"session {session.id!r} is {'closed' if session.closed else 'not one of this runtime'}; "
                f"open it with runtime.session({session.id!r})"
            )
        if message_history is not None:
            raise SessionError(
                f"a run in session {session.id!r} continues the session's own history; pass either "
                "session= or message_history=, not both"
            )
        if session.busy:
            raise SessionBusy(session.id)
        return session

    def _run_scope(
        self,
        target: Entry,
        session: Session | None,
        approver: Approver | None,
        live: LiveRun | None,
        overrides: Overrides | None = None,
    ) -> RunScope:
        """The scope of a run starting now, with its observers, approver and event stream handler."""
        plan = self._plan
        tracer = self._tracing.tracer()
        observers = None if tracer is None and not trackers and live is None else self._observers(tracer, live)
        approver = self._answering(target.name, session, approver, live)
        handler = plan.event_stream_handler
        if live is not None and live.model_events:
            handler = live.handler(handler)
        elif handler is not None:
            handler = GuardedHandler(handler)
        return RunScope._create(
            plan,
            self._globals,
            target,
            observers,
            approver=approver,
            session=session,
            overrides=overrides,
            handler=handler,
        )

    def _answering(
        self, entry: str, session: Session | None, approver: Approver | None, live: LiveRun | None
    ) -> Approver | None:
        """Who answers a run's questions: its live run (which asks the stream's own `approver` too), else its own
        approver, else its session's, else the runtime's. The first run with none in `prompt` mode, while some
        toolset it reaches can ask, says so (`NoApproverWarning`, once per runtime)."""
        if session is not None:
            approver = approver or session.approver
        approver = live or approver or self._plan.approvals.approver
        if approver is None and not self._told_no_approver and self._plan.approvals.mode == "prompt":
            self._told_no_approver = self._tell_no_approver(entry)
        return approver

    def _tell_no_approver(self, entry: str) -> bool:
        """Warn that a run of `entry` has no one to answer it, when a toolset in its reach can ask; whether it did."""
        if entry in self._nothing_to_ask:
            return False
        asking = self._plan.asking_toolsets(entry)
        if not asking:
            self._nothing_to_ask.add(entry)
            return False
        named = "; ".join(
            f"toolset {name!r} (entr{'y' if len(users) == 1 else 'ies'} {', '.join(users)})"
            for name, users in asking.items()
        )
        warnings.warn(
            f"a run of {entry!r} has no approver (none was given to the run, its session or the Runtime) and "
            f"approval_mode is 'prompt': a call that asks fails with ApprovalUnavailable. Calls of these toolsets "
            f"can ask: {named}. To answer them, {WAYS_OUT}. (Said once per runtime.)",
            NoApproverWarning,
            stacklevel=_callers_level(),
        )
        return True

    async def _run(
        self,
        run: RunScope,
        target: Entry,
        input_data: Any,
        message_history: list[ModelMessage] | None,
        trace_parent: tracing.TraceParent | None,
        attachments: tuple[Attachment, ...],
    ) -> RunResult:
        if trace_parent is not None:  # this task's own context: nothing to restore
            otel_context.attach(tracing.extract_trace_context(trace_parent))
        own_approval_ids()  # a tool's own runs ask questions of their own, even in a job's run
        session = run.session
        if session is not None:
            await session.refresh()  # the store's copy: another runtime on the store may have gone on since
            message_history = list(session.history) or None
        try:
            async with (
                run,
                CallScope._create(
                    self._plan, target, run, message_history=message_history, attachments=attachments
                ) as scope,
            ):
                run.returned(await scope._call(input_data), scope._all_messages)
            if session is not None and run.result is not None:
                await session.remember(run.result.messages)  # after the run: its objects are torn down
        finally:
            if run.usage is not None:
                self.usage.incr(run.usage)
            if session is not None:
                session.release(run.usage)
        assert run.result is not None
        return run.result

    def _observers(self, tracer: Tracer | None, live: LiveRun | None) -> tuple[Observer, ...]:
        """Who observes a run starting now: tracing when a provider is set, leak tracking when on, a live run."""
        traced: tuple[Observer, ...] = () if tracer is None else (TracingObserver(tracer),)
        return (*traced, *trackers, *(() if live is None else (live,)))

    # -- closing ---------------------------------------------------------------

    def stop_asking(self, reason: str = "the service is restarting; ask again in a moment") -> int:
        """Deny every question of this runtime's runs that waits for a person, and every later one at once, with
        `reason` (the model reads it, as any denial, and a live stream shows each question answered): call it
        when the process is told to stop (`SIGTERM`), so that its runs end instead of waiting for answers that
        cannot come. How many questions were waiting. Runs go on otherwise; close the runtime as usual."""
        return self._plan.approvals.stop_asking(reason)

    async def aclose(self) -> None:
        """Refuse new runs, wait for the runs in flight, then tear down globals and resources.

        If `aclose` itself is cancelled (a shutdown deadline, say), the runs still in flight are
        cancelled and torn down before the globals they use. When it returns, nothing of any run
        of this runtime is still alive. Idempotent.

        Called from within one of the runs it would wait for (a tool shutting its runtime down), it
        raises `ScopeError` at once and leaves the runtime open: close it from where it was opened.
        """
        if self._closed:
            return
        box = current_box()
        if box is not None and any(run.box is box for run in self._running.values()):
            raise ScopeError(
                "Runtime.aclose() was called from within one of its runs, which it would wait for forever. "
                "Close the runtime from the code that opened it, after its runs return (a tool can end its "
                "own session instead: Session.aclose() closes it once the run ends)."
            )
        self._closed = self._sessions.closed = True
        try:
            if self._running:
                await asyncio.wait(set(self._running))
        except asyncio.CancelledError:
            self._abandoned = True
            for task in self._running:
                task.cancel()
            await wait_out(self._running)  # each torn down before the globals they use
            raise
        finally:
            try:
                interrupted = await self._sessions.aclose()  # before the globals they use, whatever is cancelled
            finally:
                await self._globals.close(self.background_sink())
        if interrupted is not None:  # the sessions were torn down first; the cancellation is not ours to drop
            raise interrupted
        # The loop still holds the last finished run's task (and so its result) until it turns.
        await (_release_abandoned() if self._abandoned else asyncio.sleep(0))

    # -- what its sessions ask of their runtime (the SessionRuntime protocol) ---------------------

    def background_sink(self) -> Sink | None:
        """Who observes what is released outside any run (sessions, globals): leak tracking, when on."""
        return Sink(None, tuple(trackers)) if trackers else None

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


async def _release_abandoned(turns: int = 3) -> None:
    """A cancelled run abandons pydantic-ai's async generators, which hold its objects until garbage
    collection hands them to the loop to close and the loop has turned."""
    for _ in range(turns):
        gc.collect()
        await asyncio.sleep(0)


def _callers_level() -> int:
    """The `stacklevel` of the first frame outside llm-do, for a warning of the function that calls this: the line of
    the user's code that started the run."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level
