"""`CallScope`: one entry invocation, its toolsets, and the only surface for calling tools.

It knows entries and the runtime by their protocols (`_entry`: `Entry`, `CallHost`), so that it depends on
neither.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Sequence
from contextvars import Token
from types import TracebackType
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model
from pydantic_ai.toolsets import AbstractToolset

from .._compat import current_run_context
from ..approvals._facts import CallFacts, ToolTraits
from ..di._config import RuntimeConfig
from ..errors import MaxDepthExceeded, ScopeError, ToolsetError, listing
from ..events import CallEnded, CallStarted, CallTag
from ..files._attachments import Attachment, AttachmentError, check_call, check_count, normal_name
from ..results import CallRecord, LogEntry, RunState, outcome_of
from ..scopes._bus import CURRENT_SINK, Sink
from ..scopes._owner import ScopeOwner
from ..scopes._scope import NoPublicConstructor, Scope
from ..scopes._tasks import built
from ..toolkit._handles import UnknownAgent
from ..toolkit._toolset import check_unique_tools, known_tool_names, may_ask_for_approval
from ._entry import NOTHING_PRODUCED, CallHost, Entry, EntryPlan, Produced, ToolsetUse
from ._gate import GatedCall
from ._lending import Lending
from ._made import Keep, made_names, made_target, make_agent
from ._run_scope import RunScope
from ._servers import start_servers
from ._usage import usage_of

_AGENT = ToolTraits(agent=True)
"""What a call to an entry declares about itself."""


def current_scope() -> CallScope | None:
    """The call scope of the agent run now making a model request or running a tool, if any."""
    deps = getattr(current_run_context(), "deps", None)
    return deps if isinstance(deps, CallScope) else None


@functools.cache
def _direct_model() -> Model:
    """The model a direct `call_tool` puts in its `RunContext`: one that refuses to be asked.

    Built on first use: importing pydantic-ai's `FunctionModel` module costs about 15 ms, which a
    command that never calls a tool directly need not pay."""
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def no_model(messages: list[ModelMessage], info: AgentInfo) -> Any:
        raise ToolsetError("a tool called directly through CallScope.call_tool has no model to ask")

    return FunctionModel(no_model, model_name="llm-do-direct")


class CallScope(metaclass=NoPublicConstructor):
    """One invocation of an entry: resolves its toolsets, lends them out, and tears down what it made.

    Each toolset comes from the owner of its scope: per-call toolsets are built fresh by the call's
    own `ScopeOwner`, per-run ones by the run's, global ones by the runtime's. Agents run by
    `AgentEntry` receive the scope as `deps`. When the call ends the scope lets go of everything
    it held (toolsets, messages, the run), so a scope that something captured during the call (a
    callback's context) is an empty shell that refuses use.
    """

    def __init__(
        self,
        host: CallHost,
        entry: Entry,
        run: RunScope,
        *,
        parent: CallScope | None = None,
        message_history: list[ModelMessage] | None = None,
        tool_call_id: str | None = None,
        attachments: tuple[Attachment, ...] = (),
        asked_as: str | None = None,
        plan: EntryPlan | None = None,
    ) -> None:
        self._host = host
        self.entry = entry
        self._plan = plan
        """What the call does with its toolsets: the runtime's plan of its entry, or a made agent's."""
        self.parent = parent
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.message_history = message_history
        self.tool_call_id = tool_call_id
        """The parent's pydantic-ai tool call that started this call (an agent used as a tool); None for the
        top-level call and for calls made from Python (`call_agent`)."""
        self._step = tool_call_id if tool_call_id is not None else asked_as
        """What started this call in its parent, for its place in the run (`path`): the parent's tool call, or
        for a call made from Python (`call_agent`) what the parent's gate knows it by, in the order of its calls."""
        self.id = run.state.next_call_id()
        self._toolsets: list[AbstractToolset[Any]] = []
        self.attachments = attachments
        """The files this call received (its entry's agent is sent them with its prompt)."""
        self._produced = NOTHING_PRODUCED
        """What the call's entry reported it produced (`_report`): its messages, its conversation, its warnings."""
        self._run: RunScope | None = run
        self._instances: dict[str, AbstractToolset[Any]] = {}
        self._injected: dict[object, Any] = {}
        """The call's objects of the per-call providers its tools' parameters asked for."""
        observed = run.owner.sink  # the run's observers, if any: this call tells them too
        self._owner = ScopeOwner(
            Scope.PER_CALL,
            host.config.cleanup_timeout,
            run.owner,
            sink=None if observed is None else Sink(self._tag(), observed.observers),
        )
        self._lending: Lending | None = Lending(host.approvals, self, host.entry_tools)  # None once the call ended
        self._sink_token: Token[Sink | None] | None = None

    @property
    def _config(self) -> RuntimeConfig:
        """The runtime's configuration (model, max_depth, approval mode, ...)."""
        return self._host.config

    @property
    def _capabilities(self) -> list[AbstractCapability[Any]]:
        """Capabilities an agent run in this scope needs: the approval resolver, when a toolset can ask."""
        return [] if self._lending is None else self._lending.capabilities()

    @property
    def _event_stream_handler(self) -> EventStreamHandler[Any] | None:
        """The handler of this call's agent run's events: its live run's, the runtime's, or None."""
        return self._open_run().handler

    @property
    def _sink(self) -> Sink | None:
        """Where this call announces its events; None when nobody observes its run, or once the call has ended."""
        return None if self._run is None else self._owner.sink

    def _report(self, produced: Produced) -> None:
        """What the call's entry produced beside its output (its model's messages, its warnings), reported once."""
        self._produced = produced

    @property
    def _all_messages(self) -> list[ModelMessage]:
        """The whole conversation after this call, including `message_history`."""
        return self._produced.conversation

    def _call(self, input_data: Any) -> Awaitable[Any]:
        """Run the call's entry on `input_data`: its output (its entry's coroutine itself: no frame of its own,
        which every step of the call's run would resume)."""
        return self.entry.run_turn(self, input_data)

    @property
    def state(self) -> RunState:
        """The run's shared state: usage, call records, message log."""
        return self._open_run().state

    def toolset(self, name: str) -> AbstractToolset[Any]:
        """This call's instance of the toolset `name` (unwrapped), while the call runs."""
        try:
            return self._instances[name]
        except KeyError:
            raise ToolsetError(
                f"entry {self.entry.name!r} has no open toolset {name!r}; its toolsets: "
                f"{', '.join(self._instances) or 'none (the call has ended)'}"
            ) from None

    def _gated(self) -> GatedCall:
        """What this call's gate knows of it: where it stands, who answers its questions (the run's approver, else
        its session's, else the runtime's; its session's grants), and who hears them."""
        run = self._open_run()
        session = run.session
        return GatedCall(
            call_id=self.id,
            depth=self.depth,
            chain=self.chain(),
            path=self.path(),
            approval_space=run.approval_space,
            session_id=None if session is None else session.id,
            approver=run.approver,
            grants=run.grants,
            sink=self._owner.sink,
        )

    def path(self) -> tuple[tuple[str, str | None], ...]:
        """Where this call is in its run: each entry from the top-level call down, with what started it in
        its parent (`step`). The same for the same call when a run is replayed; two calls of a run never share it."""
        steps: list[tuple[str, str | None]] = []
        scope: CallScope | None = self
        while scope is not None:
            steps.append((scope.entry.name, scope._step))
            scope = scope.parent
        return tuple(reversed(steps))

    def chain(self) -> tuple[str, ...]:
        """Entry names from the top-level call down to this one."""
        return tuple(name for name, _ in self.path())

    def _lent(self) -> Lending:
        if self._lending is None:
            raise ScopeError(f"call {self.id} of entry {self.entry.name!r} has ended; its scope can no longer be used")
        return self._lending

    def _open_run(self) -> RunScope:
        run = self._run
        if run is None:
            raise ScopeError(f"call {self.id} of entry {self.entry.name!r} has ended; its scope can no longer be used")
        return run

    def _tag(self) -> CallTag:
        """This call, as its events name it."""
        parent = self.parent
        return CallTag(
            self.id, None if parent is None else parent.id, self.entry.name, self.depth, self.chain(), self.tool_call_id
        )

    def _observe(self, sink: Sink) -> None:
        tag = sink.call
        assert tag is not None
        self._sink_token = CURRENT_SINK.set(sink)
        infos = tuple(attachment.info for attachment in self.attachments) if self.attachments else ()
        sink.emit(CallStarted(tag, self._toolset_names(), infos))

    async def __aenter__(self) -> CallScope:
        run = self._run
        if self._owner.sink is not None:
            self._observe(self._owner.sink)
        try:
            plan = self._plan = self._plan or self._host.plan_of(self.entry.name)
            owner, sink = self._owner, self._sink
            if run is not None and (run.overrides is not None or run.session_overrides is not None):
                acquired = [(use, await self._overridden(run, use)) for use in plan.uses]
            else:
                acquired = [  # each from the owner of its scope: this call's, the run's, the runtime's
                    (
                        use,
                        await (owner if use.spec.scope is Scope.PER_CALL else owner.find(use.spec.scope)).acquire(
                            use.spec, use.label, use.name, sink
                        ),
                    )
                    for use in plan.uses
                ]
            for use, obj in acquired:
                if type(obj) is not use.spec.provides and not isinstance(obj, AbstractToolset):  # the first: known
                    raise self._not_a_toolset(use, obj)
            await start_servers(obj for _, obj in acquired)
            if len(acquired) > 1 and not plan.tools_checked:
                check_unique_tools(self.entry.name, ((use.name, known_tool_names(ts) or ()) for use, ts in acquired))
            may_ask = plan.may_ask
            if may_ask is None:  # some toolset's tools are known only now that it is built
                may_ask = any(may_ask_for_approval(ts) if use.may_ask is None else use.may_ask for use, ts in acquired)
            self._instances = {use.name: ts for use, ts in acquired}
            self._toolsets = self._lent().lend(acquired, defers=may_ask)
        except BaseException as exc:
            await self._finish(exc)
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._finish(exc)

    async def _overridden(self, run: RunScope, use: ToolsetUse) -> Any:
        """The call's object of `use` in a run with overrides: the one an override gives (nobody's to tear down),
        or one from the owner of its scope, which an override that reaches it makes no longer than its own."""
        scope = run.scope_of(use.spec)
        if scope is None:
            return await built(use.spec.factory())
        owner = self._owner if scope is Scope.PER_CALL else self._owner.find(scope)
        return await owner.acquire(use.spec, use.label, use.name, self._sink)

    async def injected(self, key: object, asked_by: str) -> Any:
        """The object the container gives a tool's parameter in this call (`Provide[App.repo]`): a per-call
        provider's is this call's (its own toolset's instance, when the provider builds one of its toolsets; else
        made on first use and torn down with the call); a per-run one's, the run's; any other, what the provider
        gives (a global, or what the run's overrides put in its place)."""
        provider, scope = self._host.injection(key)
        run = self._open_run()
        if scope is not Scope.PER_CALL:
            return await built(provider())
        plan = self._plan
        for use in () if plan is None else plan.uses:
            if use.spec.provider is provider and use.name in self._instances:
                return self._instances[use.name]
        found = self._injected.get(provider)
        if found is None:
            found = await built(provider())
            if self._run is not run:  # the call ended while it was made
                raise ScopeError(f"call {self.id} of entry {self.entry.name!r} has ended; {asked_by} came too late")
            self._injected[provider] = found
            if not run.gives(provider):  # (an object an override gives is nobody's here)
                named = self._host.provider_named(key)
                label = f"provider {named!r} for {asked_by} of entry {self.entry.name!r} (per call)"
                await self._owner.adopt(found, label, None, self._sink)
        return found

    def _toolset_names(self) -> tuple[str, ...]:
        plan = self._plan
        if plan is None and self._run is not None:
            plan = self._plan = self._host.plan_of(self.entry.name)
        return () if plan is None else plan.names

    def _not_a_toolset(self, use: ToolsetUse, obj: object) -> ToolsetError:
        return ToolsetError(
            f"entry {self.entry.name!r}: toolset {use.name!r} was built as {type(obj).__qualname__}, "
            "which is not a pydantic-ai toolset; make its provider build an AbstractToolset "
            "(an llm_do.Toolset subclass, a FunctionToolset, ...)"
        )

    async def _finish(self, exc: BaseException | None) -> None:
        state, produced = self._open_run().state, self._produced
        parent_id = None if self.parent is None else self.parent.id
        record = CallRecord(
            id=self.id,
            parent=parent_id,
            entry=self.entry.name,
            depth=self.depth,
            toolsets=self._toolset_names(),
            outcome=outcome_of(exc),
            usage=usage_of(produced.messages),
            attachments=tuple(attachment.info for attachment in self.attachments) if self.attachments else (),
            warnings=produced.warnings,
        )
        state.calls.append(record)
        if produced.messages:
            state.log.append(LogEntry(self.id, parent_id, self.entry.name, self.depth, tuple(produced.messages)))
        try:
            await self._owner.close(exc)  # raises a cancellation that arrived during the teardown of a call ended well
        finally:
            self._release()
            sink = self._owner.sink
            if sink is not None:
                self._unobserve(sink, record, exc)

    def _unobserve(self, sink: Sink, record: CallRecord, exc: BaseException | None) -> None:
        tag = sink.call
        assert tag is not None
        sink.emit(CallEnded(tag, record.outcome, record.usage, exc))
        sink.close()
        token, self._sink_token = self._sink_token, None
        if token is not None:
            CURRENT_SINK.reset(token)

    def _release(self) -> None:
        """Let go of everything the call held; pydantic-ai's run context, which a callback scheduled by
        a tool may keep, still refers to this scope, which is now an empty shell."""
        if self._lending is not None:  # it refers back to this scope: a cycle would leave both to the garbage collector
            self._lending.release()
        self._lending = None
        self._toolsets = []
        self._instances = {}
        self._injected = {}
        self._run = self._plan = None
        self.message_history = None
        self._produced = NOTHING_PRODUCED
        self.attachments = ()

    async def call_agent(self, name: str, input_data: Any, *, attachments: Sequence[str | Attachment] = ()) -> Any:
        """Run the entry `name` as a child call (depth + 1) and return its output.

        `name` is any entry of the runtime (not only this entry's toolsets), or an agent made in this run
        (`make_agent`); the child gets fresh per-call toolsets. Calls may run in parallel. The call is gated as a call
        of its tool from here (`EntryPlan.agent_gates`, else toolset `name`; tool `name`, args `{"input": ...}`, plus
        `"attachments"`: their names, when any); a denial raises `ApprovalDenied`. An unknown name: `ToolsetError`.
        `attachments` are `Attachment`s, or names: of an attachment this call received, else of a
        file under the project root (see `attachments_named`).
        """
        self._target(name)  # known, before anyone is asked
        self._check_depth(name)  # before anyone is asked to approve a call that cannot run
        handed = await self.attachments_named(attachments) if attachments else ()
        names = [attachment.name for attachment in handed]
        args: dict[str, Any] = {"input": input_data, "attachments": names} if names else {"input": input_data}
        gate, plan = self._lent().gate(), self._plan or self._host.plan_of(self.entry.name)
        toolset = plan.gates_with(self._instances, self._host.entries).get(name, name)  # as a call of its tool
        asked_as = gate.python_call_id(toolset, name)
        rules = self._host.approvals.rules(toolset)
        facts = CallFacts(
            rules, name, args, asked_as, tool_call=False, traits=_AGENT, attachments=names, shown=handed, direct=True
        )
        call = gate.call(
            facts, lambda approved: self._call_child(name, input_data, attachments=handed, asked_as=asked_as)
        )
        hold = self._lent().direct_hold()  # held beside the calls made in parallel, as a model's tool calls are
        return await (call if hold is None else hold.around(call))

    async def attachments_named(self, names: Sequence[str | Attachment]) -> tuple[Attachment, ...]:
        """The attachments `names` stand for, checked against the call limits.

        A name is first looked up among the attachments this call received (a parent passes one on by
        name), else read from the project root (`RuntimeConfig.project_root`), confined to it like the
        `filesystem` toolset's paths. The files are read one by one, and refused as soon as one is named twice or
        they are over the call's limit in bytes. Raises `AttachmentError`, which a model reads as the tool's failure.
        """
        settings = self._host.config.attachments
        if isinstance(names, str):
            raise AttachmentError(f"attach: attachments must be a list of names, got the string {names!r}")
        check_count(len(names), settings)  # before reading any of them
        received = {attachment.name: attachment for attachment in self.attachments}
        found: list[Attachment] = []
        for item in names:
            if isinstance(item, Attachment):
                found.append(item)
            elif isinstance(item, str) and (known := received.get(item, received.get(normal_name(item)))):
                found.append(known)  # what this call received, however its path is spelled
            else:  # read in a worker thread, without copying this context into it
                read = functools.partial(Attachment.read, self._host.config.project_root, item, settings=settings)
                found.append(await asyncio.get_running_loop().run_in_executor(None, read))
            check_call(found, settings)  # a file named twice, or over the call's bytes: refused before reading on
        return tuple(found)

    async def _attachments_for(self, tool_call_id: str | None, names: Sequence[str]) -> tuple[Attachment, ...]:
        """The attachments a model's call to an entry hands over: those its approver was shown, else `names`."""
        shown = self._lending.attached(tool_call_id) if tool_call_id and self._lending is not None else None
        return shown if shown is not None else await self.attachments_named(names)

    def _check_depth(self, name: str) -> None:
        """Raise `MaxDepthExceeded` if calling entry `name` from here would go past `max_depth`."""
        max_depth = self._host.config.max_depth
        if self.depth + 1 > max_depth:
            raise MaxDepthExceeded((*self.chain(), name), max_depth)

    async def _call_child(
        self,
        name: str,
        input_data: Any,
        *,
        tool_call_id: str | None = None,
        attachments: tuple[Attachment, ...] = (),
        asked_as: str | None = None,
    ) -> Any:
        """Run entry `name` as a child call, ungated (so not public): for the agent-as-tool toolset and `call_agent`,
        whose calls the gate already saw (`tool_call_id` is that tool call's; `asked_as`, what the gate knows a call
        made from Python by). The depth limit is enforced here, whoever calls."""
        target, plan = self._target(name)
        self._check_depth(name)
        run = self._open_run()
        async with CallScope._create(
            self._host,
            target,
            run,
            parent=self,
            tool_call_id=tool_call_id,
            attachments=attachments,
            asked_as=asked_as,
            plan=plan,
        ) as child:
            return await child._call(input_data)

    def _target(self, name: str) -> tuple[Entry, EntryPlan | None]:
        """The entry `name` names, with its plan when it is a made agent (else the runtime's)."""
        run = self._open_run()
        if (found := made_target(run, name)) is not None:
            return found
        entry = self._host.entries.get(name)
        if entry is None:
            raise UnknownAgent(
                f"{self.entry.name!r} cannot call {name!r}: it is neither an entry ({listing(self._host.entries)}) "
                f"nor an agent made in this run or kept by its session ({listing(made_names(run))}); fix the name",
                name,
            )
        return entry, None

    def make_agent(
        self,
        name: str,
        instructions: str,
        *,
        toolsets: Sequence[str] = (),
        description: str | None = None,
        keep: Keep = "run",
    ) -> Entry:
        """Make an agent that lives in this run (`keep="session"`: in its session, for its later runs, until it
        closes): `call_agent(name, ...)` runs it. It runs with `instructions` on the model this call's agent run
        uses, and may use only `toolsets` this call's entry has (each gated by its own approval policy, as for any
        call); its calls are children like any entry's, under the depth limit. Raises `ToolsetError` for a name
        already taken or not a valid tool name, a toolset this entry does not have, or another `keep`."""
        run, plan = self._open_run(), self._plan or self._host.plan_of(self.entry.name)
        built = self._instances  # its calls of entries are gated as its maker's
        return make_agent(self._host, self.entry, plan, built, run, name, instructions, toolsets, description, keep)

    async def call_tool(self, name: str, args: dict[str, Any] | None = None) -> Any:
        """Call one of this scope's tools directly, validating `args` like a model's call.

        The call is gated by the approval policy of the tool's toolset, like a model's call; a
        denial raises `ApprovalDenied` (there is no model to tell).
        """
        call_id = self._lent().gate().direct_call_id()
        ctx: RunContext[Any] = RunContext(
            deps=self, model=_direct_model(), usage=self.state.usage, tool_name=name, tool_call_id=call_id, prompt=None
        )
        available: list[str] = []
        for lent in self._lent().lent:
            tools = await lent.get_tools(ctx)
            found = tools.get(name)
            if found is None:
                available.extend(tools)
                continue
            validated = found.args_validator.validate_python(args or {})
            return await lent.call_direct(name, validated, ctx, found)
        raise ToolsetError(
            f"entry {self.entry.name!r} has no tool {name!r}; its tools are: {', '.join(sorted(available)) or 'none'}"
        )

    def __repr__(self) -> str:
        return f"CallScope({self.id}, entry={self.entry.name!r}, depth={self.depth})"
