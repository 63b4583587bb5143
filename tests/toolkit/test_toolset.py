"""`Toolset`: tools declared on the class, described once, bound to each instance."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RequestUsage

from llm_do import AgentEntry, Runtime, ToolPolicy, Toolset, tool
from llm_do.testing import ScriptedModel, Step, Turn, answering, response, tool_call


class Greeter(Toolset):
    default_policy = ToolPolicy()  # declared: its calls need no approval (this test is about something else)

    def __init__(self, greeting: str = "hello") -> None:
        self.greeting = greeting

    @tool
    def greet(self, name: str) -> str:
        """Greet someone.

        Args:
            name: who to greet.
        """
        return f"{self.greeting} {name}"

    @tool(name="shout", description="Greet loudly.")
    async def loud(self, ctx: RunContext[object], name: str) -> str:
        assert ctx.tool_name == "shout"
        return f"{self.greeting.upper()} {name.upper()}"

    def helper(self) -> str:
        return "not a tool"


class Polite(Greeter):
    def greet(self, name: str) -> str:  # overridden without @tool: no longer a tool
        return "no"


def test_tools_are_described_once_per_class() -> None:
    assert Greeter.tool_names() == {"greet", "shout"}
    assert Polite.tool_names() == {"shout"}
    first = Greeter._described()
    assert Greeter._described() is first, "schemas are derived once and cached on the class"
    greet = first["greet"].tool_def
    assert greet.description == "Greet someone."
    assert greet.parameters_json_schema["properties"]["name"]["description"] == "who to greet."
    assert first["shout"].tool_def.description == "Greet loudly."
    assert first["shout"].takes_ctx and not first["greet"].takes_ctx


async def test_instances_keep_their_own_state() -> None:
    script = answering(
        lambda turn: (
            [tool_call("greet", name="ada"), tool_call("shout", name="bob")]
            if turn.step == 0
            else " / ".join(turn.returns)
        )
    )
    entry = AgentEntry(Agent(script), name="greeter", toolsets=["greeter"])
    allowing = {"greeter": ToolPolicy()}  # a plain factory: its class's policy is not known at load
    async with Runtime(
        None, entries=[entry], toolsets={"greeter": lambda: Greeter("hi")}, policies=allowing
    ) as runtime:
        assert (await runtime.run("greeter", "x")).output == "hi ada / HI BOB"


def test_positional_only_parameters_are_refused_with_the_tool_name() -> None:
    class Bad(Toolset):
        @tool
        def odd(self, value: int, /) -> int:
            """Odd."""
            return value

    with pytest.raises(TypeError, match=r"tool .*Bad.odd: parameter 'value' must be passable by keyword"):
        Bad._described()


class Flags(Toolset):
    default_policy = ToolPolicy()  # declared: its calls need no approval (this test is about something else)

    @tool
    def flag(self, on: bool, level: int = 0) -> str:
        """Set a flag."""
        return f"on={on} level={level}"


async def test_arguments_that_are_not_valid_unicode_get_a_readable_retry() -> None:
    """A lone surrogate (JSON allows `\\ud800`) in a bad argument: the model reads the error, the run goes on."""
    bad = [{"on": "\ud800"}, {"on": True, "\ud800": 1}, {"on": True, "level": "\udcff"}]

    def script(turn: Turn) -> Step:
        if turn.step < len(bad):
            answer = ModelResponse(parts=[ToolCallPart("flag", bad[turn.step])])
        elif turn.step == len(bad):
            answer = response([tool_call("flag", on=True)])
        else:
            answer = response(repr(turn.returns))
        answer.usage = RequestUsage(input_tokens=1, output_tokens=1)  # no estimate from args JSON cannot hold
        return answer

    agent = AgentEntry(Agent(answering(script), retries=5), name="setter", toolsets=["flags"])
    async with Runtime(None, entries=[agent], toolsets={"flags": Flags}) as runtime:
        result = await runtime.run("setter", "go")
    assert result.output == "['on=True level=0']"
    retried = [part.content for message in result.messages for part in message.parts if hasattr(part, "outcome")]
    assert [item[0]["input"] for item in retried[:3]] == ["\\ud800", "\\ud800", "\\udcff"]
    assert [item[0]["loc"] for item in retried[:3]] == [["on"], [], ["level"]]


async def test_a_lent_toolset_keeps_the_id_chosen_for_it_in_the_tool_definitions() -> None:
    def note(text: str) -> str:
        """Take a note."""
        return text

    seen: list[Turn] = []
    model = ScriptedModel(lambda turn: seen.append(turn) or "done")
    entry = AgentEntry(Agent(model), name="writer", toolsets=["notes", "greeter"])
    toolsets = {"notes": lambda: FunctionToolset([note], id="notes"), "greeter": Greeter}
    async with Runtime(None, entries=[entry], toolsets=toolsets) as runtime:
        await runtime.run("writer", "go")
    assert {tool.name: tool.toolset_id for tool in seen[0].info.function_tools} == {
        "note": "notes",
        "greet": None,
        "shout": None,
    }
