"""Load-time and resolve-time errors name the entry and the toolset and say what to do."""

from __future__ import annotations

import pytest
from dependency_injector import providers
from pydantic_ai import Agent

from containers import AgentContainer
from llm_do import AgentEntry, CallScope, ConfigurationError, RunState, Runtime, Toolset, ToolsetError, entry, tool
from llm_do.testing import answering


class Search(Toolset):
    @tool(read_only=True)
    def find(self, query: str) -> str:
        """Find things."""
        return query


class Index(Toolset):
    @tool
    def find(self, query: str) -> str:
        """Also find things."""
        return query


class NotAToolset:
    def __init__(self) -> None:
        self.cleaned = False

    def cleanup(self) -> None:
        self.cleaned = True


class App(AgentContainer):
    search = providers.Factory(Search)
    index = providers.Factory(Index)
    plain = providers.Factory(NotAToolset)
    local = providers.ThreadLocalSingleton(Search)


def agent_entry(name: str, toolsets: list[str]) -> AgentEntry:
    return AgentEntry(Agent(answering(lambda turn: "ok")), name=name, toolsets=toolsets)


def test_unknown_toolset_names_the_entry_and_lists_known_names() -> None:
    with pytest.raises(ConfigurationError) as caught:
        Runtime(App(), entries=[agent_entry("clerk", ["search", "serach"])])
    message = str(caught.value)
    assert message.startswith("entry 'clerk' names toolset 'serach'")
    assert "search" in message and "declare a provider named 'serach'" in message


def test_duplicate_tool_names_across_toolsets_are_found_at_load() -> None:
    with pytest.raises(ConfigurationError, match="entry 'clerk': tool 'find' is defined by both toolset 'search'"):
        Runtime(App(), entries=[agent_entry("clerk", ["search", "index"])])


def test_an_entry_tool_clashing_with_a_toolset_tool_is_found_at_load() -> None:
    with pytest.raises(ConfigurationError, match="tool 'find' is defined by both toolset 'search' and toolset 'find'"):
        Runtime(App(), entries=[agent_entry("find", []), agent_entry("clerk", ["search", "find"])])


def test_duplicate_entry_names_and_non_entries_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="two entries are named 'clerk'"):
        Runtime(App(), entries=[agent_entry("clerk", []), agent_entry("clerk", [])])
    with pytest.raises(ConfigurationError, match="is not an entry"):
        Runtime(App(), entries=[object()])  # type: ignore[list-item]


def test_a_provider_kind_without_a_scope_is_refused_at_load() -> None:
    with pytest.raises(ConfigurationError, match="entry 'clerk': toolset 'local': ThreadLocalSingleton has no llm-do"):
        Runtime(App(), entries=[agent_entry("clerk", ["local"])])


def test_a_provider_declared_to_build_a_non_toolset_is_refused_at_load() -> None:
    with pytest.raises(ConfigurationError) as caught:
        Runtime(App(), entries=[agent_entry("clerk", ["plain"])])
    assert str(caught.value).startswith(
        "entry 'clerk': toolset 'plain' is declared to build NotAToolset, which is not a pydantic-ai toolset"
    )
    with pytest.raises(ConfigurationError, match="toolset 'state' is declared to build RunState"):
        Runtime(App(), entries=[agent_entry("clerk", ["state"])], toolsets={"state": RunState})


async def test_a_factory_function_returning_a_non_toolset_is_reported_and_still_cleaned_up() -> None:
    made: list[NotAToolset] = []

    def build() -> NotAToolset:
        made.append(NotAToolset())
        return made[-1]

    async with Runtime(None, entries=[agent_entry("clerk", ["plain"])], toolsets={"plain": build}) as runtime:
        with pytest.raises(ToolsetError) as caught:
            await runtime.run("clerk", "hi")
    assert str(caught.value).startswith("entry 'clerk': toolset 'plain' was built as NotAToolset")
    assert made[0].cleaned


async def test_an_unknown_entry_is_refused_and_a_call_may_run_any_entry_of_its_runtime() -> None:
    @entry(toolsets=["search"])
    async def caller(scope: CallScope, input_data: str) -> str:
        return str(await scope.call_agent(input_data, "hi"))

    other = agent_entry("other", [])
    async with Runtime(App(), entries=[caller, other]) as runtime:
        with pytest.raises(ConfigurationError, match="no entry named 'nope'; loaded entries: caller, other"):
            await runtime.run("nope", "x")
        result = await runtime.run("caller", "other")  # not among its toolsets: any entry of the runtime
        assert [call.entry for call in result.calls] == ["caller", "other"]
        with pytest.raises(
            ToolsetError,
            match=r"'caller' cannot call 'nope': it is neither an entry \(caller, other\) nor an agent made in",
        ):
            await runtime.run("caller", "nope")


async def test_a_closed_runtime_refuses_to_run() -> None:
    runtime = Runtime(App(), entries=[agent_entry("clerk", [])])
    await runtime.aclose()
    await runtime.aclose()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        await runtime.run("clerk", "x")


async def test_duplicate_tools_of_factory_functions_are_found_when_the_call_starts() -> None:
    with pytest.raises(ConfigurationError, match="tool 'find' is defined by both toolset 'one' and toolset 'two'"):
        Runtime(None, entries=[agent_entry("clerk", ["one", "two"])], toolsets={"one": Search, "two": Index})
    runtime = Runtime(
        None, entries=[agent_entry("clerk", ["one", "two"])], toolsets={"one": lambda: Search(), "two": lambda: Index()}
    )
    async with runtime:
        with pytest.raises(ConfigurationError, match="entry 'clerk': tool 'find' is defined by both toolset 'one' and"):
            await runtime.run("clerk", "x")
