"""What a call runs and what it needs: the `Entry` protocol, the plan of a call's toolsets (`ToolsetUse`,
`EntryPlan`), and `CallHost`, what a call needs from the runtime that loaded its entry."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel
from pydantic_ai.messages import ModelMessage

from ..approvals._approvals import Approvals
from ..approvals._facts import NameRules
from ..di._config import RuntimeConfig
from ..di._specs import ToolsetRef, ToolsetSpec
from ..scopes._scope import Scope
from ..toolkit._toolset import known_tool_traits


@runtime_checkable
class Entry(Protocol):
    """Something a `Runtime` can run: an agent or an orchestrating function."""

    @property
    def name(self) -> str: ...
    @property
    def toolsets(self) -> tuple[ToolsetRef, ...]:
        """Its toolsets: names, providers of the runtime's container (`App.tools`), or other entries."""
        ...

    @property
    def schema_in(self) -> type[BaseModel] | None: ...
    @property
    def description(self) -> str | None: ...

    async def run_turn(self, scope: Any, input_data: Any) -> Any:
        """Handle one input inside `scope` (the call's `CallScope`) and return the output."""
        ...


@dataclass(frozen=True, slots=True)
class Produced:
    """What an entry's call produced beside its output, reported once when its model's run ends, well or not."""

    messages: list[ModelMessage] = field(default_factory=list)
    """The messages the call added: its record's usage, the run's log."""
    conversation: list[ModelMessage] = field(default_factory=list)
    """The whole conversation after the call, its `message_history` included: a top-level call's is the run's."""
    warnings: tuple[str, ...] = ()
    """What the call's record says of its model's replies (`CallRecord.warnings`)."""


NOTHING_PRODUCED = Produced()
"""What a call that ran no model (a function entry's) produced."""


@dataclass(frozen=True, slots=True)
class ToolsetUse:
    """One toolset name of an entry, resolved at load: its spec and the label teardown logs use."""

    name: str
    spec: ToolsetSpec
    label: str
    tools_known: bool = False
    """Whether its tool names were known at load (and so checked there against the entry's others)."""
    may_ask: bool | None = None
    """Whether a call to it can need an approval (its policy, or a tool declared `requires_approval`);
    None when only the built instance can tell."""
    rules: NameRules | None = None
    """The approval rules of its name, worked out once the runtime's policies are loaded (None only before)."""


@dataclass(frozen=True, slots=True)
class EntryPlan:
    """What a call of one entry does with its toolsets, worked out at load."""

    uses: tuple[ToolsetUse, ...]
    tools_checked: bool
    """Whether every toolset's tool names were known at load, so duplicates were checked there."""
    may_ask: bool | None
    """Whether a call can need an approval; None when only the built toolsets can tell."""
    agent_gates: Mapping[str, str] = field(default_factory=lambda: _NO_GATES)
    """The toolset name whose policy gates this call's calls of an entry, by the entry's name, when it is not the
    entry's own: the name of the toolset through which the call reaches the entry as a tool (`deployer@caller`, the
    name a worker's own `approvals:` give it), or for a made agent, its maker's. Every way of calling the entry
    (its tool, `call_agent`, `agent_call`) is gated under it."""

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the entry's toolsets, in order (a provider or an entry named by reference, by its name)."""
        return tuple(use.name for use in self.uses)

    @classmethod
    def of(cls, uses: tuple[ToolsetUse, ...], agent_gates: Mapping[str, str] | None = None) -> EntryPlan:
        asks = [use.may_ask for use in uses]
        may_ask = True if True in asks else None if None in asks else False
        gates = _NO_GATES if not agent_gates else MappingProxyType(dict(agent_gates))
        return cls(uses, all(use.tools_known for use in uses), may_ask, gates)

    def gates_with(self, built: Mapping[str, object], entries: Collection[str]) -> Mapping[str, str]:
        """`agent_gates`, with those of the toolsets whose tools are known only once `built` (by name)."""
        if self.tools_checked:
            return self.agent_gates
        late = {
            tool: use.name
            for use in self.uses
            if not use.tools_known and use.name in built
            for tool in entries_reached(use.name, built[use.name], entries)
        }
        return {**late, **self.agent_gates} if late else self.agent_gates


def entries_reached(name: str, toolset: object, entries: Collection[str]) -> Iterator[str]:
    """The `entries` a toolset (a class or an object) named `name` calls under another name than theirs: its tools
    declared to call an agent (`AGENT_CALL`), each named after the entry it calls."""
    for tool, declared in (known_tool_traits(toolset) or {}).items():
        if declared.agent and tool != name and tool in entries:
            yield tool


_NO_GATES: Mapping[str, str] = MappingProxyType({})


class CallHost(Protocol):
    """What a call scope needs from the runtime that loaded its entry."""

    @property
    def config(self) -> RuntimeConfig: ...
    @property
    def approvals(self) -> Approvals: ...
    @property
    def entry_tools(self) -> frozenset[str]: ...
    def entry(self, name: str) -> Entry: ...
    @property
    def entries(self) -> Mapping[str, Entry]: ...
    def plan_of(self, entry_name: str) -> EntryPlan: ...
    def injection(self, key: object) -> tuple[Any, Scope]: ...
    def provider_named(self, key: object) -> str: ...
    def made_entry(
        self, creator: Entry, name: str, instructions: str, toolsets: Sequence[str], description: str | None
    ) -> Entry: ...
