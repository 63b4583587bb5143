"""A refused call made again, in code: what counts as the same call, and what lets it run again (another call that
ran since a failure, a new prompt, a call nothing weighs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart

from llm_do import (
    AgentEntry,
    ApprovalRequest,
    ModelLimits,
    RepeatedCall,
    Runtime,
    RuntimeConfig,
    ToolPolicy,
    Toolset,
    tool,
)
from llm_do.testing import ScriptedModel, tool_call


class Files(Toolset):
    """A file that exists once `create` made it; `remove` asks for approval."""

    def __init__(self, ran: list[str]) -> None:
        self.ran = ran

    @tool(read_only=True)
    def open_file(self, path: str) -> str:
        """Open a file."""
        self.ran.append(f"open {path}")
        if f"create {path}" not in self.ran:
            raise ToolFailed(f"{path} does not exist")
        return f"opened {path}"

    @tool(read_only=True)
    def create(self, path: str) -> str:
        """Create a file."""
        self.ran.append(f"create {path}")
        return f"created {path}"

    @tool
    def remove(self, path: str) -> str:
        """Remove a file."""
        self.ran.append(f"remove {path}")
        return f"removed {path}"


def told(messages: Sequence[ModelMessage]) -> list[str]:
    """What the tools returned to the model, in order."""
    return [
        part.model_response_str(wrap_if_error=False)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def runtime(model: ScriptedModel, ran: list[str], **options: Any) -> Runtime:
    job = AgentEntry(Agent(model), name="job", toolsets=["files"])
    policies = {"files": ToolPolicy(tools={"remove": "ask"})}
    return Runtime(None, entries=[job], toolsets={"files": lambda: Files(ran)}, policies=policies, **options)


async def test_a_failed_call_runs_again_once_another_call_has_run() -> None:
    ran: list[str] = []
    model = ScriptedModel(
        tool_call("open_file", path="a.txt"),
        tool_call("create", path="a.txt"),
        tool_call("open_file", path="a.txt"),
        "Done.",
    )
    async with runtime(model, ran) as loaded:
        result = await loaded.run("job", "Open a.txt.")
    assert ran == ["open a.txt", "create a.txt", "open a.txt"]
    assert told(result.messages)[-1] == "opened a.txt"


async def test_a_denied_call_is_not_asked_again_and_parallel_calls_count_each() -> None:
    ran: list[str] = []
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> str:
        asked.append(request)
        return "deny"

    remove = tool_call("remove", path="a.txt")
    model = ScriptedModel(remove, [remove, remove], remove)
    async with runtime(model, ran, approver=approver) as loaded:
        with pytest.raises(RepeatedCall) as raised:
            await loaded.run("job", "Remove a.txt.")
    assert ran == [] and len(asked) == 1
    assert raised.value.call == "remove(path='a.txt')" and raised.value.entry == "job"
    assert "made the call remove(path='a.txt') again 3 times after it was denied" in str(raised.value)


async def test_a_call_denied_before_the_user_asked_again_is_asked_again() -> None:
    ran: list[str] = []
    answers = ["deny", "approve"]
    model = ScriptedModel(tool_call("remove", path="a.txt"), "Not removed.", tool_call("remove", path="a.txt"), "Ok.")
    async with runtime(model, ran, approver=lambda request: answers.pop(0)) as loaded:
        first = await loaded.run("job", "Remove a.txt.")
        second = await loaded.run("job", "I changed my mind: remove it.", message_history=first.messages)
    assert ran == ["remove a.txt"] and answers == []
    assert told(second.messages)[-1] == "removed a.txt"


async def test_a_call_nothing_weighs_runs_again_and_the_limit_is_set_in_code() -> None:
    ran: list[str] = []
    create = tool_call("create", path="a.txt")
    model = ScriptedModel(create, create, create, "Done.")
    job = AgentEntry(Agent(model), name="job", toolsets=["files"])
    async with Runtime(None, entries=[job], toolsets={"files": lambda: Files(ran)}) as loaded:
        await loaded.run("job", "Create a.txt.")
    assert ran == ["create a.txt"] * 3  # no policy is declared: the approvals weigh none of its read-only calls

    ran.clear()
    model = ScriptedModel(tool_call("open_file", path="b.txt"), tool_call("open_file", path="b.txt"))
    config = RuntimeConfig(limits=ModelLimits(repeated_calls=0))  # 0: no bound
    async with runtime(model, ran, config=config) as loaded:
        with pytest.raises(Exception, match="ran out of steps"):
            await loaded.run("job", "Open b.txt.")
    assert ran == ["open b.txt", "open b.txt"]


async def test_a_weighed_call_made_again_right_after_it_ran_runs_until_the_limit_ends_the_run() -> None:
    ran: list[str] = []
    remove, create = tool_call("remove", path="a.txt"), tool_call("create", path="b.txt")
    model = ScriptedModel(remove, create, remove, remove, remove, remove)
    async with runtime(model, ran, approver=lambda request: "approve") as loaded:
        with pytest.raises(RepeatedCall) as raised:
            await loaded.run("job", "Remove a.txt.")
    assert ran == ["remove a.txt", "create b.txt"] + ["remove a.txt"] * 3  # the first repeat follows another call
    assert "again 3 times right after it ran, with nothing else run since (removed a.txt); the last was not run" in (
        str(raised.value)
    )
