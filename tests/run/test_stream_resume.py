"""Runs that outlive their connection: a resumable live run goes on when its consumer leaves, and every consumer
(the first, or one that comes later through `Runtime.live_run`) reads it from the start, then follows it."""

from __future__ import annotations

import asyncio

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import PartDeltaEvent, TextPart

from llm_do import (
    AgentEntry,
    ApprovalDecided,
    ApprovalRequested,
    CallEvent,
    CallStarted,
    ResponseCompleted,
    RunFinished,
    Runtime,
    RuntimeConfig,
    SessionBusy,
    StreamEvent,
    ToolPolicy,
    Toolset,
    tool,
)
from llm_do.testing import ScriptedModel, tool_call

WRITTEN: list[str] = []


class Notes(Toolset):
    @tool
    def write(self, text: str) -> str:
        """Write a note."""
        WRITTEN.append(text)
        return f"wrote {text}"


@pytest.fixture(autouse=True)
def _forget() -> None:
    WRITTEN.clear()


def runtime(*steps: object, resume_buffer: int = 10_000) -> Runtime:
    clerk = AgentEntry(Agent(ScriptedModel(*steps)), name="clerk", toolsets=["notes"])
    return Runtime(
        None,
        entries=[clerk],
        toolsets={"notes": Notes},
        policies={"notes": ToolPolicy(default="ask")},
        config=RuntimeConfig(resume_buffer=resume_buffer, approval_timeout=30),
    )


def kinds(events: list[StreamEvent]) -> list[str]:
    return [type(event).__name__ for event in events if not isinstance(event, CallEvent)]


async def test_a_resumable_run_goes_on_when_its_consumer_leaves_and_a_later_one_reads_it_all() -> None:
    async with runtime(tool_call("write", text="milk"), "noted milk") as rt:
        async with rt.stream("clerk", "note milk", session="ada", resumable=True) as run:
            first: list[StreamEvent] = []
            async for event in run:
                first.append(event)
                if isinstance(event, ApprovalRequested):
                    break  # the page is reloaded while the question is open
        assert not run.ended and WRITTEN == []
        found = rt.live_run("ada")
        assert found is run and rt.live_run("bob") is None
        assert [request.tool for request in found.pending] == ["write"]
        later: list[StreamEvent] = []
        async for event in found:
            later.append(event)
            if isinstance(event, ApprovalRequested):
                found.decide(event.request.approval_id, "approve")
        assert later[: len(first)] == first  # what the first consumer saw, again, then the rest
        assert isinstance(later[-1], RunFinished)
        assert [type(event) for event in later if isinstance(event, ApprovalDecided | RunFinished)] == [
            ApprovalDecided,
            RunFinished,
        ]
        assert (await found.result()).output == "noted milk"
        assert WRITTEN == ["milk"]
        assert rt.live_run("ada") is None  # ended: nothing to attach to
        session = await rt.session("ada")
        assert len(session.history) == 4  # the run's conversation is the session's, as for any run


async def test_two_consumers_at_once_each_read_every_event_in_order() -> None:
    async with runtime("hello") as rt, rt.stream("clerk", "hi", session="ada", resumable=True) as run:
        one, two = await asyncio.gather(_read(run), _read(run))
    assert one == two and isinstance(one[0], CallStarted) and isinstance(one[-1], RunFinished)


async def _read(run: object) -> list[StreamEvent]:
    return [event async for event in run]  # type: ignore[attr-defined]


async def test_a_session_runs_one_resumable_run_at_a_time() -> None:
    async with runtime(tool_call("write", text="a"), "done", tool_call("write", text="b"), "done") as rt:
        async with rt.stream("clerk", "a", session="ada", resumable=True) as run:
            async for event in run:
                if isinstance(event, ApprovalRequested):
                    break
        with pytest.raises(SessionBusy):
            async with rt.stream("clerk", "b", session="ada", resumable=True) as second:
                await second.result()
        live = rt.live_run("ada")
        assert live is run
        [question] = live.pending
        live.decide(question.approval_id, "deny")
        await live.result()


async def test_a_late_consumer_gets_completed_responses_whole_once_the_log_is_full() -> None:
    long_reply = " ".join(f"word{n}" for n in range(40))
    async with runtime(long_reply, resume_buffer=5) as rt:
        async with rt.stream("clerk", "talk", session="ada", resumable=True) as run:
            pass  # the consumer leaves at once
        await run.result()
        late = [event async for event in run]
    deltas = [event for event in late if isinstance(event, CallEvent) and isinstance(event.event, PartDeltaEvent)]
    assert deltas == []  # the response completed: its deltas were dropped, its whole text is kept
    [completed] = [event for event in late if isinstance(event, ResponseCompleted)]
    assert [part.content for part in completed.response.parts if isinstance(part, TextPart)] == [long_reply]
    assert kinds(late)[0] == "CallStarted" and kinds(late)[-1] == "RunFinished"


async def test_closing_the_runtime_waits_for_a_run_nobody_reads() -> None:
    rt = runtime(tool_call("write", text="milk"), "noted")
    async with rt:
        async with rt.stream("clerk", "note", session="ada", resumable=True) as run:
            async for event in run:
                if isinstance(event, ApprovalRequested):
                    break
        live = rt.live_run("ada")
        assert live is not None
        asyncio.get_running_loop().call_later(0.05, live.decide, live.pending[0].approval_id, "approve")
    assert run.ended and WRITTEN == ["milk"]
    assert (await run.result()).output == "noted"


async def test_a_live_run_lists_every_question_it_asked_answered_or_not() -> None:
    steps = (tool_call("write", text="milk"), tool_call("write", text="eggs"), "noted both")
    async with runtime(*steps) as rt:
        async with rt.stream("clerk", "note milk and eggs", session="ada", resumable=True) as run:
            async for event in run:
                if isinstance(event, ApprovalRequested):
                    assert [request.approval_id for request in run.asked][-1] == event.request.approval_id
                    run.decide(event.request.approval_id, "approve")
        assert [request.args["text"] for request in run.asked] == ["milk", "eggs"]  # answered, still listed
        assert run.pending == ()
