"""`llm_do.testing.read_vercel_stream` on a live run's stream as `llm_do.web.vercel_sse` writes it, without a router:
the text, every tool call with its outcome (a child call's tagged with its call), the questions with their
descriptions, each answered as it comes, and a failed run's error."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
from pydantic_ai import Agent

from llm_do import AgentEntry, LiveRun, Runtime, ToolPolicy, Toolset, tool
from llm_do.testing import Question, ScriptedModel, read_vercel_stream, tool_call
from llm_do.web import vercel_sse


class Vault(Toolset):
    @tool
    def open_vault(self, door: str) -> str:
        """Open a door of the vault."""
        if door == "jammed":
            raise RuntimeError("the door is jammed")
        return f"{door} is open"


def runtime(*porter_steps: object) -> Runtime:
    porter = AgentEntry(Agent(ScriptedModel(*porter_steps)), name="porter", toolsets=["vault"])
    boss = AgentEntry(
        Agent(ScriptedModel(tool_call("porter", input="open up"), lambda turn: f"porter says: {turn.returns[0]}")),
        name="boss",
        toolsets=["porter"],
    )
    return Runtime(
        None,
        entries=[boss, porter],
        toolsets={"vault": Vault},
        policies={"vault": ToolPolicy(tools={"open_vault": "ask"})},
    )


def response_of(run: LiveRun) -> httpx.Response:
    async def body() -> AsyncIterator[bytes]:
        async for line in vercel_sse(run):
            yield line.encode()

    return httpx.Response(200, content=body())


async def test_a_stream_read_with_its_questions_answered_as_they_come() -> None:
    asked: list[Question] = []
    async with runtime(tool_call("open_vault", door="north"), "north done") as rt, rt.stream("boss", "go") as run:

        async def answer(question: Question) -> bool:
            asked.append(question)
            run.decide(question.approval_id, "approve")
            return True

        reply = await read_vercel_stream(response_of(run), on_question=answer)
    assert reply.text == "porter says: north done" and reply.finished and reply.error is None
    assert reply.message_id == run.message_id
    [question] = asked
    assert (question.tool, dict(question.args), question.entry, question.toolset) == (
        "open_vault",
        {"door": "north"},
        "porter",
        "vault",
    )
    assert "open_vault" in (question.description or "") and reply.questions == [question]
    assert reply.decided == {question.approval_id: "approved"} and reply.open == []
    porter, opened = reply.tool_calls
    assert (porter.tool, porter.state, porter.call) == ("porter", "done", None)  # the top-level model's call
    assert (opened.tool, opened.state, opened.output) == ("open_vault", "done", "north is open")
    assert opened.call is not None and opened.call["entry"] == "porter"  # a child call's, tagged with its call
    assert [part["type"] for part in reply.data][:1] == ["data-llm-do-call"]


async def test_a_question_left_unanswered_stops_the_reading_there() -> None:
    async with runtime(tool_call("open_vault", door="east"), "east done") as rt:
        async with rt.stream("boss", "go", session="s1", resumable=True) as run:
            first = await read_vercel_stream(response_of(run), on_question=_leave)
        assert [question.tool for question in first.open] == ["open_vault"] and not first.finished
        assert first.tool_call("porter").state == "called"  # still running: its child waits
        run.decide(first.open[0].approval_id, "deny", "not east")
        replayed = await read_vercel_stream(response_of(run))  # a resumable run, read again from its start
    assert replayed.decided == {first.open[0].approval_id: "denied"} and replayed.finished
    assert replayed.tool_call("open_vault").state == "denied" and replayed.text == "porter says: east done"


async def test_a_failed_runs_stream_ends_with_its_error() -> None:
    async with runtime(tool_call("open_vault", door="jammed"), "never") as rt, rt.stream("boss", "go") as run:

        async def approve(question: Question) -> bool:
            run.decide(question.approval_id, "approve")
            return True

        reply = await read_vercel_stream(response_of(run), on_question=approve)
    assert reply.error == "the run failed (RuntimeError); the server's log has the details"  # its message is not sent


async def _leave(question: Question) -> bool:
    return False
