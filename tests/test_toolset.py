"""`Toolset`: tools declared on the class, described once, bound to each instance."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent, RunContext

from llm_do import AgentEntry, Runtime, Toolset, tool

from .helpers import by_prompt, calls, returns, text


class Greeter(Toolset):
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
    script = by_prompt(
        lambda p, step, m: (
            calls(("greet", {"name": "ada"}), ("shout", {"name": "bob"})) if step == 0 else text(" / ".join(returns(m)))
        )
    )
    entry = AgentEntry(Agent(script), name="greeter", toolsets=["greeter"])
    async with Runtime(None, entries=[entry], toolsets={"greeter": lambda: Greeter("hi")}) as runtime:
        assert (await runtime.run("greeter", "x")).output == "hi ada / HI BOB"


def test_positional_only_parameters_are_refused_with_the_tool_name() -> None:
    class Bad(Toolset):
        @tool
        def odd(self, value: int, /) -> int:
            """Odd."""
            return value

    with pytest.raises(TypeError, match=r"tool .*Bad.odd: parameter 'value' must be passable by keyword"):
        Bad._described()
