"""The questions of one model response are asked together: two tool calls of one response that both need an answer
are both put to the approver (and to a live run's person) before either is answered, in the order the model made
them; twins still wait for each other's answer, deadlines still deny, and a run cancelled, denied with
`approval_on_deny='raise'` or suspended ends every question it asked, leaving no task behind."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pydantic_ai import Agent

from llm_do import (
    AgentEntry,
    Approval,
    ApprovalChoice,
    ApprovalDecided,
    ApprovalDenied,
    ApprovalRequest,
    ApprovalRequested,
    CallScope,
    Runtime,
    RuntimeConfig,
    ToolPolicy,
    entry,
)
from llm_do.approvals import RunSuspended
from llm_do.testing import ScriptedModel, Step, settle, tool_call, track_leaks

from .test_approvals import Shell

ASK = ToolPolicy(default="ask")
PATIENCE = 5.0
"""Seconds an approver waits for a sibling question before it gives up: questions asked one at a time then fail the
test instead of hanging it (asked together, they arrive within a few turns of the event loop)."""


def shell_runtime(ran: list[str], *steps: Step, approver: Any = None, **config: Any) -> Runtime:
    """`job` makes the scripted `steps` with the shell, whose every call asks."""
    job = AgentEntry(Agent(ScriptedModel(*steps)), name="job", toolsets=["shell"])
    return Runtime(
        None,
        entries=[job],
        toolsets={"shell": lambda: Shell(ran)},
        policies={"shell": ASK},
        approver=approver,
        config=RuntimeConfig(approval_mode="prompt", **config),
    )


def removes(*paths: str) -> list[Any]:
    """One model response that removes each of `paths` (parallel tool calls)."""
    return [tool_call("rm", path=path) for path in paths]


class Holding:
    """An async approver that holds each question until `together` of them are held at once, then gives `choice`
    (or, `answers=False`, holds them until they are cancelled). A question whose siblings do not all arrive within
    `PATIENCE` is denied instead."""

    def __init__(self, together: int, choice: ApprovalChoice = "approve", *, answers: bool = True) -> None:
        self.together = together
        self.choice = choice
        self.answers = answers
        self.asked: list[str] = []
        """The paths asked about, in the order the questions reached the approver."""
        self.held: list[str] = []
        self.most = 0
        """The most questions held at once."""
        self.all_held = asyncio.Event()

    async def __call__(self, request: ApprovalRequest) -> Approval:
        path = str(request.args["path"])
        self.asked.append(path)
        self.held.append(path)
        self.most = max(self.most, len(self.held))
        if len(self.held) >= self.together:
            self.all_held.set()
        try:
            await asyncio.wait_for(self.all_held.wait(), PATIENCE)
            while not self.answers:
                await asyncio.Event().wait()
        except TimeoutError:
            return Approval.deny(f"only {len(self.held)} question(s) came at once")
        finally:
            self.held.remove(path)
        return Approval(self.choice)


@contextmanager
def nothing_left_behind() -> Iterator[None]:
    """The block's runs leave no task running and no scoped object alive."""
    before = asyncio.all_tasks()
    with track_leaks() as leaks:
        yield
        leaks.assert_no_leaks()
    assert asyncio.all_tasks() - before == set()


async def test_both_questions_of_one_response_are_held_by_the_approver_at_once() -> None:
    ran: list[str] = []
    approver = Holding(together=2)
    with nothing_left_behind():
        async with shell_runtime(ran, removes("a", "b"), "done", approver=approver) as runtime:
            result = await runtime.run("job", "clean up")
    assert approver.most == 2, "the second question was asked only after the first was answered"
    assert approver.asked == ["a", "b"]  # in the order the model made them
    assert result.output == "done"
    assert sorted(ran) == ["rm a", "rm b"]


async def test_a_live_stream_shows_both_questions_before_either_is_answered() -> None:
    ran: list[str] = []
    asked: list[ApprovalRequest] = []
    pending_then: list[str] = []
    async with (
        shell_runtime(ran, removes("a", "b"), "done") as runtime,
        runtime.stream("job", "clean up") as run,
        asyncio.timeout(PATIENCE),  # asked one at a time, the second question never comes
    ):
        async for event in run:
            if isinstance(event, ApprovalRequested):
                asked.append(event.request)
                if len(asked) == 2:
                    pending_then = [request.approval_id for request in run.pending]
                    run.decide(asked[0].approval_id, "approve")
                    run.decide(asked[1].approval_id, "deny", note="keep b")
        result = await run.result()
    assert [request.args["path"] for request in asked] == ["a", "b"]
    assert pending_then == [request.approval_id for request in asked]  # both open at once, in the model's order
    assert ran == ["rm a"]
    assert result.output == "done"


async def test_twins_in_one_response_wait_for_each_other_and_the_rest_are_asked_at_once() -> None:
    """rm a, rm a, rm b: the second "rm a" waits for the first one's answer, which approves it for the session; "rm
    b" is asked beside the first "rm a"."""
    ran: list[str] = []
    approver = Holding(together=2, choice="approve_for_session")
    async with shell_runtime(ran, removes("a", "a", "b"), "done", approver=approver) as runtime:
        await runtime.run("job", "clean up")
    assert approver.asked == ["a", "b"] and approver.most == 2
    assert sorted(ran) == ["rm a", "rm a", "rm b"]


async def test_each_question_of_one_response_has_its_own_deadline() -> None:
    ran: list[str] = []
    holding: list[str] = []
    most = 0
    cancelled: list[str] = []

    async def silent(request: ApprovalRequest) -> Approval:
        nonlocal most
        holding.append(str(request.args["path"]))
        most = max(most, len(holding))
        try:
            await asyncio.Event().wait()
        finally:
            holding.remove(str(request.args["path"]))
            cancelled.append(str(request.args["path"]))
        raise AssertionError("unreachable")

    runtime = shell_runtime(ran, removes("a", "b"), "done", approver=silent, approval_timeout=0.05)
    async with runtime:
        result = await runtime.run("job", "clean up")
    assert most == 2 and sorted(cancelled) == ["a", "b"]
    assert ran == [] and result.output == "done"


async def test_a_denial_that_raises_cancels_the_sibling_question() -> None:
    """approval_on_deny='raise': the approver denies "a" once "b" is asked, and never answers "b". The run raises the
    denial of "a"; the question about "b" is cancelled, not left waiting, and nothing outlives the run."""
    ran: list[str] = []
    b_asked = asyncio.Event()
    cancelled: list[str] = []

    async def approver(request: ApprovalRequest) -> Approval:
        if request.args["path"] == "a":
            await asyncio.wait_for(b_asked.wait(), PATIENCE)
            return Approval.deny("not a")
        b_asked.set()
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.append("b")
        raise AssertionError("unreachable")

    with nothing_left_behind():
        async with shell_runtime(ran, removes("a", "b"), "done", approver=approver, approval_on_deny="raise") as rt:
            with pytest.raises(ApprovalDenied, match="the approver denied it: not a") as denied:
                await rt.run("job", "clean up")
        await settle()
    assert denied.value.request.args["path"] == "a"
    assert cancelled == ["b"] and ran == []


async def test_a_run_cancelled_while_both_questions_wait_cancels_both() -> None:
    ran: list[str] = []
    approver = Holding(together=2, answers=False)
    with nothing_left_behind():
        async with shell_runtime(ran, removes("a", "b"), "done", approver=approver) as runtime:
            running = asyncio.ensure_future(runtime.run("job", "clean up"))
            await asyncio.wait_for(approver.all_held.wait(), PATIENCE)  # asked one at a time, never
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running
        await settle()
    assert approver.asked == ["a", "b"] and approver.held == [] and ran == []


async def test_a_call_cancelled_while_both_its_questions_wait_says_so_for_each() -> None:
    """The boss gives up on its child once both of the child's questions are asked: the stream says each was decided
    (cancelled), and none is pending any more."""
    both_asked = asyncio.Event()
    ran: list[str] = []

    @entry(toolsets=["job"])
    async def boss(scope: CallScope, text: str) -> str:
        child = asyncio.ensure_future(scope.call_agent("job", text))
        await both_asked.wait()
        child.cancel()
        await asyncio.gather(child, return_exceptions=True)
        return "gave up"

    job = AgentEntry(Agent(ScriptedModel(removes("a", "b"), "done")), name="job", toolsets=["shell"])
    asked: list[str] = []
    decided: list[tuple[str, bool, str | None]] = []
    async with (
        Runtime(None, entries=[boss, job], toolsets={"shell": lambda: Shell(ran)}, policies={"shell": ASK}) as runtime,
        runtime.stream("boss", "clean up") as run,
        asyncio.timeout(PATIENCE),  # asked one at a time, the second question never comes
    ):
        async for event in run:
            if isinstance(event, ApprovalRequested):
                asked.append(str(event.request.args["path"]))
                if len(asked) == 2:
                    both_asked.set()
            elif isinstance(event, ApprovalDecided):
                decided.append((str(event.request.args["path"]), event.approved, event.why))
        result = await run.result()
    assert asked == ["a", "b"]
    why = "the call was cancelled before an answer came"
    assert sorted(decided) == [("a", False, why), ("b", False, why)]
    assert run.pending == () and result.output == "gave up" and ran == []


class _Suspended(RunSuspended):
    """What a parking approver raises: the question stays open outside the run."""


async def test_a_suspending_approver_is_asked_every_question_of_the_response_in_the_same_run() -> None:
    asked: list[str] = []

    async def parking(request: ApprovalRequest) -> Approval:
        asked.append(str(request.args["path"]))
        raise _Suspended(request.description)

    ran: list[str] = []
    with nothing_left_behind():
        async with shell_runtime(ran, removes("a", "b"), "done", approver=parking) as runtime:
            with pytest.raises(_Suspended, match=r"wants to run shell\.rm"):
                await runtime.run("job", "clean up")
        await settle()
    assert asked == ["a", "b"] and ran == []
