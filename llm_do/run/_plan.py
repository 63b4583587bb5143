"""What a runtime resolves once, at load (`Plan`), and what it holds while it runs (`GlobalScope`).

The plan is the entries, the spec of every toolset name they use (checked as far as they can be without
building anything), the approval policies and the container's parts; it does not change once made, and
`CallScope` reads it (through the `CallHost` protocol). The global scope owns the global objects runs
adopt and the container's resources, released when the runtime closes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset

from ..approvals._approvals import Approvals
from ..approvals._policy import ToolPolicy
from ..approvals._requests import Approver
from ..di._config import RuntimeConfig
from ..di._container import Container, ContainerParts, Resources, policies_built, provider_name
from ..di._overrides import Graph, Overrides, OverridesSource, check_session_overrides
from ..di._specs import ToolsetRef, ToolsetSource, ToolsetSpec, injection_scope, toolset_names
from ..errors import ConfigurationError, listing
from ..guards._guard import no_model
from ..results import RunState
from ..scopes._bus import Sink
from ..scopes._owner import ScopeOwner
from ..scopes._scope import Scope
from ..scopes._tasks import built
from ..toolkit._toolset import (
    Toolset,
    check_unique_tools,
    injected_keys,
    known_tool_names,
    known_tool_traits,
    may_ask_for_approval,
)
from ._entries import AgentEntry, entry_toolset, made_agent
from ._entry import Entry, EntryPlan, ToolsetUse, entries_reached
from ._servers import owning

PoliciesSource = Mapping[Any, ToolPolicy] | Any
"""Approval policies by toolset: names or references (`App.tools`) to policies, or a provider that builds them."""

_RESERVED = frozenset({"approval_policies", "config", "run_state"})
_logger = logging.getLogger("llm_do")
_LATER: ContextVar[bool] = ContextVar("llm_do_models_given_later", default=False)


@contextmanager
def models_given_later() -> Iterator[None]:
    """Runtimes loaded inside say nothing of entries without a model: whoever loads them says it otherwise
    (`llm-do check` lists the workers without one)."""
    token = _LATER.set(True)
    try:
        yield
    finally:
        _LATER.reset(token)


def _warn_without_model(entries: Mapping[str, Entry], config: RuntimeConfig) -> None:
    """Log (a warning, not an error) the entries whose agents have no model when the runtime has none either: a
    model may still be put in place for a run (`agent.override(model=...)`, as a test or a job's journal does); a
    run without one fails with the same words (`ConfigurationError`)."""
    if config.model is not None or _LATER.get():
        return
    found = [name for name, entry in entries.items() if isinstance(entry, AgentEntry) and entry.agent.model is None]
    if found:
        _logger.warning("%s", no_model(found))


def _check_own_tools(entries: Mapping[str, Entry], config: RuntimeConfig) -> None:
    """Check the tools registered on an entry's agent itself (`tools=`, `@agent.tool`, `toolsets=`): pydantic-ai runs
    them beside the call's toolsets, and llm-do's approvals gate only those. One declared `requires_approval=True` is
    refused (pydantic-ai defers its calls to the run's output, which an entry never answers, so the run would end on
    the first call); the others nobody declared read-only are logged (a warning): such a tool runs where the same
    tool in a toolset would ask."""
    quiet = config.approval_mode == "approve_all" or config.approval_default == "allow"
    for name, entry in entries.items():
        if not isinstance(entry, AgentEntry):
            continue
        ungated: list[str] = []
        for toolset in entry.agent.toolsets:
            if not isinstance(toolset, FunctionToolset):
                ungated.append(f"the toolset {toolset.label}")
                continue
            for tool, item in toolset.tools.items():
                if item.requires_approval:
                    raise ConfigurationError(
                        f"entry {name!r}: its agent's own tool {tool!r} requires approval, which llm-do asks only "
                        "for the tools of the entry's toolsets (pydantic-ai would end the run with a deferred call "
                        "nobody answers): move it to a toolset the entry names (a provider of "
                        "FunctionToolset([...])), where it asks"
                    )
                if not (item.metadata or {}).get("read_only"):
                    ungated.append(tool)
        if ungated and not quiet:
            _logger.warning(
                "entry %r: its agent's own tools run without llm-do's approvals (policies and approvers gate the "
                "entry's toolsets only): %s. Declare a tool read-only if it is (Tool(f, metadata={'read_only': "
                "True})), or move the tools to a toolset the entry names (a provider of FunctionToolset([...])), "
                "where they are gated",
                name,
                ", ".join(ungated),
            )


class Plan:
    """Entries and toolset specs checked at load, approvals and the container's parts: fixed once made."""

    __slots__ = (
        "_container",
        "_graph",
        "_injections",
        "_named",
        "_plans",
        "approvals",
        "config",
        "entries",
        "entry_tools",
        "event_stream_handler",
        "parts",
    )

    def __init__(
        self,
        container: Container | None,
        *,
        entries: Iterable[Entry],
        toolsets: Mapping[str, ToolsetSource] | None,
        config: RuntimeConfig,
        policies: PoliciesSource | None,
        approver: Approver | None,
        event_stream_handler: EventStreamHandler[Any] | None = None,
    ) -> None:
        self.config = config
        self._container = container
        self._graph: Graph | None = None
        self._injections: dict[object, tuple[Any, Scope]] = {}
        self.event_stream_handler = event_stream_handler
        """Given to every agent run of every call: pydantic-ai then streams and passes it the events."""
        self.parts = ContainerParts.of(container)
        """What the runtime reads of its container (none without one)."""
        self.entries: dict[str, Entry] = {}
        for item in entries:
            if not isinstance(item, Entry):
                raise ConfigurationError(f"{item!r} is not an entry: use AgentEntry(...) or @entry")
            if item.name in self.entries:
                raise ConfigurationError(f"two entries are named {item.name!r}; entry names must be unique")
            self.entries[item.name] = item
        self._named: dict[str, ToolsetSpec] = {}
        entry_tools: set[str] = set()
        for name, source in (toolsets or {}).items():
            self._named[name] = _checked("Runtime(toolsets=...)", name, ToolsetSpec.coerce(source))
        uses = {name: self._load_entry(item, entry_tools) for name, item in self.entries.items()}
        _warn_without_model(self.entries, config)
        _check_own_tools(self.entries, config)
        agent_gates = {name: self._agent_gates(of_entry) for name, of_entry in uses.items()}
        entry_tools.update(gate for gates in agent_gates.values() for gate in gates.values())
        self.entry_tools = frozenset(entry_tools)
        """Toolset names that call another entry (agent-as-tool)."""
        self.approvals = Approvals(
            self._declared_policies(policies),
            config.approval_policies,
            known=self._known() - _RESERVED,
            listed=self._toolset_names(),
            tools_of=self._static_tool_names,
            mode=config.approval_mode,
            undeclared=config.approval_default,
            on_deny=config.approval_on_deny,
            approver=approver,
            timeout=config.approval_timeout,
        )
        self._plans = {
            name: EntryPlan.of(
                tuple(self._with_gating(replace(use, rules=self.approvals.rules(use.name))) for use in of_entry),
                agent_gates[name],
            )
            for name, of_entry in uses.items()
        }

    def _providers(self) -> Graph:
        """What the container's providers are built from, read on first use."""
        graph = self._graph
        if graph is None:
            graph = self._graph = Graph(self._container)
        return graph

    def overrides(self, given: OverridesSource, level: Scope) -> Overrides:
        """The overrides of one run (or session): `ConfigurationError` for a key that names no provider of the
        container."""
        return Overrides(self._providers(), given, level)

    def injection(self, key: object) -> tuple[Any, Scope]:
        """The provider a tool's injected parameter asks for (`Provide[App.repo]`), with where its object lives:
        `ConfigurationError` for one that is not the container's."""
        found = self._injections.get(key)
        if found is None:
            provider = self._providers().provider(key, "a tool's injected parameter")
            found = self._injections[key] = (provider, injection_scope(provider))
        return found

    def provider_named(self, key: object) -> str:
        """How errors name the provider a tool's injected parameter asks for: its name in the container."""
        if isinstance(key, str):
            return key
        provider, _ = self.injection(key)
        return provider_name(self._container, self.parts.by_name, provider) or repr(provider)

    def check_session_overrides(self, overrides: Overrides, session_id: str) -> None:
        """A run of a session cannot override what the session's objects are built from (`ConfigurationError`)."""
        assert self._graph is not None
        check_session_overrides(self._graph, overrides, session_id)

    # -- loading -----------------------------------------------------------------

    def _load_entry(self, item: Entry, entry_tools: set[str]) -> tuple[ToolsetUse, ...]:
        owner = f"entry {item.name!r}"
        names = [self._name_of(owner, ref) for ref in item.toolsets]
        specs = [(name, self._spec_named(owner, name, entry_tools)) for name in names]
        check_unique_tools(item.name, ((name, known_tool_names(spec.provides) or ()) for name, spec in specs))
        for name, spec in specs:
            for tool, parameter, key in injected_keys(spec.provides) if spec.provides is not None else ():
                try:
                    self.injection(key)
                except ConfigurationError as error:
                    raise ConfigurationError(
                        f"{owner}: toolset {name!r}: tool {tool!r} takes {parameter!r} from the container: {error}"
                    ) from None
        return tuple(
            ToolsetUse(
                name, spec, f"toolset {name!r} ({spec.scope}) of {owner}", known_tool_names(spec.provides) is not None
            )
            for name, spec in specs
        )

    def _name_of(self, owner: str, ref: ToolsetRef) -> str:
        """The toolset name `ref` stands for: a name; a provider of the container (its own, or its class's) or one
        given as a runtime toolset; another entry."""
        if isinstance(ref, str):
            return ref
        if isinstance(ref, Entry) and self.entries.get(ref.name) is ref:
            return ref.name
        for name, spec in self._named.items():
            if ref is spec.provider or ref is spec.factory:
                return name
        found = provider_name(self._container, self.parts.by_name, ref)
        if found is not None:
            return found
        if isinstance(ref, Entry):
            raise ConfigurationError(
                f"{owner} names entry {ref.name!r} as a toolset, but the runtime loaded "
                f"{'another entry of that name' if ref.name in self.entries else 'no such entry'}; "
                "give the runtime that entry (Runtime(entries=[...]))"
            )
        where = (
            "the runtime has no container"
            if self._container is None
            else (f"it is not a provider of the container ({type(self._container).__qualname__})")
        )
        raise ConfigurationError(
            f"{owner} names toolset {ref!r}, but {where} nor a runtime toolset; declare it in the container's "
            "class (App.tools) and name that, or give it a name: Runtime(toolsets={'name': provider})"
        )

    def _agent_gates(self, uses: tuple[ToolsetUse, ...]) -> dict[str, str]:
        """The entries these uses reach as a tool under another toolset name (a worker's `approvals:` call the
        `deployer` entry's toolset `deployer@caller`), by entry name: a use whose tool calls an entry is known by
        the tool's name (the entry's) and its declared trait."""
        return {entry: use.name for use in uses for entry in entries_reached(use.name, use.spec.provides, self.entries)}

    def _spec_named(self, owner: str, name: str, entry_tools: set[str] | None = None) -> ToolsetSpec:
        """The spec of a toolset name, checked as far as it can be without building anything (an entry named as
        a toolset is noted in `entry_tools`)."""
        spec = self._named.get(name)
        if spec is not None:
            return spec
        provider = self.parts.by_name.get(name)
        if provider is not None:
            try:
                spec = ToolsetSpec.from_provider(provider, name)
            except TypeError as error:
                raise ConfigurationError(f"{owner}: toolset {name!r}: {error}") from None
        elif name in self.entries:
            if entry_tools is not None:
                entry_tools.add(name)
            toolset = entry_toolset(self.entries[name])
            spec = ToolsetSpec(lambda: toolset, Scope.GLOBAL, toolset)
        else:
            raise ConfigurationError(
                f"{owner} names toolset {name!r}, which is neither a provider of the container, "
                f"a runtime toolset, nor an entry (known: {listing(self._toolset_names())}); "
                f"declare a provider named {name!r} or fix the name"
            )
        spec = self._named[name] = _checked(owner, name, spec)
        return spec

    def _known(self) -> set[str]:
        return {*self._named, *self.parts.by_name, *self.entries}

    def _toolset_names(self) -> set[str]:
        """The known names an error lists as toolsets: not the container's other providers (`config`, a pool)."""
        return {*self._named, *toolset_names(self.parts.by_name), *self.entries}

    def _declared_policies(self, policies: PoliciesSource | None) -> list[Mapping[str, ToolPolicy]]:
        """The declared policies, weakest first: the toolset classes' defaults, the container's, `policies`."""
        declared: list[Mapping[str, ToolPolicy]] = [self._class_default_policies()]
        if self.parts.policies is not None:
            declared.append(self._by_name("the container's approval_policies", self.parts.policies))
        declared.append(self._by_name("Runtime(policies=...)", policies_built(policies, "Runtime(policies=...)")))
        return declared

    def _by_name(self, source: str, policies: Mapping[Any, Any]) -> dict[str, ToolPolicy]:
        """`policies` keyed by toolset name, whether they name their toolsets or refer to them (`App.tools`)."""
        named: dict[str, ToolPolicy] = {}
        for ref, policy in policies.items():
            name = self._name_of(source, ref)
            if name in named:
                raise ConfigurationError(f"{source} gives toolset {name!r} two policies (as {ref!r} too)")
            named[name] = policy
        return named

    def _with_gating(self, use: ToolsetUse) -> ToolsetUse:
        """The use, with whether its calls can need an approval when that is known at load."""
        provides = use.spec.provides
        approvals = self.approvals
        if approvals.may_gate(use.name):
            traits = known_tool_traits(provides) if approvals.safe_runs(use.name) else None
            if traits is None or any(
                approvals.verdict(use.name, tool, traits=declared).decision != "allow"
                for tool, declared in traits.items()
            ):
                return replace(use, may_ask=True)
            return replace(use, may_ask=False)  # every tool is declared safe (read-only, an agent)
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

    def provides(self, toolset: str) -> object | None:
        """What the spec of a toolset name declares it builds (a class or an object), None when unknown."""
        spec = self._named.get(toolset)
        if spec is None and (toolset in self.parts.by_name or toolset in self.entries):
            try:
                spec = self._spec_named("a tool's verdict", toolset)
            except ConfigurationError:
                return None
        return None if spec is None else spec.provides

    def asking_toolsets(self, entry: str) -> dict[str, list[str]]:
        """The toolset names whose calls can ask (`Approvals.can_ask`) in a run of `entry`, with the entries that use
        them: the entry's own, and those of the entries it calls as tools, and they call, ... (an entry reached only
        from Python or by `agent_call` is not counted)."""
        found: dict[str, list[str]] = {}
        seen, todo = set(), [entry]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            for use in self._plans[name].uses:
                traits = known_tool_traits(use.spec.provides)
                todo.extend(tool for tool, trait in (traits or {}).items() if trait.agent and tool in self.entries)
                if self.approvals.can_ask(use.name, traits):
                    found.setdefault(use.name, []).append(name)
        return found

    def plan_of(self, entry_name: str) -> EntryPlan:
        """What a call of the entry does with its toolsets, resolved at load."""
        return self._plans[entry_name]

    def made_entry(
        self, creator: Entry, name: str, instructions: str, toolsets: Sequence[str], description: str | None
    ) -> Entry:
        """The entry of an agent a call of `creator` makes (see `CallScope.make_agent`)."""
        return made_agent(creator, name, instructions, toolsets, description)

    # -- runs --------------------------------------------------------------------

    async def new_state(self) -> RunState:
        """The run's `RunState`: the container's `run_state` provider's, or a plain one."""
        if self.parts.run_state is None:
            return RunState()
        state = await built(self.parts.run_state())
        if not isinstance(state, RunState):
            raise ConfigurationError(
                f"the container's run_state provider built {type(state).__qualname__}, not llm_do.RunState"
            )
        return state


class GlobalScope:
    """What a runtime holds while it runs: the owner of its global objects, and the container's resources."""

    __slots__ = ("owner", "resources")

    def __init__(self, container: Container | None, cleanup_timeout: float, shutdown_resources: bool = True) -> None:
        self.owner = ScopeOwner(Scope.GLOBAL, cleanup_timeout, lock=asyncio.Lock(), late_cancel=False)
        """Owns the global objects runs adopt (a `Singleton`'s toolset, ...): released when the runtime closes."""
        self.resources = Resources(container, owned=shutdown_resources, timeout=cleanup_timeout)

    async def close(self, sink: Sink | None) -> None:
        """Release the global objects, then shut down the container's resources, whatever fails."""
        try:
            await self.owner.close(None, sink)  # at the runtime's close, which says what cancelled it
        finally:
            await self.resources.shutdown(sink)


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
