"""Approvals never wait for each other: questions of different runs are asked at once, "approve for
session" never crosses from one person's session to another's, an answer that never comes denies the
call, and each question has an id of its own, and names its tool call."""

from __future__ import annotations

import asyncio
import re

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

from llm_do import (
    AgentEntry,
    Approval,
    ApprovalDenied,
    ApprovalRequest,
    ApprovalRequested,
    Approver,
    CallScope,
    LlmDoSettings,
    Runtime,
    RuntimeConfig,
    ToolPolicy,
    entry,
)
from llm_do.testing import Step, Turn, answering, tool_call

from .test_approvals import Shell

ASK = ToolPolicy(default="ask")


def rm_then_echo(turn: Turn) -> Step:
    return tool_call("rm", path=turn.prompt) if turn.step == 0 else str(turn.returns[0])


def shell_runtime(ran: list[str], approver: Approver, **config: object) -> Runtime:
    job = AgentEntry(Agent(answering(rm_then_echo, threads=False)), name="job", toolsets=["shell"])
    return Runtime(
        None,
        entries=[job],
        toolsets={"shell": lambda: Shell(ran)},
        policies={"shell": ASK},
        approver=approver,
        config=RuntimeConfig(approval_mode="prompt", **config),  # type: ignore[arg-type]
    )


async def test_two_hundred_runs_have_their_questions_pending_at_once() -> None:
    arrived: list[ApprovalRequest] = []
    everyone_asked = asyncio.Event()

    async def approver(request: ApprovalRequest) -> Approval:
        arrived.append(request)
        if len(arrived) == 200:
            everyone_asked.set()
        await everyone_asked.wait()  # nobody answers until every question is pending
        return Approval.approve()

    ran: list[str] = []
    async with shell_runtime(ran, approver) as runtime:
        async with asyncio.timeout(60):  # a guard: with questions asked one at a time, this never ends
            results = await asyncio.gather(*(runtime.run("job", f"f{i}") for i in range(200)))
    assert len(arrived) == 200
    assert sorted(ran) == sorted(f"rm f{i}" for i in range(200))
    assert all(result.output.startswith("removed f") for result in results)


async def test_alices_pending_question_does_not_hold_back_bobs() -> None:
    alice_asked, bob_asked = asyncio.Event(), asyncio.Event()
    asked: list[str] = []

    async def approver(request: ApprovalRequest) -> Approval:
        if not alice_asked.is_set():  # the first question is Alice's
            asked.append("alice")
            alice_asked.set()
            await bob_asked.wait()  # Alice thinks until Bob has been asked
            return Approval.for_session()
        asked.append("bob")
        bob_asked.set()
        return Approval.deny("not mine to remove")

    ran: list[str] = []
    async with shell_runtime(ran, approver) as runtime:
        alices = asyncio.create_task(runtime.run("job", "commit.txt"))
        await alice_asked.wait()
        try:
            async with asyncio.timeout(60):  # a guard: Bob waiting for Alice's answer never ends
                bobs = await runtime.run("job", "commit.txt")
        finally:
            bob_asked.set()  # however it went, Alice stops thinking
        alices_result = await alices
    assert asked == ["alice", "bob"]
    assert ran == ["rm commit.txt"]  # Alice's, approved for her session; never Bob's
    assert alices_result.output == "removed commit.txt"
    assert "denied it: not mine to remove" in bobs.output


async def test_approve_for_session_in_one_run_never_approves_another_runs_call() -> None:
    asked: list[str] = []

    def approver(request: ApprovalRequest) -> Approval:
        asked.append(request.args["path"])
        return Approval.for_session()

    ran: list[str] = []
    async with shell_runtime(ran, approver) as runtime:
        await runtime.run("job", "commit.txt")
        await runtime.run("job", "commit.txt")  # the same call, in another run: asked again
    assert asked == ["commit.txt", "commit.txt"]


async def test_an_approver_that_does_not_answer_in_time_denies_the_call() -> None:
    cancelled = asyncio.Event()

    async def never(request: ApprovalRequest) -> Approval:
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    ran: list[str] = []
    async with shell_runtime(ran, never, approval_timeout=0.05) as runtime:
        result = await runtime.run("job", "a.txt")
    assert ran == []
    assert result.output == (
        "The call to 'rm' was not run: no answer came within 0.05s (LLM_DO_APPROVAL_TIMEOUT). "
        "Do not retry the same call."
    )
    assert cancelled.is_set(), "the approver that did not answer is cancelled"


def test_the_approval_timeout_is_a_setting_in_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DO_APPROVAL_TIMEOUT", "2.5")
    assert RuntimeConfig.from_settings(LlmDoSettings()).approval_timeout == 2.5
    assert RuntimeConfig.from_settings().approval_timeout == 2.5
    monkeypatch.setenv("LLM_DO_APPROVAL_TIMEOUT", "0")
    with pytest.raises(Exception, match=r"LLM_DO_APPROVAL_TIMEOUT='0': expected a number of seconds > 0"):
        LlmDoSettings()


async def test_a_runs_own_approver_wins_over_the_runtimes() -> None:
    ran: list[str] = []
    job = AgentEntry(Agent(answering(rm_then_echo)), name="job", toolsets=["shell"])
    async with Runtime(
        None,
        entries=[job],
        toolsets={"shell": lambda: Shell(ran)},
        policies={"shell": ASK},
        approver=lambda request: Approval.deny("the runtime says no"),
    ) as runtime:
        refused = await runtime.run("job", "a.txt")
        approved = await runtime.run("job", "b.txt", approver=lambda request: "approve")
    assert "the runtime says no" in refused.output
    assert approved.output == "removed b.txt"
    assert ran == ["rm b.txt"]


def fixed_ids(turn: Turn) -> Step:
    """The boss asks the worker (tool call `t1`); the worker removes a file (its tool call is `t1` too)."""
    if turn.step == 0:
        if turn.prompt == "boss":
            return ModelResponse(parts=[ToolCallPart("worker", {"input": "worker"}, tool_call_id="t1")])
        return ModelResponse(parts=[ToolCallPart("rm", {"path": "a.txt"}, tool_call_id="t1")])
    return ModelResponse(parts=[TextPart("done")])


async def test_each_question_has_an_id_of_its_own_and_names_its_tool_call_and_call() -> None:
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> str:
        asked.append(request)
        return "approve"

    ran: list[str] = []
    boss = AgentEntry(Agent(answering(fixed_ids)), name="boss", toolsets=["worker"])
    worker = AgentEntry(Agent(answering(fixed_ids)), name="worker", toolsets=["shell"])
    async with Runtime(
        None,
        entries=[boss, worker],
        toolsets={"shell": lambda: Shell(ran)},
        policies={"shell": ASK},
        approver=approver,
    ) as runtime:
        await runtime.run("boss", "boss")
        await runtime.run("boss", "boss")  # the same calls again, in another run: other questions
        await runtime.run("worker", "worker")  # the same tool call id, elsewhere in the call tree
    first, again, elsewhere = asked
    assert (first.call_id, first.tool_call_id, first.chain) == ("call_2", "t1", ("boss", "worker"))
    assert re.fullmatch(r"apr_[0-9a-f]{16}", first.approval_id)
    assert (again.call_id, again.tool_call_id, again.chain) == (first.call_id, first.tool_call_id, first.chain)
    assert again.approval_id != first.approval_id
    assert (elsewhere.call_id, elsewhere.tool_call_id) == ("call_1", "t1")
    assert elsewhere.approval_id != first.approval_id


async def test_sibling_calls_made_from_python_ask_questions_with_ids_of_their_own() -> None:
    """Two children started by `call_agent` from Python, at once, each asking to remove a file: one
    decision answers one question, never its sibling's (different arguments, the same place otherwise)."""

    @entry(toolsets=["shell"])
    async def remover(scope: CallScope, path: str) -> str:
        try:
            return str(await scope.call_tool("rm", {"path": path}))
        except ApprovalDenied:
            return f"kept {path}"

    @entry(toolsets=["remover"])
    async def tidy(scope: CallScope, paths: list[str]) -> list[str]:
        return list(await asyncio.gather(*(scope.call_agent("remover", path) for path in paths)))

    ran: list[str] = []
    asked: list[ApprovalRequest] = []
    async with (
        Runtime(
            None, entries=[tidy, remover], toolsets={"shell": lambda: Shell(ran)}, policies={"shell": ASK}
        ) as runtime,
        runtime.stream("tidy", ["notes.txt", "thesis.tex"]) as run,
    ):
        async for event in run:
            if isinstance(event, ApprovalRequested) and event.request.toolset == "shell":
                asked.append(event.request)
                keep = event.request.args["path"] == "thesis.tex"
                run.decide(event.request.approval_id, "deny" if keep else "approve")
        result = await run.result()
    assert sorted(request.args["path"] for request in asked) == ["notes.txt", "thesis.tex"]
    assert asked[0].approval_id != asked[1].approval_id
    assert ran == ["rm notes.txt"]
    assert result.output == ["removed notes.txt", "kept thesis.tex"]
