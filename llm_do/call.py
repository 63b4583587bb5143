"""`CallScope`: one entry invocation, its toolsets, and the only surface for calling tools."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset

from .errors import MaxDepthExceeded, ToolsetError
from .lifecycle import Teardown
from .run import CallRecord, LogEntry, Outcome, RunState, usage_of
from .scopes import Scope, ToolsetSpec

if TYPE_CHECKING:
    from .entries import Entry
    from .runtime import Runtime, _RunScope

__all__ = ["CallScope"]


@dataclass
class _Borrowed(WrapperToolset[Any]):
    """Lends a scope-owned toolset to one agent run: the scope, not pydantic-ai, enters and exits it."""

    async def __aenter__(self) -> _Borrowed:
        return self

    async def __aexit__(self, *args: Any) -> bool | None:
        return None

    async def for_run(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        fresh = await self.wrapped.for_run(ctx)
        return self if fresh is self.wrapped else fresh  # pydantic-ai owns a per-run copy


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
        self._teardown = Teardown(runtime.config.cleanup_timeout, Scope.PER_CALL)

    @property
    def state(self) -> RunState:
        """The run's shared state: usage, call records, message log."""
        return self._run.state

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
            for name, spec in self.runtime._toolsets_of(self.entry.name):
                self.toolsets.append(_Borrowed(await self._acquire(name, spec)))
        except BaseException as exc:
            await self._finish(exc)
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._finish(exc)

    async def _acquire(self, name: str, spec: ToolsetSpec) -> AbstractToolset[Any]:
        label = f"toolset {name!r} ({spec.scope}) of entry {self.entry.name!r}"
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
        state.calls.append(
            CallRecord(
                id=self.id,
                parent=None if self.parent is None else self.parent.id,
                entry=self.entry.name,
                depth=self.depth,
                toolsets=tuple(self.entry.toolsets),
                outcome=outcome,
                usage=usage_of(self.messages),
            )
        )
        if self.messages:
            parent_id = None if self.parent is None else self.parent.id
            state.log.append(LogEntry(self.id, parent_id, self.entry.name, self.depth, tuple(self.messages)))
        try:
            await self._teardown.__aexit__(type(exc) if exc else None, exc, None)
        finally:
            self.toolsets = []

    async def call_agent(self, name: str, input_data: Any) -> Any:
        """Run the entry `name` as a child call (depth + 1) and return its output.

        `name` must be one of this entry's toolsets; the child gets fresh per-call toolsets.
        """
        if name not in self.entry.toolsets:
            raise ToolsetError(f"entry {self.entry.name!r} cannot call {name!r}: add {name!r} to its toolsets")
        target = self.runtime.entry(name)
        max_depth = self.runtime.config.max_depth
        if self.depth + 1 > max_depth:
            raise MaxDepthExceeded((*self.chain(), name), max_depth)
        async with CallScope(self.runtime, target, self._run, parent=self) as child:
            return await target.run_turn(child, input_data)

    async def call_tool(self, name: str, args: dict[str, Any] | None = None) -> Any:
        """Call one of this scope's tools directly, validating `args` like a model's call."""
        ctx: RunContext[Any] = RunContext(
            deps=self, model=_DIRECT_MODEL, usage=self.state.usage, tool_name=name, prompt=None
        )
        available: list[str] = []
        for toolset in self.toolsets:
            tools = await toolset.get_tools(ctx)
            found = tools.get(name)
            if found is None:
                available.extend(tools)
                continue
            validated = found.args_validator.validate_python(args or {})
            return await toolset.call_tool(name, validated, ctx, found)
        raise ToolsetError(
            f"entry {self.entry.name!r} has no tool {name!r}; its tools are: {', '.join(sorted(available)) or 'none'}"
        )

    def __repr__(self) -> str:
        return f"CallScope({self.id}, entry={self.entry.name!r}, depth={self.depth})"
