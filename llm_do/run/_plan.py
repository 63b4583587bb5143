"""`Loaded`: a runtime's configuration resolved once at load time, and the global objects it owns.

Entries, the spec of every toolset name they use, approval policies, the per-run providers of
the container and the global teardown live here; `Runtime` runs requests against it and
`CallScope` reads it (through the `CallHost` protocol).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from dependency_injector import containers, providers
from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.toolsets import AbstractToolset

from ..approvals import Approvals, Approver, ToolPolicy
from ..di import RunLocalSingleton, RuntimeConfig, SessionLocalSingleton, ToolsetSpec
from ..errors import ConfigurationError
from ..results import RunState
from ..scopes import Scope, ScopeOwner, built
from ..toolkit import Toolset, check_unique_tools, known_tool_names, may_ask_for_approval
from ._call_scope import Entry, EntryPlan, ToolsetUse
from ._entries import entry_toolset
from ._servers import owning

__all__ = ["CapturablePerRunWarning", "Loaded", "ToolsetSource"]

ToolsetSource = ToolsetSpec | providers.Provider[Any] | Callable[[], Any]
"""A toolset spec, a provider (scope from its kind), or a plain factory (per call)."""

_RESERVED = frozenset({"approval_policies", "config", "run_state"})


class CapturablePerRunWarning(UserWarning):
    """Per-run providers declared as plain `ContextLocalSingleton`: a context snapshot can keep their instances."""


class Loaded:
    """Entries and toolset specs checked at load, approvals, per-run providers and the globals."""

    def __init__(
        self,
        container: containers.Container | None,
        *,
        entries: Iterable[Entry],
        toolsets: Mapping[str, ToolsetSource] | None,
        config: RuntimeConfig,
        policies: Mapping[str, ToolPolicy] | None,
        approver: Approver | None,
        event_stream_handler: EventStreamHandler[Any] | None = None,
    ) -> None:
        self.container = container
        self.config = config
        self.event_stream_handler = event_stream_handler
        """Given to every agent run of every call: pydantic-ai then streams and passes it the events."""
        self.entries: dict[str, Entry] = {}
        for item in entries:
            if not isinstance(item, Entry):
                raise ConfigurationError(f"{item!r} is not an entry: use AgentEntry(...) or @entry")
            if item.name in self.entries:
                raise ConfigurationError(f"two entries are named {item.name!r}; entry names must be unique")
            self.entries[item.name] = item
        self._named: dict[str, ToolsetSpec] = {}
        self._entry_tools: set[str] = set()
        self.run_state: providers.Provider[Any] | None = None
        self.per_run: tuple[tuple[str, providers.Provider[Any]], ...] = ()
        """(name, provider) of every per-run provider but `run_state`, resolved at each run's start."""
        self.per_session: tuple[tuple[str, providers.Provider[Any]], ...] = ()
        """(name, provider) of every `SessionLocalSingleton`, resolved when a session's first run starts."""
        self.context_locals: tuple[providers.Provider[Any], ...] = ()
        """Plain `ContextLocalSingleton`s: reset at each run's start and end."""
        self.capturable: tuple[str, ...] = ()
        """Names of per-run providers whose instances a context snapshot can keep alive after a run."""
        self._resources: list[tuple[providers.Provider[Any], Any]] = []
        if container is not None:
            self._load_per_run(container)
        for name, source in (toolsets or {}).items():
            self._named[name] = _checked("Runtime(toolsets=...)", name, ToolsetSpec.coerce(source))
        uses = {name: self._load_entry(item) for name, item in self.entries.items()}
        self.entry_tools = frozenset(self._entry_tools)
        """Toolset names that call another entry (agent-as-tool)."""
        self.approvals = Approvals(
            self._declared_policies(policies or {}),
            config.approval_policies,
            known=self._known() - _RESERVED,
            tools_of=self._static_tool_names,
            mode=config.approval_mode,
            on_deny=config.approval_on_deny,
            approver=approver,
            timeout=config.approval_timeout,
        )
        self._plans = {
            name: EntryPlan.of(tuple(self._with_gating(use) for use in of_entry)) for name, of_entry in uses.items()
        }
        self.globals = ScopeOwner(Scope.GLOBAL, config.cleanup_timeout)
        """The owner of the global objects: released when the runtime closes."""

    # -- loading -----------------------------------------------------------------

    def _load_per_run(self, container: containers.Container) -> None:
        names = {id(provider): name for name, provider in container.providers.items()}
        run_state = container.providers.get("run_state")
        if isinstance(run_state, providers.ContextLocalSingleton):
            self.run_state = run_state
        per_run: list[tuple[str, providers.Provider[Any]]] = []
        per_session: list[tuple[str, providers.Provider[Any]]] = []
        plain: list[providers.Provider[Any]] = []
        for provider in container.traverse(types=[providers.ContextLocalSingleton]):
            name = names.get(id(provider), _described(provider))
            if isinstance(provider, SessionLocalSingleton):
                per_session.append((name, provider))
                continue
            if not isinstance(provider, RunLocalSingleton):
                plain.append(provider)
            if provider is not run_state:
                per_run.append((name, provider))
        self.per_run = tuple(per_run)
        self.per_session = tuple(per_session)
        self.context_locals = tuple(plain)
        self.capturable = tuple(names.get(id(provider), _described(provider)) for provider in plain)
        if self.capturable:
            warnings.warn(
                f"per-run provider(s) {', '.join(map(repr, self.capturable))} are plain ContextLocalSingletons: "
                "a callback or task started during a run (a connection pool's idle timer, say) keeps their "
                "instances alive after the run. Declare them with llm_do.RunLocalSingleton, which the run "
                "empties when it ends.",
                CapturablePerRunWarning,
                stacklevel=4,
            )
        self._resources = [
            (provider, provider.last_overriding) for provider in container.traverse(types=[providers.Resource])
        ]

    def _load_entry(self, item: Entry) -> tuple[ToolsetUse, ...]:
        owner = f"entry {item.name!r}"
        specs = [(name, self._spec_named(owner, name)) for name in item.toolsets]
        check_unique_tools(item.name, ((name, known_tool_names(spec.provides) or ()) for name, spec in specs))
        return tuple(
            ToolsetUse(
                name, spec, f"toolset {name!r} ({spec.scope}) of {owner}", known_tool_names(spec.provides) is not None
            )
            for name, spec in specs
        )

    def _spec_named(self, owner: str, name: str) -> ToolsetSpec:
        """The spec of a toolset name, checked as far as it can be without building anything."""
        spec = self._named.get(name)
        if spec is not None:
            return spec
        provider = None if self.container is None else self.container.providers.get(name)
        if provider is not None:
            try:
                spec = ToolsetSpec.from_provider(provider, name)
            except TypeError as error:
                raise ConfigurationError(f"{owner}: toolset {name!r}: {error}") from None
        elif name in self.entries:
            self._entry_tools.add(name)
            toolset = entry_toolset(self.entries[name])
            spec = ToolsetSpec(lambda: toolset, Scope.GLOBAL, toolset)
        else:
            raise ConfigurationError(
                f"{owner} names toolset {name!r}, which is neither a provider of the container, "
                f"a runtime toolset, nor an entry (known: {', '.join(sorted(self._known())) or 'none'}); "
                f"declare a provider named {name!r} or fix the name"
            )
        spec = self._named[name] = _checked(owner, name, spec)
        return spec

    def _known(self) -> set[str]:
        return {*self._named, *(self.container.providers if self.container is not None else ()), *self.entries}

    def _declared_policies(self, policies: Mapping[str, ToolPolicy]) -> list[Mapping[str, ToolPolicy]]:
        """The declared policies, weakest first: the toolset classes' defaults, the container's, `policies`."""
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
        return declared

    def _with_gating(self, use: ToolsetUse) -> ToolsetUse:
        """The use, with whether its calls can need an approval when that is known at load."""
        if self.approvals.may_gate(use.name):
            return replace(use, may_ask=True)
        provides = use.spec.provides
        if isinstance(provides, type) and issubclass(provides, Toolset):
            return replace(use, may_ask=provides.asks_for_approval())
        if provides is not None and not isinstance(provides, type):
            return replace(use, may_ask=may_ask_for_approval(provides))
        return use

    def _class_default_policies(self) -> dict[str, ToolPolicy]:
        """`Toolset.default_policy` of each loaded toolset name whose class is known at load."""
        defaults: dict[str, ToolPolicy] = {}
        for name, spec in self._named.items():
            if spec.provides is None:
                continue
            provides = spec.provides if isinstance(spec.provides, type) else type(spec.provides)
            policy = getattr(provides, "default_policy", None)
            if isinstance(policy, ToolPolicy):
                defaults[name] = policy
        return defaults

    def _static_tool_names(self, name: str) -> frozenset[str] | None:
        """The tools of a toolset name when they are known without building it."""
        return known_tool_names(self._spec_named("an approval policy", name).provides)

    # -- what calls read (the CallHost protocol) ----------------------------------

    def entry(self, name: str) -> Entry:
        """The loaded entry called `name`."""
        try:
            return self.entries[name]
        except KeyError:
            raise ConfigurationError(
                f"no entry named {name!r}; loaded entries: {', '.join(self.entries) or 'none'}"
            ) from None

    def plan_of(self, entry_name: str) -> EntryPlan:
        """What a call of the entry does with its toolsets, resolved at load."""
        return self._plans[entry_name]

    # -- runs --------------------------------------------------------------------

    async def new_state(self) -> RunState:
        """The run's `RunState`: the container's `run_state` provider's, or a plain one."""
        if self.run_state is None:
            return RunState()
        state = await built(self.run_state())
        if not isinstance(state, RunState):
            raise ConfigurationError(
                f"the container's run_state provider built {type(state).__qualname__}, not llm_do.RunState"
            )
        return state

    def note_resource_overrides(self) -> None:
        """Remember `Resource` overrides made since load, so closing shuts them down even once reset."""
        for index, (provider, seen) in enumerate(self._resources):
            current = provider.last_overriding
            if current is not seen:
                self._resources[index] = (provider, current)
                if isinstance(current, providers.Resource):
                    self._resources.append((current, current.last_overriding))

    async def shutdown_resources(self) -> None:
        """Shut down the container's `Resource`s and any overriding one that was in use."""
        if self.container is None:
            return
        result = self.container.shutdown_resources()
        if result is not None:
            await result
        for provider, _ in self._resources:
            if isinstance(provider, providers.Resource) and provider.initialized:
                done = provider.shutdown()
                if done is not None:
                    await done


def _described(provider: providers.Provider[Any]) -> str:
    provides = getattr(provider, "provides", None)
    return f"{type(provider).__name__}({getattr(provides, '__qualname__', provides)!r})"


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
    return owning(spec, name)
