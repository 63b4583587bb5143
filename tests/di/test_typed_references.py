"""Entries and policies name their toolsets by reference, as dependency-injector applications name providers."""

from __future__ import annotations

from typing import Any

import pytest
from dependency_injector import providers
from pydantic_ai import Agent

from containers import AgentContainer
from llm_do import AgentEntry, ConfigurationError, Runtime, ToolPolicy, Toolset, entry, tool
from llm_do.testing import Turn, answering, tool_call


class Lookup(Toolset):
    @tool
    def which(self) -> str:
        """Say hello."""
        return "looked up"


class App(AgentContainer):
    lookup = providers.Factory(Lookup)
    approval_policies = providers.Dict({lookup: ToolPolicy(tools={"which": "deny"})})
    open_policies = providers.Dict({lookup: ToolPolicy()})


def caller(toolsets: list[Any], name: str = "caller") -> AgentEntry:
    def answer(turn: Turn) -> Any:
        return tool_call("which") if turn.step == 0 else str(turn.returns[0])

    return AgentEntry(Agent(answering(answer)), name=name, toolsets=toolsets)


@pytest.mark.parametrize("make_ref", [lambda app: App.lookup, lambda app: app.lookup, lambda app: "lookup"])
async def test_a_toolset_is_named_by_its_provider_its_classs_or_its_name(make_ref: Any) -> None:
    app = App()
    async with Runtime(app, entries=[caller([make_ref(app)])], policies={"lookup": ToolPolicy()}) as runtime:
        assert runtime.toolsets_of("caller") == ("lookup",)
        result = await runtime.run("caller", "go")
    assert result.output == "looked up"
    assert result.calls[0].toolsets == ("lookup",)


async def test_policies_refer_to_toolsets_the_containers_and_the_runtimes() -> None:
    async with Runtime(App(), entries=[caller([App.lookup])]) as runtime:  # the container's: which is denied
        denied = await runtime.run("caller", "go")
    assert "was not run" in denied.output
    async with Runtime(App(), entries=[caller([App.lookup])], policies={App.lookup: ToolPolicy()}) as runtime:
        assert (await runtime.run("caller", "go")).output == "looked up"
    async with Runtime(App(), entries=[caller([App.lookup])], policies=App.open_policies) as runtime:
        assert (await runtime.run("caller", "go")).output == "looked up"


async def test_an_entry_and_a_runtime_toolset_are_named_by_reference() -> None:
    @entry
    async def helper(scope: Any, text: str) -> str:
        return f"helped with {text}"

    scratch = providers.Factory(Lookup)
    boss = AgentEntry(
        Agent(answering(lambda turn: tool_call("helper", input="x") if turn.step == 0 else str(turn.returns[0]))),
        name="boss",
        toolsets=[helper, scratch],
    )
    async with Runtime(None, entries=[boss, helper], toolsets={"scratch": scratch}) as runtime:
        assert runtime.toolsets_of("boss") == ("helper", "scratch")
        assert (await runtime.run("boss", "go")).output == "helped with x"


def test_a_wrong_reference_is_refused_at_load_naming_the_entry() -> None:
    stray = providers.Factory(Lookup)
    with pytest.raises(ConfigurationError, match=r"entry 'caller' names toolset .*not a provider of the container"):
        Runtime(App(), entries=[caller([stray])])
    with pytest.raises(ConfigurationError, match=r"Runtime\(policies=...\) names toolset .*not a provider"):
        Runtime(App(), entries=[caller([App.lookup])], policies={stray: ToolPolicy()})
    with pytest.raises(ConfigurationError, match="entry 'caller' names entry 'helper' as a toolset"):
        Runtime(App(), entries=[caller([caller([], name="helper")])])
