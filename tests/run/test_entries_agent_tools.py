"""An agent's own tools (`@agent.tool`, `tools=`, `toolsets=` given to `Agent`) run beside the call's
toolsets, where pydantic-ai runs them: llm-do's policies and approver gate only the call's toolsets."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from llm_do import AgentEntry, Approval, ApprovalRequest, Runtime, RuntimeConfig, ToolPolicy
from llm_do.testing import answering, response, tool_call

from ..counter import Counter


def shout(word: str) -> str:
    """Shout a word."""
    return word.upper()


def whisper(word: str) -> str:
    """Whisper a word."""
    return word.lower()


def agent_with_own_tools() -> Agent[Any, str]:
    """An agent with a tool of each kind of its own, whose model calls them and the call's `add`."""
    model = answering(
        lambda turn: (
            [
                tool_call("echo", word="Hi"),
                tool_call("shout", word="Hi"),
                tool_call("whisper", word="Hi"),
                tool_call("add", amount=2),
            ]
            if turn.step == 0
            else repr(turn.returns)
        )
    )
    agent = Agent(model, tools=[shout], toolsets=[FunctionToolset([Tool(whisper)])])

    @agent.tool
    def echo(ctx: RunContext[Any], word: str) -> str:
        """Echo a word."""
        return word

    return agent


async def test_an_agents_own_tools_run_beside_the_calls_toolsets() -> None:
    entry = AgentEntry(agent_with_own_tools(), name="job", toolsets=["counter"])
    async with Runtime(None, entries=[entry], toolsets={"counter": Counter}) as runtime:
        result = await runtime.run("job", "go")
    assert result.output == "['Hi', 'HI', 'hi', 2]"
    [record] = result.calls
    assert record.usage.tool_calls == 4


async def test_an_agents_own_tools_are_not_gated_by_the_runtimes_policies_or_approver() -> None:
    asked: list[tuple[str, str]] = []

    def approver(request: ApprovalRequest) -> Approval:
        asked.append((request.toolset, request.tool))
        return Approval.deny()

    entry = AgentEntry(agent_with_own_tools(), name="job", toolsets=["counter"])
    async with Runtime(
        None,
        entries=[entry],
        toolsets={"counter": Counter},
        policies={"counter": ToolPolicy(default="ask")},
        approver=approver,
    ) as runtime:
        result = await runtime.run("job", "go")
    assert asked == [("counter", "add")]
    assert result.output.startswith("['Hi', 'HI', 'hi', \"The call to 'add' was not run: the approver denied it")


async def test_an_agent_with_only_its_own_tools_runs_them() -> None:
    model = answering(
        lambda turn: (
            [tool_call("shout", word="a"), tool_call("whisper", word="B")] if turn.step == 0 else repr(turn.returns)
        )
    )
    agent = Agent(model, tools=[shout], toolsets=[FunctionToolset([Tool(whisper)])])
    config = RuntimeConfig(approval_mode="reject_all")
    async with Runtime(None, entries=[AgentEntry(agent, name="job")], config=config) as runtime:
        result = await runtime.run("job", "go")
    assert result.output == "['A', 'b']"


async def test_a_tool_registered_on_the_agent_after_its_entries_are_made_runs() -> None:
    model = answering(
        lambda turn: [tool_call("add", amount=1), tool_call("late")] if turn.step == 0 else repr(turn.returns)
    )
    agent: Agent[Any, str] = Agent(model)
    first = AgentEntry(agent, name="first", toolsets=["counter"])
    second = AgentEntry(agent, name="second", toolsets=["counter"])

    @agent.tool_plain
    def late() -> str:
        """A tool registered once the entries exist."""
        return "late"

    async with Runtime(None, entries=[first, second], toolsets={"counter": Counter}) as runtime:
        assert (await runtime.run("second", "go")).output == "[1, 'late']"


async def test_a_call_s_tools_are_listed_in_the_run_s_own_task_when_the_agent_has_none() -> None:
    """pydantic-ai lists the tools of several toolsets in a task each, on every model request: a call
    of an agent with no tool of its own hands it one toolset, listed in the run's own task."""
    listed: list[asyncio.Task[Any] | None] = []
    requested: list[asyncio.Task[Any] | None] = []

    class Listed(FunctionToolset[Any]):
        async def get_tools(self, ctx: RunContext[Any]) -> Any:
            listed.append(asyncio.current_task())
            return await super().get_tools(ctx)

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requested.append(asyncio.current_task())
        return response([tool_call("shout", word="a")]) if len(messages) == 1 else response("done")

    entry = AgentEntry(Agent(FunctionModel(model)), name="job", toolsets=["loud", "counter"])
    toolsets = {"loud": lambda: Listed([Tool(shout)]), "counter": Counter}
    allowing = {"loud": ToolPolicy()}  # declared: its calls need no approval (this test is about tasks)
    async with Runtime(None, entries=[entry], toolsets=toolsets, policies=allowing) as runtime:
        assert (await runtime.run("job", "go")).output == "done"
    assert len(listed) == 2 and len(requested) == 2
    assert listed == requested
