"""From an answer to the call: an approved call runs in the turns of the event loop right after its answer
(counted, never timed), a stream's own approver and `LiveRun.decide` race for a question, and an
approver's deadline denies the call whatever the approver does once its time is up."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import ApprovalRequired

from llm_do import (
    AgentEntry,
    Approval,
    ApprovalDecided,
    ApprovalDenied,
    ApprovalRequest,
    ApprovalRequested,
    CallScope,
    RunFailed,
    Runtime,
    RuntimeConfig,
    ToolPolicy,
    Toolset,
    entry,
    tool,
)
from llm_do.testing import ScriptedModel, tool_call

from .test_approvals import denied_parts

ASK = ToolPolicy(default="ask")


class Turns:
    """Counts the turns of the event loop from `start` on: a callback that schedules itself again each turn."""

    def __init__(self) -> None:
        self.count = 0
        self.seen: list[int] = []
        self._running = False

    def start(self) -> None:
        self._running = True
        asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        if self._running:
            self.count += 1
            asyncio.get_running_loop().call_soon(self._tick)

    def mark(self) -> None:
        """The turns that ended before this one: 0 in the turn right after `start`."""
        self.seen.append(self.count)
        self._running = False


class Acts(Toolset):
    def __init__(self, turns: Turns) -> None:
        self.turns = turns

    @tool
    async def act(self, key: str) -> str:
        """Act on a key."""
        self.turns.mark()
        return f"acted on {key}"


class AsksWhileRunning(Acts):
    @tool
    async def act(self, ctx: RunContext[Any], key: str) -> str:
        """Act on a key; it asks for approval while it runs."""
        if not ctx.tool_call_approved:
            raise ApprovalRequired()
        self.turns.mark()
        return f"acted on {key}"


def acting(turns: Turns, toolset: type[Acts] = Acts, **kwargs: Any) -> Runtime:
    @entry(toolsets=["acts"])
    async def from_python(scope: CallScope, key: str) -> Any:
        return await scope.call_tool("act", {"key": key})

    model = ScriptedModel(tool_call("act", key="k"), "done")
    return Runtime(
        None,
        entries=[AgentEntry(Agent(model), name="job", toolsets=["acts"]), from_python],
        toolsets={"acts": lambda: toolset(turns)},
        **kwargs,
    )


class Answering:
    """An async approver whose answers the test gives: each question waits until `answer` is called."""

    def __init__(self) -> None:
        self.asked: asyncio.Queue[asyncio.Future[Approval]] = asyncio.Queue()

    async def __call__(self, request: ApprovalRequest) -> Approval:
        answer: asyncio.Future[Approval] = asyncio.get_running_loop().create_future()
        self.asked.put_nowait(answer)
        return await answer

    async def answer(self, turns: Turns) -> None:
        question = await self.asked.get()
        for _ in range(5):
            await asyncio.sleep(0)  # whatever the question set going is done
        question.set_result(Approval.approve())
        turns.start()


# -- how soon an approved call runs --------------------------------------------------------------


async def test_a_live_runs_decision_runs_a_models_call_two_turns_later() -> None:
    """The run wakes in the next turn and hands the approval to pydantic-ai, which runs the call again in a
    task of its own: the turn after that."""
    turns = Turns()
    async with acting(turns, policies={"acts": ASK}) as runtime, runtime.stream("job", "go") as run:
        async for event in run:
            if isinstance(event, ApprovalRequested):
                run.decide(event.request.approval_id, "approve")
                turns.start()
        result = await run.result()
    assert result.output == "done"
    assert turns.seen == [1]


@pytest.mark.parametrize("entry_name", ["job", "from_python"])
async def test_an_async_approvers_answer_runs_the_call_as_soon_as_the_call_can(entry_name: str) -> None:
    """A model's call, deferred to pydantic-ai, runs two turns after the answer; a call made from Python, decided
    where it is made, in the very next turn."""
    turns = Turns()
    approver = Answering()
    async with acting(turns, policies={"acts": ASK}, approver=approver) as runtime:
        running = asyncio.ensure_future(runtime.run(entry_name, "k"))
        await approver.answer(turns)
        result = await running
    assert result.output == "done" if entry_name == "job" else "acted on k"
    assert turns.seen == ([1] if entry_name == "job" else [0])


@pytest.mark.parametrize("entry_name", ["job", "from_python"])
async def test_a_tool_that_asks_while_it_runs_runs_again_in_the_turn_after_the_answer(entry_name: str) -> None:
    turns = Turns()
    approver = Answering()
    allow = RuntimeConfig(approval_default="allow")  # only the tool itself asks
    async with acting(turns, AsksWhileRunning, approver=approver, config=allow) as runtime:
        running = asyncio.ensure_future(runtime.run(entry_name, "k"))
        await approver.answer(turns)
        result = await running
    assert result.output == "done" if entry_name == "job" else "acted on k"
    assert turns.seen == [0]


# -- a stream's own approver ---------------------------------------------------------------------


async def test_a_streams_approver_answers_a_question_nobody_decides() -> None:
    turns = Turns()
    decided: list[tuple[bool, str | None]] = []

    async def approver(request: ApprovalRequest) -> Approval:
        return Approval.deny("not today")

    async with acting(turns, policies={"acts": ASK}) as runtime, runtime.stream("job", "go", approver=approver) as run:
        async for event in run:
            if isinstance(event, ApprovalDecided):
                decided.append((event.approved, event.why))
        result = await run.result()
    assert (result.output, decided) == ("done", [(False, "the approver denied it: not today")])
    assert turns.seen == []  # never run


async def test_a_decision_made_first_wins_and_the_streams_approver_is_cancelled() -> None:
    turns = Turns()
    cancelled = asyncio.Event()

    async def slow(request: ApprovalRequest) -> Approval:
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    async with acting(turns, policies={"acts": ASK}) as runtime, runtime.stream("job", "go", approver=slow) as run:
        async for event in run:
            if isinstance(event, ApprovalRequested):
                await asyncio.sleep(0)  # the stream's approver has started
                run.decide(event.request.approval_id, "approve")
                turns.start()
        result = await run.result()
    assert result.output == "done"
    assert turns.seen == [1]  # the decision reaches the call as fast as without a stream's approver
    assert cancelled.is_set()


async def test_a_streams_approver_that_fails_fails_the_run() -> None:
    async def broken(request: ApprovalRequest) -> Approval:
        raise LookupError("the approvals desk is closed")

    async with (
        acting(Turns(), policies={"acts": ASK}) as runtime,
        runtime.stream("job", "go", approver=broken) as run,
    ):
        events = [event async for event in run]
        with pytest.raises(LookupError, match="desk is closed"):
            await run.result()
    last = events[-1]
    assert isinstance(last, RunFailed) and isinstance(last.error, LookupError)


# -- the deadline ----------------------------------------------------------------------------------


async def test_an_approver_that_answers_after_its_deadline_does_not_approve_the_call() -> None:
    """The deadline cancels the approver; one that catches that and answers anyway is too late."""
    turns = Turns()
    cancelled: list[str] = []

    async def stubborn(request: ApprovalRequest) -> Approval:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(request.tool)
        return Approval.approve()

    config = RuntimeConfig(approval_timeout=0.05)
    async with acting(turns, policies={"acts": ASK}, approver=stubborn, config=config) as runtime:
        result = await runtime.run("job", "go")
        with pytest.raises(ApprovalDenied, match=r"no answer came within 0\.05s"):
            await runtime.run("from_python", "k")
    assert cancelled == ["act", "act"]
    assert turns.seen == []
    assert [part.content for part in denied_parts(result.messages)] == [
        "The call to 'act' was not run: no answer came within 0.05s (LLM_DO_APPROVAL_TIMEOUT). "
        "Do not retry the same call."
    ]


async def test_a_run_cancelled_while_its_approver_thinks_is_cancelled_not_denied() -> None:
    asked = asyncio.Event()
    cancelled = asyncio.Event()

    async def thinking(request: ApprovalRequest) -> Approval:
        asked.set()
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    turns = Turns()
    config = RuntimeConfig(approval_timeout=60)
    async with acting(turns, policies={"acts": ASK}, approver=thinking, config=config) as runtime:
        running = asyncio.ensure_future(runtime.run("job", "go"))
        await asyncio.wait_for(asked.wait(), 10)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
    assert cancelled.is_set()
    assert turns.seen == []
