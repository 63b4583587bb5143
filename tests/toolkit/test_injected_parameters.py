"""Tool parameters the container fills per call, as dependency-injector's `Provide` declares them, never shown to
the model."""

from __future__ import annotations

import asyncio
import itertools
from typing import Annotated, Any

import pytest
from dependency_injector import providers
from dependency_injector.wiring import Provide
from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from containers import AgentContainer
from llm_do import AgentEntry, ConfigurationError, RunLocalSingleton, Runtime, Toolset, ToolsetError, injected, tool
from llm_do.testing import Turn, answering, tool_call

serial = itertools.count(1)


class Repo:
    """A global: one for the process."""

    def __init__(self) -> None:
        self.name = "repo"


class Ledger:
    """Per run."""

    def __init__(self) -> None:
        self.entries: list[str] = []


class Unit:
    """Per call: made for the call that asks, torn down with it."""

    def __init__(self) -> None:
        self.serial = next(serial)
        self.closed = False

    def cleanup(self) -> None:
        self.closed = True


units: list[Unit] = []


class Books(Toolset):
    @tool(read_only=True)
    def look(
        self,
        title: str,
        repo: Repo = Provide["repo"],
        ledger: Ledger = Provide["ledger"],
        unit: Unit = Provide["unit"],
    ) -> str:
        """Look a title up."""
        ledger.entries.append(title)
        units.append(unit)
        return f"{title} in {repo.name}, unit {unit.serial}, ledger {len(ledger.entries)}"

    @tool(read_only=True)
    async def again(self, ctx: RunContext[Any], unit: Annotated[Unit, Provide["unit"]]) -> str:
        """Look again, in the same unit of work."""
        units.append(unit)
        return f"again in unit {unit.serial}"


class App(AgentContainer):
    repo = providers.Singleton(Repo)
    ledger = RunLocalSingleton(Ledger)
    unit = providers.Factory(Unit)
    books = providers.Factory(Books)


def reader(*steps: Any, toolsets: tuple[Any, ...] = ("books",)) -> AgentEntry:
    def answer(turn: Turn) -> Any:
        if turn.step < len(steps):
            return steps[turn.step]
        return " | ".join(map(str, turn.returns))

    return AgentEntry(Agent(answering(answer)), name="reader", toolsets=list(toolsets))


async def test_a_tool_is_given_the_global_the_runs_and_the_calls_object() -> None:
    units.clear()
    steps = ([tool_call("look", title="a"), tool_call("look", title="b")], tool_call("again"))
    async with Runtime(App(), entries=[reader(*steps)]) as runtime:
        first = await runtime.run("reader", "go")
        second = await runtime.run("reader", "go")
    assert len(units) == 6
    assert {unit.serial for unit in units[:3]} == {units[0].serial}  # one per call, whichever tool asks
    assert units[3].serial != units[0].serial  # the next run's call has its own
    assert all(unit.closed for unit in units)  # torn down with its call
    assert sorted(first.per_run["ledger"].entries) == ["a", "b"]  # the run's one ledger, for both calls
    assert sorted(second.per_run["ledger"].entries) == ["a", "b"]  # a new run, a new ledger
    assert first.per_run["ledger"] is not second.per_run["ledger"]


async def test_the_model_never_sees_an_injected_parameter() -> None:
    seen: dict[str, Any] = {}

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.update({tool.name: tool.parameters_json_schema for tool in info.function_tools})
        return ModelResponse(parts=[TextPart("ok")])

    agent = AgentEntry(Agent(FunctionModel(respond)), name="reader", toolsets=["books"])
    async with Runtime(App(), entries=[agent]) as runtime:
        await runtime.run("reader", "go")
    assert set(seen["look"]["properties"]) == {"title"}
    assert seen["again"]["properties"] == {}


@injected
def find(title: str, repo: Annotated[Repo, Provide[App.repo]], unit: Unit = Provide[App.unit]) -> str:
    """Find a title (a plain function tool)."""
    units.append(unit)
    return f"found {title} in {repo.name}"


async def test_a_plain_function_tool_is_given_its_objects_in_a_function_toolset() -> None:
    units.clear()
    entry = reader(tool_call("find", title="c"), toolsets=("found",))
    found = FunctionToolset([Tool(find, metadata={"read_only": True})])
    async with Runtime(App(), entries=[entry], toolsets={"found": lambda: found}) as runtime:
        result = await runtime.run("reader", "go")
    assert result.output == "found c in repo"
    assert units[-1].closed


async def test_a_runs_override_reaches_an_injected_parameter() -> None:
    class Other(Repo):
        def __init__(self) -> None:
            self.name = "other"

    entry = reader(tool_call("look", title="a"))
    async with Runtime(App(), entries=[entry]) as runtime:
        swapped, plain = await asyncio.gather(
            runtime.run("reader", "go", overrides={App.repo: Other()}), runtime.run("reader", "go")
        )
    assert "in other" in swapped.output and "in repo" in plain.output


async def test_the_calls_own_toolset_is_what_a_parameter_asking_for_its_provider_gets() -> None:
    class Peek(Toolset):
        @tool(read_only=True)
        def same(self, books: Books = Provide["books"]) -> str:
            """Whether the call's books are the ones asked for."""
            return "same" if books is call_books[0] else "other"

    call_books: list[Books] = []

    class Tracked(Books):
        def __init__(self) -> None:
            call_books.append(self)

    class Peeking(App):
        books = providers.Factory(Tracked)
        peek = providers.Factory(Peek)

    async with Runtime(Peeking(), entries=[reader(tool_call("same"), toolsets=("books", "peek"))]) as runtime:
        assert (await runtime.run("reader", "go")).output == "same"


def test_a_parameter_the_container_cannot_fill_is_refused_at_load() -> None:
    class Broken(Toolset):
        @tool(read_only=True)
        def look(self, repo: Repo = Provide["missing"]) -> str:
            """Look."""
            return repo.name

    class BrokenApp(App):
        broken = providers.Factory(Broken)

    with pytest.raises(ConfigurationError) as caught:
        Runtime(BrokenApp(), entries=[reader(toolsets=("broken",))])
    assert str(caught.value).startswith(
        "entry 'reader': toolset 'broken': tool 'look' takes 'repo' from the container: "
        "a tool's injected parameter: 'missing' is not a provider of the runtime's container"
    )


async def test_outside_an_llm_do_call_the_tool_says_what_it_needs() -> None:
    agent = Agent(answering(lambda turn: tool_call("find", title="x") if turn.step == 0 else "done"), tools=[find])
    with pytest.raises(ToolsetError, match="takes 'repo', 'unit' from the container, which only an llm-do call"):
        await agent.run("go")
