"""What a call runs and what it needs: the `Entry` protocol, the plan of a call's toolsets (`ToolsetUse`,
`EntryPlan`), and `CallHost`, what a call needs from the runtime that loaded its entry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from ..approvals import Approvals
from ..di import RuntimeConfig, ToolsetRef, ToolsetSpec
from ..scopes import Scope

__all__ = ["CallHost", "Entry", "EntryPlan", "ToolsetUse"]


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


@dataclass(frozen=True, slots=True)
class EntryPlan:
    """What a call of one entry does with its toolsets, worked out at load."""

    uses: tuple[ToolsetUse, ...]
    tools_checked: bool
    """Whether every toolset's tool names were known at load, so duplicates were checked there."""
    may_ask: bool | None
    """Whether a call can need an approval; None when only the built toolsets can tell."""

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the entry's toolsets, in order (a provider or an entry named by reference, by its name)."""
        return tuple(use.name for use in self.uses)

    @classmethod
    def of(cls, uses: tuple[ToolsetUse, ...]) -> EntryPlan:
        asks = [use.may_ask for use in uses]
        may_ask = True if True in asks else None if None in asks else False
        return cls(uses, all(use.tools_known for use in uses), may_ask)


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
