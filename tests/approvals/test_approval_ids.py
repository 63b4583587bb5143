"""Whose question is it: approval ids unique across sessions and runs even when models reuse tool call ids
(a replayed recording), each question naming its session, and each answer reaching only its own run, through
sessions, live runs and a web app."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from llm_do import (
    AgentEntry,
    Approval,
    ApprovalChoice,
    ApprovalNotPending,
    ApprovalRequest,
    ApprovalRequested,
    LiveRun,
    Runtime,
    ToolPolicy,
    Toolset,
    tool,
)
from llm_do.sessions import OpenQuestion
from llm_do.testing import asgi_client
from llm_do.web import decision_of, sse_response, vercel_sse

SAME = "call_0"
"""The tool call id every run's model gives its call, as a recording replayed in every session would."""


class Vault(Toolset):
    def __init__(self, opened: list[str]) -> None:
        self.opened = opened

    @tool
    def open_vault(self, door: str) -> str:
        """Open a door of the vault."""
        self.opened.append(door)
        return f"{door} is open"


def replayed(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Asks to open the door the prompt names, under the same tool call id in every run; then says what came back."""
    returned = [part.content for part in messages[-1].parts if isinstance(part, ToolReturnPart)]
    if returned:
        return ModelResponse(parts=[TextPart(str(returned[0]))])
    prompt = str(messages[-1].parts[-1].content)  # type: ignore[union-attr]
    return ModelResponse(parts=[ToolCallPart("open_vault", {"door": prompt}, tool_call_id=SAME)])


async def replayed_stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    for index, part in enumerate(replayed(messages, info).parts):
        if isinstance(part, TextPart):
            yield part.content
        elif isinstance(part, ToolCallPart):
            yield {index: DeltaToolCall(part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id)}


def vault_runtime(opened: list[str], **options: Any) -> Runtime:
    model = FunctionModel(replayed, stream_function=replayed_stream)
    keeper = AgentEntry(Agent(model), name="keeper", toolsets=["vault"])
    return Runtime(
        None,
        entries=[keeper],
        toolsets={"vault": lambda: Vault(opened)},
        policies={"vault": ToolPolicy(default="ask")},
        **options,
    )


async def asked(run: LiveRun) -> ApprovalRequest:
    """The next question of a live run."""
    async for event in run:
        if isinstance(event, ApprovalRequested):
            return event.request
    raise AssertionError("the run ended without asking")


async def test_two_sessions_asking_at_once_with_the_same_tool_call_id_get_ids_of_their_own() -> None:
    opened: list[str] = []
    async with vault_runtime(opened) as runtime, AsyncExitStack() as stack:
        alice = await stack.enter_async_context(runtime.stream("keeper", "north", session="alice"))
        bob = await stack.enter_async_context(runtime.stream("keeper", "south", session="bob"))
        alices, bobs = await asked(alice), await asked(bob)  # both pending at once
        assert alices.tool_call_id == bobs.tool_call_id == SAME
        assert alices.approval_id != bobs.approval_id
        assert (alices.session_id, bobs.session_id) == ("alice", "bob")
        assert (alices.call_id, alices.chain, dict(alices.args)) == ("call_1", ("keeper",), {"door": "north"})
        # neither run takes the other's question
        for run, other in ((alice, bobs), (bob, alices)):
            try:
                run.decide(other.approval_id, "approve")
            except ApprovalNotPending as refused:
                assert refused.pending == ((alices if run is alice else bobs).approval_id,)
            else:
                raise AssertionError("a run took another session's question")
        alice.decide(alices.approval_id, "approve")
        bob.decide(bobs.approval_id, "deny", "not today")
        alice_said, bob_said = (await alice.result()).output, (await bob.result()).output
    assert opened == ["north"]
    assert alice_said == "north is open"
    assert "the approver denied it: not today" in bob_said


async def test_each_sessions_approver_hears_only_its_own_questions_asked_at_once() -> None:
    heard: dict[str, list[ApprovalRequest]] = {"alice": [], "bob": []}
    both_asked = asyncio.Event()

    def approver_of(person: str, choice: str) -> Any:
        async def approver(request: ApprovalRequest) -> str:
            heard[person].append(request)
            if len(heard["alice"]) + len(heard["bob"]) == 2:
                both_asked.set()
            await both_asked.wait()  # nobody answers until both questions are pending
            return choice

        return approver

    opened: list[str] = []
    async with vault_runtime(opened) as runtime:
        alice = await runtime.session("alice", approver=approver_of("alice", "approve"))
        bob = await runtime.session("bob", approver=approver_of("bob", "deny"))
        async with asyncio.timeout(30):
            alice_result, bob_result = await asyncio.gather(alice.run("keeper", "north"), bob.run("keeper", "south"))
    [alices], [bobs] = heard["alice"], heard["bob"]
    assert (alices.session_id, alices.args["door"]) == ("alice", "north")
    assert (bobs.session_id, bobs.args["door"]) == ("bob", "south")
    assert alices.tool_call_id == bobs.tool_call_id == SAME and alices.approval_id != bobs.approval_id
    assert opened == ["north"]
    assert alice_result.output == "north is open" and "denied" in bob_result.output


async def test_runs_without_a_session_never_share_an_id_and_name_no_session() -> None:
    heard: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Approval:
        heard.append(request)
        return Approval.approve()

    async with vault_runtime([], approver=approver) as runtime:
        await runtime.run("keeper", "north")
        await runtime.run("keeper", "north")  # the same recording again: another run, another question
        await runtime.run("keeper", "north", session="carol")
    first, again, carols = heard
    assert len({first.approval_id, again.approval_id, carols.approval_id}) == 3
    assert (first.session_id, again.session_id, carols.session_id) == (None, None, "carol")


async def test_a_live_run_asks_neither_its_sessions_approver_nor_the_runtimes() -> None:
    """The person holding the stream answers; an approver given to the stream is asked too, first answer wins."""
    heard: list[str] = []

    def runtimes(request: ApprovalRequest) -> ApprovalChoice:
        heard.append("runtime")
        return "approve"

    def sessions(request: ApprovalRequest) -> ApprovalChoice:
        heard.append("session")
        return "approve"

    async with vault_runtime([], approver=runtimes) as runtime:
        await runtime.session("dave", approver=sessions)
        async with runtime.stream("keeper", "east", session="dave") as run:
            question = await asked(run)
            run.decide(question.approval_id, "deny")
            result = await run.result()
    assert heard == [] and "denied" in result.output


def chat_app(runtime: Runtime) -> FastAPI:
    """A chat service of the shape of examples/service: a message streams a live run in its session; the
    session's open questions are listed and answered by requests that name the session (through the session's
    inbox; who may decide is the application's to check: here, whoever names the session)."""
    app = FastAPI()

    @app.post("/sessions/{session_id}/messages")
    async def message(session_id: str, body: dict[str, str]) -> Response:
        async def lines() -> AsyncIterator[str]:
            async with runtime.stream("keeper", body["text"], session=session_id) as run:
                async for line in vercel_sse(run):
                    yield line

        return sse_response(lines())

    @app.get("/sessions/{session_id}/questions")
    async def questions(session_id: str) -> Response:
        session = runtime.sessions.get(session_id)
        pending = () if session is None else session.pending
        return JSONResponse([{"approval_id": q.approval_id, "session_id": q.session_id} for q in pending])

    @app.post("/sessions/{session_id}/decisions", status_code=204)
    async def decide(session_id: str, body: dict[str, Any]) -> Response:
        approval_id, choice, note = decision_of(body)
        session = runtime.sessions.get(session_id)
        if session is None:
            return JSONResponse({"error": f"no session {session_id!r}"}, status_code=404)
        try:
            session.decide(approval_id, choice, note)  # type: ignore[arg-type]
        except ApprovalNotPending as refused:
            return JSONResponse({"error": str(refused)}, status_code=409)
        return Response(status_code=204)

    return app


async def _chunks(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    async for line in response.aiter_lines():
        if line.startswith("data: ") and line != "data: [DONE]":
            yield json.loads(line.removeprefix("data: "))


async def _until_asked(chunks: AsyncIterator[dict[str, Any]]) -> dict[str, Any]:
    async for chunk in chunks:
        if chunk["type"] == "tool-approval-request":
            return chunk
    raise AssertionError("the stream ended without a question")


async def _text(chunks: AsyncIterator[dict[str, Any]]) -> str:
    return "".join([str(chunk["output"]) async for chunk in chunks if chunk["type"] == "tool-output-available"])


async def test_two_people_on_the_web_each_answer_only_their_own_question() -> None:
    opened: list[str] = []
    async with (
        vault_runtime(opened) as runtime,
        asgi_client(chat_app(runtime), timeout=30) as client,
        client.stream("POST", "/sessions/alice/messages", json={"text": "north"}) as alice_sse,
        client.stream("POST", "/sessions/bob/messages", json={"text": "south"}) as bob_sse,
    ):
        alice, bob = _chunks(alice_sse), _chunks(bob_sse)
        alices, bobs = await _until_asked(alice), await _until_asked(bob)
        assert alices["toolCallId"] == bobs["toolCallId"] == SAME  # the protocol's tool call, as the model named it
        assert alices["approvalId"] != bobs["approvalId"]
        for person, question in (("alice", alices), ("bob", bobs)):  # each session lists its own question only
            listed = (await client.get(f"/sessions/{person}/questions")).json()
            assert listed == [{"approval_id": question["approvalId"], "session_id": person}]
        # Bob's click on Alice's question, in his session: refused, and nothing of Alice's is named
        crossed = await client.post("/sessions/bob/decisions", json={"id": alices["approvalId"], "approved": True})
        assert crossed.status_code == 409 and bobs["approvalId"] in crossed.json()["error"]
        assert alices["approvalId"] not in crossed.json()["error"].split("(pending:")[1]
        for person, question, approved in (("alice", alices, True), ("bob", bobs, False)):
            answered = await client.post(
                f"/sessions/{person}/decisions", json={"id": question["approvalId"], "approved": approved}
            )
            assert answered.status_code == 204, answered.text
        alice_saw, bob_saw = await _text(alice), await _text(bob)
        assert (await client.get("/sessions/alice/questions")).json() == []
    assert opened == ["north"]
    assert alice_saw == "north is open" and bob_saw == ""


def both_doors(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Asks to open two doors at once (parallel calls), then says what came back."""
    returned = [str(part.content) for part in messages[-1].parts if isinstance(part, ToolReturnPart)]
    if returned:
        return ModelResponse(parts=[TextPart(" | ".join(returned))])
    return ModelResponse(
        parts=[
            ToolCallPart("open_vault", {"door": "north"}, tool_call_id="a"),
            ToolCallPart("open_vault", {"door": "south"}, tool_call_id="b"),
        ]
    )


async def test_a_sessions_inbox_lists_its_open_questions_and_answers_them_from_another_task() -> None:
    opened: list[str] = []
    keeper = AgentEntry(Agent(FunctionModel(both_doors)), name="keeper", toolsets=["vault"])
    async with Runtime(
        None, entries=[keeper], toolsets={"vault": lambda: Vault(opened)}, policies={"vault": ToolPolicy(default="ask")}
    ) as runtime:
        alice, bob = await runtime.session("alice"), await runtime.session("bob")
        assert alice.pending == ()
        with pytest.raises(ApprovalNotPending, match=r"not pending in session 'alice' \(pending: none\)"):
            alice.decide("apr_0000000000000000", "approve")

        async def open_question() -> ApprovalRequest:
            while not alice.pending:  # noqa: ASYNC110 (an inbox is looked at, not waited on)
                await asyncio.sleep(0.01)
            return alice.pending[0]

        async def inbox() -> None:  # elsewhere in the process: nothing of the stream is in hand here
            north = await open_question()  # the questions of one response are asked in order
            assert (north.session_id, north.tool_call_id, north.args["door"]) == ("alice", "a", "north")
            assert bob.pending == ()
            with pytest.raises(ApprovalNotPending) as refused:  # Bob's session holds none of Alice's questions
                bob.decide(north.approval_id, "approve")
            assert refused.value.pending == () and north.approval_id not in str(refused.value).split("(pending:")[1]
            alice.decide(north.approval_id, "approve")
            with pytest.raises(ApprovalNotPending):  # answered already
                alice.decide(north.approval_id, "deny")
            south = await open_question()
            assert (south.tool_call_id, south.args["door"]) == ("b", "south")
            alice.decide(south.approval_id, "deny", "not that one")

        async with asyncio.timeout(30), runtime.stream("keeper", "open up", session=alice, model_events=False) as run:
            answering = asyncio.create_task(inbox())
            events = [event async for event in run]  # the stream's holder only reads
            await answering
            result = await run.result()
        assert len([event for event in events if isinstance(event, ApprovalRequested)]) == 2  # streamed too
        assert alice.pending == ()
        with pytest.raises(ApprovalNotPending):
            alice.decide("apr_0000000000000000", "approve")
    assert opened == ["north"]
    assert result.output.startswith("north is open | ") and "not that one" in result.output


class Elsewhere:
    """A place of the inbox's: questions held outside this process's live runs (as a parked job's are)."""

    def __init__(self, request: ApprovalRequest) -> None:
        self.request = request
        self.answered: list[tuple[str, str, str | None]] = []

    async def open_questions(self, session_id: str) -> list[OpenQuestion]:
        if session_id != self.request.session_id or self.answered:
            return []
        return [OpenQuestion(self.request, "parked", job_id=7)]

    async def answer(self, session_id: str, approval_id: str, choice: ApprovalChoice, note: str | None) -> bool:
        if session_id != self.request.session_id or approval_id != self.request.approval_id:
            return False
        self.answered.append((approval_id, choice, note))
        return True


async def test_a_sessions_questions_are_listed_and_answered_wherever_they_wait() -> None:
    opened: list[str] = []
    keeper = AgentEntry(Agent(FunctionModel(both_doors)), name="keeper", toolsets=["vault"])
    parked = ApprovalRequest(
        entry="keeper",
        depth=0,
        chain=("keeper",),
        toolset="vault",
        tool="open_vault",
        args={"door": "west"},
        reason="asked",
        description="open the west door",
        approval_id="apr_parked",
        call_id="call_1",
        tool_call_id="w",
        session_id="alice",
    )
    elsewhere = Elsewhere(parked)
    async with Runtime(
        None, entries=[keeper], toolsets={"vault": lambda: Vault(opened)}, policies={"vault": ToolPolicy(default="ask")}
    ) as runtime:
        runtime.inbox.add(elsewhere)
        runtime.inbox.add(elsewhere)  # once
        assert [(q.approval_id, q.held, q.job_id) for q in await runtime.questions("alice")] == [
            ("apr_parked", "parked", 7)
        ]
        assert await runtime.questions("bob") == ()
        alice = await runtime.session("alice")

        async def inbox() -> None:
            while len(await alice.questions()) < 3:  # noqa: ASYNC110 (an inbox is looked at, not waited on)
                await asyncio.sleep(0.01)
            north, south, waiting = await alice.questions()  # its live run's first (one response's two), then others
            assert [(q.held, q.request.args["door"]) for q in (north, south, waiting)] == [
                ("live", "north"),
                ("live", "south"),
                ("parked", "west"),
            ]
            with pytest.raises(ApprovalNotPending) as refused:
                await alice.answer("apr_unknown", "approve")
            assert refused.value.pending == (north.approval_id, south.approval_id, "apr_parked")
            await alice.answer(north.approval_id, "approve")  # the live run's, here
            await runtime.answer("alice", "apr_parked", "approve_for_session", "fine")  # the other place's
            await alice.answer(south.approval_id, "deny")

        async with asyncio.timeout(30), runtime.stream("keeper", "open up", session=alice, model_events=False) as run:
            answering = asyncio.create_task(inbox())
            await run.result()
            await answering
        assert elsewhere.answered == [("apr_parked", "approve_for_session", "fine")]
        assert await alice.questions() == ()
        runtime.inbox.discard(elsewhere)
    assert opened == ["north"]
