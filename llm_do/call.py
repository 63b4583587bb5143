"""`CallScope`: one entry invocation, its toolsets, and the only surface for calling tools."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, WrapperToolset

from .errors import ConfigurationError, MaxDepthExceeded, ToolsetError
from .gate import CallGate
from .lifecycle import Teardown
from .run import CallRecord, LogEntry, Outcome, RunState, usage_of
from .scopes import Scope, ToolsetSpec
from .toolset import Toolset

if TYPE_CHECKING:
    from .entries import Entry
    from .runtime import Runtime, _RunScope

__all__ = ["CallScope"]


@dataclass
class _Borrowed(WrapperToolset[Any]):
    """Lends a scope-owned toolset to one agent run: the scope, not pydantic-ai, enters and exits it."""

    @property
    def label(self) -> str:
        return self.wrapped.label

    async def __aenter__(self) -> _Borrowed:
        return self

    async def __aexit__(self, *args: Any) -> bool | None:
        return None

    async def for_run(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        fresh = await self.wrapped.for_run(ctx)
        return self if fresh is self.wrapped else fresh  # pydantic-ai owns a per-run copy


def check_unique_tools(entry: str, tools_by_toolset: Iterable[tuple[str, Iterable[str]]]) -> None:
    """Raise `ConfigurationError` when two of an entry's toolsets define the same tool name."""
    owner: dict[str, str] = {}
    for name, tool_names in tools_by_toolset:
        for tool_name in tool_names:
            if tool_name in owner:
                raise ConfigurationError(
                    f"entry {entry!r}: tool {tool_name!r} is defined by both toolset {owner[tool_name]!r} "
                    f"and toolset {name!r}; rename one of the tools or drop one toolset from the entry"
                )
            owner[tool_name] = name


def known_tool_names(toolset: object) -> frozenset[str] | None:
    """Tool names known without a run: of a `Toolset` class or instance, or a `FunctionToolset`."""
    if isinstance(toolset, type):
        return toolset.tool_names() if issubclass(toolset, Toolset) else None
    if isinstance(toolset, Toolset):
        return type(toolset).tool_names()
    if isinstance(toolset, FunctionToolset):
        return frozenset(toolset.tools)
    return None


def _no_model(messages: list[ModelMessage], info: AgentInfo) -> Any:
    raise ToolsetError("a tool called directly through CallScope.call_tool has no model to ask")


_DIRECT_MODEL = FunctionModel(_no_model, model_name="llm-do-direct")


class CallScope:
    """One invocation of an entry: resolves its toolsets, lends them out, and tears down what it made.

    Per-call toolsets are built fresh here; per-run ones come from the run, global ones from the
    runtime. Agents run by `AgentEntry` receive the scope as `deps`. Use it as an async context
    manager; `Runtime.run` does this for you.
    """

    def __init__(
        self,
        runtime: Runtime,
        entry: Entry,
        run: _RunScope,
        *,
        parent: CallScope | None = None,
        message_history: list[ModelMessage] | None = None,
    ) -> None:
        self.runtime = runtime
        self.entry = entry
        self.parent = parent
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.message_history = message_history
        self.id = run.state.next_call_id()
        self.toolsets: list[AbstractToolset[Any]] = []
        self.messages: list[ModelMessage] = []
        """Messages this call added (recorded in the run's log)."""
        self.all_messages: list[ModelMessage] = []
        """The whole conversation after this call, including `message_history`."""
        self._run = run
        self._instances: dict[str, AbstractToolset[Any]] = {}
        self._teardown = Teardown(runtime.config.cleanup_timeout, Scope.PER_CALL)
        self._gate = CallGate(runtime._approvals, self)

    @property
    def capabilities(self) -> list[AbstractCapability[Any]]:
        """Capabilities an agent run in this scope needs: the one that resolves approval requests."""
        return [self._gate.capability]

    @property
    def state(self) -> RunState:
        """The run's shared state: usage, call records, message log."""
        return self._run.state

    def toolset(self, name: str) -> AbstractToolset[Any]:
        """This call's instance of the toolset `name` (unwrapped), while the call runs."""
        try:
            return self._instances[name]
        except KeyError:
            raise ToolsetError(
                f"entry {self.entry.name!r} has no open toolset {name!r}; its toolsets: "
                f"{', '.join(self._instances) or 'none (the call has ended)'}"
            ) from None

    def chain(self) -> tuple[str, ...]:
        """Entry names from the top-level call down to this one."""
        names: list[str] = []
        scope: CallScope | None = self
        while scope is not None:
            names.append(scope.entry.name)
            scope = scope.parent
        return tuple(reversed(names))

    async def __aenter__(self) -> CallScope:
        try:
            acquired = [
                (name, await self._acquire(name, spec, label))
                for name, spec, label in self.runtime._toolsets_of(self.entry.name)
            ]
            if len(acquired) > 1:
                check_unique_tools(self.entry.name, ((name, known_tool_names(ts) or ()) for name, ts in acquired))
            self._instances = dict(acquired)
            # Gated per toolset name; the scope still owns (enters, exits, cleans up) the instance.
            self.toolsets = [_Borrowed(self._gate.wrap(name, toolset)) for name, toolset in acquired]
        except BaseException as exc:
            await self._finish(exc)
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._finish(exc)

    async def _acquire(self, name: str, spec: ToolsetSpec, label: str) -> AbstractToolset[Any]:
        if spec.scope is Scope.PER_CALL:
            obj = await spec.create()
            await self._teardown.adopt(obj, label)
        elif spec.scope is Scope.PER_RUN:
            obj = await self._run.acquire(spec, label)
        else:
            obj = await self.runtime._acquire_global(spec, label)
        if not isinstance(obj, AbstractToolset):
            raise ToolsetError(
                f"entry {self.entry.name!r}: toolset {name!r} was built as {type(obj).__qualname__}, "
                "which is not a pydantic-ai toolset; make its provider build an AbstractToolset "
                "(an llm_do.Toolset subclass, a FunctionToolset, ...)"
            )
        return obj

    async def _finish(self, exc: BaseException | None) -> None:
        outcome: Outcome = "ok" if exc is None else "cancelled" if isinstance(exc, asyncio.CancelledError) else "error"
        state = self.state
        parent_id = None if self.parent is None else self.parent.id
        state.calls.append(
            CallRecord(
                id=self.id,
                parent=parent_id,
                entry=self.entry.name,
                depth=self.depth,
                toolsets=tuple(self.entry.toolsets),
                outcome=outcome,
                usage=usage_of(self.messages),
            )
        )
        if self.messages:
            state.log.append(LogEntry(self.id, parent_id, self.entry.name, self.depth, tuple(self.messages)))
        try:
            await self._teardown.__aexit__(type(exc) if exc else None, exc, None)
        finally:
            self.toolsets = []
            self._instances = {}
            self._gate.clear()

    async def call_agent(self, name: str, input_data: Any) -> Any:
        """Run the entry `name` as a child call (depth + 1) and return its output.

        `name` must be one of this entry's toolsets; the child gets fresh per-call toolsets. The
        call is gated by the approval policy of toolset `name` (tool `name`, args `{"input": ...}`);
        a denial raises `ApprovalDenied`.
        """
        self._check_callable(name)
        self.check_depth(name)  # before anyone is asked to approve a call that cannot run
        await self._gate.authorize(name, name, {"input": input_data})
        return await self._call_child(name, input_data)

    def check_depth(self, name: str) -> None:
        """Raise `MaxDepthExceeded` if calling entry `name` from here would go past `max_depth`."""
        max_depth = self.runtime.config.max_depth
        if self.depth + 1 > max_depth:
            raise MaxDepthExceeded((*self.chain(), name), max_depth)

    def _check_callable(self, name: str) -> None:
        if name not in self.entry.toolsets:
            raise ToolsetError(f"entry {self.entry.name!r} cannot call {name!r}: add {name!r} to its toolsets")

    async def _call_child(self, name: str, input_data: Any) -> Any:
        """Run a child call. The caller checked that `name` is one of this entry's toolsets (a model
        is only offered those) and gated it; the depth limit is enforced here, whoever calls."""
        target = self.runtime.entry(name)
        self.check_depth(name)
        async with CallScope(self.runtime, target, self._run, parent=self) as child:
            return await target.run_turn(child, input_data)

    async def call_tool(self, name: str, args: dict[str, Any] | None = None) -> Any:
        """Call one of this scope's tools directly, validating `args` like a model's call.

        The call is gated by the approval policy of the tool's toolset, like a model's call; a
        denial raises `ApprovalDenied` (there is no model to tell).
        """
        ctx: RunContext[Any] = RunContext(
            deps=self,
            model=_DIRECT_MODEL,
            usage=self.state.usage,
            tool_name=name,
            tool_call_id=self._gate.direct_call_id(),
            prompt=None,
        )
        available: list[str] = []
        for toolset in self.toolsets:
            tools = await toolset.get_tools(ctx)
            found = tools.get(name)
            if found is None:
                available.extend(tools)
                continue
            validated = found.args_validator.validate_python(args or {})
            try:
                return await toolset.call_tool(name, validated, ctx, found)
            except ApprovalRequired:
                # The same resolution as in an agent run, answered here instead of by the capability.
                if not await self._gate.settle_direct(ctx.tool_call_id or ""):
                    raise
            validated = found.args_validator.validate_python(args or {})
            return await toolset.call_tool(name, validated, replace(ctx, tool_call_approved=True), found)
        raise ToolsetError(
            f"entry {self.entry.name!r} has no tool {name!r}; its tools are: {', '.join(sorted(available)) or 'none'}"
        )

    def __repr__(self) -> str:
        return f"CallScope({self.id}, entry={self.entry.name!r}, depth={self.depth})"
