"""A process told to stop: `Runtime.stop_asking` denies the questions waiting for a person, and every later one,
with a reason the model reads, so that runs end instead of waiting for answers that cannot come."""

from __future__ import annotations

import asyncio

from pydantic_ai import Agent

from llm_do import (
    AgentEntry,
    ApprovalDecided,
    ApprovalRequest,
    ApprovalRequested,
    RunFinished,
    Runtime,
    RuntimeConfig,
    StreamEvent,
    ToolPolicy,
    Toolset,
    tool,
)
from llm_do.testing import ScriptedModel, tool_call

SENT: list[str] = []


class Mail(Toolset):
    @tool
    def send(self, text: str) -> str:
        """Send a message."""
        SENT.append(text)
        return "sent"


def mail_runtime(*steps: object, **options: object) -> Runtime:
    entry = AgentEntry(Agent(ScriptedModel(*steps)), name="mailer", toolsets=["mail"])
    policies = {"mail": ToolPolicy(tools={"send": "ask"})}
    return Runtime(None, entries=[entry], toolsets={"mail": Mail}, policies=policies, **options)  # type: ignore[arg-type]


async def test_a_question_waiting_in_a_live_run_is_denied_with_the_reason_and_the_run_ends() -> None:
    SENT.clear()
    script = (tool_call("send", text="hi"), lambda turn: f"model read: {turn.returned('send')}")
    async with mail_runtime(*script) as runtime, runtime.stream("mailer", "go", session="ada") as run:
        events: list[StreamEvent] = []
        async for event in run:
            events.append(event)
            if isinstance(event, ApprovalRequested):
                assert runtime.stop_asking("the service is restarting") == 1
    [decided] = [event for event in events if isinstance(event, ApprovalDecided)]
    assert decided.request.tool == "send" and not decided.approved
    assert isinstance(events[-1], RunFinished)
    assert "no one can answer it now: the service is restarting" in events[-1].result.output
    assert SENT == []


async def test_after_stop_asking_a_question_is_denied_without_asking_anyone() -> None:
    SENT.clear()
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> str:
        asked.append(request)
        await asyncio.sleep(3600)
        return "approve"

    script = (tool_call("send", text="hi"), lambda turn: str(turn.returned("send")))
    runtime = mail_runtime(*script, approver=approver, config=RuntimeConfig(approval_timeout=600))
    async with runtime:
        assert runtime.stop_asking() == 0
        result = await runtime.run("mailer", "go")
    assert asked == [] and SENT == []
    assert result.output.startswith("The call to 'send' was not run: no one can answer it now: the service is")
