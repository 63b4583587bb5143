"""`Runtime`: loads entries against a container and runs them, each run in its own context."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any

from dependency_injector import containers, providers
from pydantic_ai.messages import ModelMessage
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.usage import RunUsage

from .approval import Approvals, Approver, load_policies
from .call import CallScope, check_unique_tools, known_tool_names
from .entries import Entry, entry_toolset
from .errors import ConfigurationError
from .lifecycle import Teardown
from .policy import ToolPolicy
from .run import RunResult, RunState
from .scopes import Scope, ToolsetSpec
from .settings import RuntimeConfig

__all__ = ["Runtime"]

ToolsetSource = ToolsetSpec | providers.Provider[Any] | Callable[[], Any]
"""A toolset spec, a provider (scope from its kind), or a plain factory (per call)."""


class _RunScope:
    """One run's state and the per-run objects it owns."""

    __slots__ = ("_cache", "state", "teardown")

    def __init__(self, state: RunState, teardown: Teardown) -> None:
        self.state = state
        self.teardown = teardown
        self._cache: dict[ToolsetSpec, asyncio.Future[Any]] = {}

    async def acquire(self, spec: ToolsetSpec, label: str) -> Any:
        """The run's one instance of a per-run spec, created on first use and owned by the run."""
        pending = self._cache.get(spec)
        if pending is not None:  # made, or being made by a parallel call of this run
            return pending.result() if pending.done() else await asyncio.shield(pending)
        pending = self._cache[spec] = asyncio.get_running_loop().create_future()
        try:
            obj = await spec.create()
            await self.teardown.adopt(obj, label)
        except BaseException as error:
            del self._cache[spec]  # the next use tries again
            if isinstance(error, asyncio.CancelledError):
                pending.cancel()
            else:
                pending.set_exception(error)
                pending.exception()  # parallel waiters re-raise it; nobody else need retrieve it
            raise
        pending.set_result(obj)
        return obj


class Runtime:
    """Runs entries with their resources. Use `async with Runtime(...)` or call `aclose()`.

    Toolset names resolve against `toolsets` (explicit wins), then the container's providers,
    then the other entries (an entry named as a toolset becomes a tool that calls it). Unknown
    names and duplicate tool names are reported here, at load time.

    Approval policies per toolset name come from the container's `approval_policies` provider,
    then `policies` (which win per name), then `config.approval_policies` (settings overrides).
    `approver` answers the calls that need approval when `config.approval_mode` is `prompt`.
    """

    def __init__(
        self,
        container: containers.Container | None = None,
        *,
        entries: Iterable[Entry] = (),
        toolsets: Mapping[str, ToolsetSource] | None = None,
        config: RuntimeConfig | None = None,
        policies: Mapping[str, ToolPolicy] | None = None,
        approver: Approver | None = None,
    ) -> None:
        self.container = container
        self.config = config if config is not None else RuntimeConfig.from_container(container)
        self.usage = RunUsage()
        """Usage summed over every run of this runtime."""
        self._entries: dict[str, Entry] = {}
        for item in entries:
            if not isinstance(item, Entry):
                raise ConfigurationError(f"{item!r} is not an entry: use AgentEntry(...) or @entry")
            if item.name in self._entries:
                raise ConfigurationError(f"two entries are named {item.name!r}; entry names must be unique")
            self._entries[item.name] = item
        self._named: dict[str, ToolsetSpec] = {}
        self.entry_tools: set[str] = set()
        """Toolset names that call another entry (agent-as-tool)."""
        self._per_run: list[providers.Provider[Any]] = []
        self._provider_names: dict[int, str] = {}
        self._run_state: providers.Provider[Any] | None = None
        if container is not None:
            run_state = container.providers.get("run_state")
            if isinstance(run_state, providers.ContextLocalSingleton):
                self._run_state = run_state
            self._per_run = list(container.traverse(types=[providers.ContextLocalSingleton]))
            self._provider_names = {id(provider): name for name, provider in container.providers.items()}
        for name, source in (toolsets or {}).items():
            self._named[name] = _checked("Runtime(toolsets=...)", name, ToolsetSpec.coerce(source))
        self._specs = {name: self._load_entry(item) for name, item in self._entries.items()}
        self._approvals = Approvals(
            self._load_policies(policies or {}),
            mode=self.config.approval_mode,
            on_deny=self.config.approval_on_deny,
            approver=approver,
        )
        self._globals = Teardown(self.config.cleanup_timeout, Scope.GLOBAL)
        self._global_lock = asyncio.Lock()
        self._closed = False
        self._running: set[asyncio.Task[RunResult]] = set()

    # -- loading ---------------------------------------------------------------

    def _load_entry(self, item: Entry) -> tuple[tuple[str, ToolsetSpec, str], ...]:
        owner = f"entry {item.name!r}"
        specs = [(name, self._spec_named(owner, name)) for name in item.toolsets]
        check_unique_tools(item.name, ((name, known_tool_names(spec.provides) or ()) for name, spec in specs))
        return tuple((name, spec, f"toolset {name!r} ({spec.scope}) of {owner}") for name, spec in specs)

    def _spec_named(self, owner: str, name: str) -> ToolsetSpec:
        """The spec of a toolset name, checked as far as it can be without building anything."""
        spec = self._named.get(name)
        if spec is not None:
            return spec
        provider = None if self.container is None else self.container.providers.get(name)
        if provider is not None:
            try:
                spec = ToolsetSpec.from_provider(provider)
            except TypeError as error:
                raise ConfigurationError(f"{owner}: toolset {name!r}: {error}") from None
        elif name in self._entries:
            self.entry_tools.add(name)
            toolset = entry_toolset(self._entries[name])
            spec = ToolsetSpec(lambda: toolset, Scope.GLOBAL, toolset)
        else:
            known = sorted({*self._named, *(self.container.providers if self.container else ()), *self._entries})
            raise ConfigurationError(
                f"{owner} names toolset {name!r}, which is neither a provider of the container, "
                f"a runtime toolset, nor an entry (known: {', '.join(known) or 'none'}); "
                f"declare a provider named {name!r} or fix the name"
            )
        self._named[name] = _checked(owner, name, spec)
        return spec

    def _load_policies(self, policies: Mapping[str, ToolPolicy]) -> dict[str, ToolPolicy]:
        declared: list[Mapping[str, ToolPolicy]] = [self._class_default_policies()]
        provider = None if self.container is None else self.container.providers.get("approval_policies")
        if provider is not None:
            from_container = provider()
            if not isinstance(from_container, Mapping):
                raise ConfigurationError(
                    f"the container's approval_policies provider built {type(from_container).__qualname__}; "
                    "declare it as providers.Dict(toolset_name=ToolPolicy(...), ...)"
                )
            declared.append(from_container)
        declared.append(policies)
        known = {*self._named, *(self.container.providers if self.container is not None else ()), *self._entries}
        known -= {"approval_policies", "config", "run_state"}
        return load_policies(declared, self.config.approval_policies, known=known, tools_of=self._static_tool_names)

    def _class_default_policies(self) -> dict[str, ToolPolicy]:
        """`Toolset.default_policy` of each loaded toolset name whose class is known at load."""
        defaults: dict[str, ToolPolicy] = {}
        for name, spec in self._named.items():
            provides = spec.provides if isinstance(spec.provides, type) else type(spec.provides)
            policy = getattr(provides, "default_policy", None) if spec.provides is not None else None
            if isinstance(policy, ToolPolicy):
                defaults[name] = policy
        return defaults

    def _static_tool_names(self, name: str) -> frozenset[str] | None:
        """The tools of a toolset name when they are known without building it."""
        return known_tool_names(self._spec_named("an approval policy", name).provides)

    def _toolsets_of(self, entry_name: str) -> tuple[tuple[str, ToolsetSpec, str], ...]:
        """(name, spec, teardown label) of each toolset of an entry, resolved at load."""
        return self._specs[entry_name]

    def entry(self, name: str) -> Entry:
        """The loaded entry called `name`."""
        try:
            return self._entries[name]
        except KeyError:
            raise ConfigurationError(
                f"no entry named {name!r}; loaded entries: {', '.join(self._entries) or 'none'}"
            ) from None

    # -- running ---------------------------------------------------------------

    async def run(
        self,
        entry: Entry | str,
        input_data: Any,
        *,
        message_history: list[ModelMessage] | None = None,
    ) -> RunResult:
        """Run an entry as one top-level request, in a context of its own."""
        if self._closed:
            raise RuntimeError("this Runtime is closed; create a new one")
        name = entry if isinstance(entry, str) else entry.name
        target = self.entry(name)
        if not isinstance(entry, str) and entry is not target:
            raise ConfigurationError(f"entry {name!r} is not the one this runtime loaded under that name")
        task = asyncio.get_running_loop().create_task(
            self._run(target, input_data, message_history), context=contextvars.copy_context()
        )
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        try:
            return await task
        except BaseException:
            # Until the loop turns, asyncio's wakeup callback still holds the failed task, and so the
            # exception's frames and the run's toolsets. Turn it once so nothing outlives the run.
            # (A second cancellation arriving here raises CancelledError, as the caller asked.)
            del task
            await asyncio.sleep(0)
            raise

    async def _run(self, target: Entry, input_data: Any, message_history: list[ModelMessage] | None) -> RunResult:
        for provider in self._per_run:
            provider.reset()  # type: ignore[attr-defined]
        teardown = Teardown(self.config.cleanup_timeout, Scope.PER_RUN)
        state: RunState | None = None
        try:
            async with teardown:
                state = await self._new_state()
                for provider in self._per_run:
                    obj = await _resolved(provider())
                    name = self._provider_names.get(id(provider), type(obj).__qualname__)
                    await teardown.adopt(obj, f"per-run provider {name!r}")
                async with CallScope(
                    self, target, _RunScope(state, teardown), message_history=message_history
                ) as scope:
                    output = await target.run_turn(scope, input_data)
                result = RunResult(output, state.usage, scope.all_messages, state.calls_in_order(), tuple(state.log))
        finally:
            for provider in self._per_run:
                provider.reset()  # type: ignore[attr-defined]
            if state is not None:
                self.usage.incr(state.usage)
        return result

    async def _new_state(self) -> RunState:
        if self._run_state is None:
            return RunState()
        state = await _resolved(self._run_state())
        if not isinstance(state, RunState):
            raise ConfigurationError(
                f"the container's run_state provider built {type(state).__qualname__}, not llm_do.RunState"
            )
        return state

    async def _acquire_global(self, spec: ToolsetSpec, label: str) -> Any:
        obj = await spec.create()
        async with self._global_lock:  # a second caller waits until the first has entered it
            await self._globals.adopt(obj, label)
        return obj

    # -- closing ---------------------------------------------------------------

    async def aclose(self) -> None:
        """Refuse new runs, wait for the runs in flight, then tear down globals and resources.

        If `aclose` itself is cancelled (a shutdown deadline, say), the runs still in flight are
        cancelled and torn down before the globals they use. Idempotent.
        """
        if self._closed:
            return
        self._closed = True
        try:
            if self._running:
                await asyncio.wait(set(self._running))
        except asyncio.CancelledError:
            await _cancel_and_wait(self._running)
            raise
        finally:
            try:
                await self._globals.close(None)
            finally:
                if self.container is not None:
                    result = self.container.shutdown_resources()
                    if result is not None:
                        await result

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


async def _cancel_and_wait(tasks: set[asyncio.Task[RunResult]]) -> None:
    """Cancel the tasks and wait until each has finished its teardown, whatever else is cancelled."""
    pending = set(tasks)
    for task in pending:
        task.cancel()
    while pending:
        try:
            _, pending = await asyncio.wait(pending)
        except asyncio.CancelledError:
            continue  # a further cancellation: the runs' teardown still comes first


async def _resolved(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _checked(owner: str, name: str, spec: ToolsetSpec) -> ToolsetSpec:
    """Refuse at load a toolset whose declared class or object is not a pydantic-ai toolset."""
    provides = spec.provides
    built = provides if isinstance(provides, type) else type(provides)
    if provides is not None and not issubclass(built, AbstractToolset):
        raise ConfigurationError(
            f"{owner}: toolset {name!r} is declared to build {built.__qualname__}, which is not a "
            "pydantic-ai toolset; make its provider build an AbstractToolset (an llm_do.Toolset "
            "subclass, a FunctionToolset, ...)"
        )
    return spec
