"""The Vercel AI SDK's own client against the example's chat service: the real `ai` package (tests/ai_sdk, installed
by `make setup` with npm ci) drives a uvicorn process of the service from Node (tests/ai_sdk/chat.mjs) with its
`AbstractChat`, `DefaultChatTransport`, `readUIMessageStream` and `convertToModelMessages`, unchanged: the chat id is
the session, approvals go back in the next request, a reload resumes the run in flight."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..postgres import PostgresServer
from ..web_processes import bank_chat, bank_chats

AI_SDK = Path(__file__).resolve().parents[1] / "ai_sdk"


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node.js (20 or later) is needed to run the AI SDK's client: install Node.js, then `make setup`")
    if not (AI_SDK / "node_modules" / "ai" / "package.json").exists():
        pytest.fail("the AI SDK (npm package `ai`, tests/ai_sdk/package.json) is not installed: run `make setup`")
    return node


@pytest.fixture
async def service(postgres: PostgresServer) -> AsyncIterator[str]:
    async with bank_chat(postgres) as url:
        yield url


async def _run_node(script: str, *args: str) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        _node(), script, *args, cwd=AI_SDK, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


def _tool(message: dict[str, Any], name: str) -> dict[str, Any]:
    found = [tool for tool in message["tools"] if tool["name"] == name]
    assert len(found) == 1, message["tools"]
    return found[0]


@pytest.mark.long
@pytest.mark.parametrize(("package", "version"), [("ai", "6.0.326"), ("ai7", "7.0.173")])
async def test_the_ai_sdk_chats_approves_its_way_and_resumes_after_a_reload(
    service: str, package: str, version: str
) -> None:
    seen = await _run_node("chat.mjs", service, package)
    assert seen["version"] == version  # tests/ai_sdk/package.json: AI SDK 6 (Node 20 is in its engines) and 7

    # the first request is the SDK's own body: the chat's id became Alice's conversation; the stream stopped at
    # the question, the chat is ready to answer it
    first = seen["first"]
    assert first["status"] == "ready" and first["error"] is None
    message = first["message"]
    assert message["role"] == "assistant" and message["id"].startswith("msg_")  # the run's message_id
    commit = _tool(message, "commit")
    assert commit["state"] == "approval-requested" and commit["approval"]["id"].startswith("apr_")
    # every tool call of the cashier (a child call) is a protocol tool part, executed by the run, tagged with its call
    cashier = _tool(message, "cashier")
    assert cashier["type"] == "tool-cashier" and not cashier["providerExecuted"] and cashier["call"] is None
    for name in ("begin", "transfer", "commit"):
        tool = _tool(message, name)
        assert tool["type"] == "dynamic-tool" and tool["providerExecuted"]
        assert tool["call"] == {
            "call": "call_2",
            "entry": "cashier",
            "parent_tool_call_id": tool["call"]["parent_tool_call_id"],
        }
    assert {_tool(message, name)["state"] for name in ("begin", "transfer")} == {"output-available"}

    # addToolApprovalResponse: the answer went back in the next request, and the rest of the run came
    answered = seen["answered"]
    assert answered["status"] == "ready" and answered["messages"] == 2  # the same assistant message, continued
    assert answered["message"]["id"] == message["id"]
    assert answered["message"]["text"].startswith("Done: moved 10 from A to B: txn_")
    assert _tool(answered["message"], "commit")["state"] == "output-available"
    assert _tool(answered["message"], "commit")["approval"]["approved"] is True
    assert _tool(answered["message"], "cashier")["state"] == "output-available"

    # convertToModelMessages: the top-level model called the cashier, nothing else; the cashier's tools are marked
    # executed elsewhere (providerExecuted) and tagged with their call
    calls = [
        part
        for model_message in seen["model_messages"]
        if isinstance(model_message["content"], list)
        for part in model_message["content"]
        if part["type"] == "tool-call"
    ]
    assert [part["toolName"] for part in calls if not part.get("providerExecuted")] == ["cashier"]
    cashier_call = next(part for part in calls if part["toolName"] == "cashier")
    children = [part for part in calls if part.get("providerExecuted")]
    assert [part["toolName"] for part in children] == ["begin", "transfer", "commit"]
    for part in children:
        assert part["providerOptions"]["llm_do"]["call"] == "call_2"
        assert part["providerOptions"]["llm_do"]["parent_tool_call_id"] == cashier_call["toolCallId"]
    results = [
        part
        for model_message in seen["model_messages"]
        if model_message["role"] == "tool"
        for part in model_message["content"]
        if part["type"] == "tool-result"
    ]
    assert [part["toolName"] for part in results] == ["cashier"]  # the child's results are not the model's

    # the conversation goes on from the server's history
    assert seen["second"]["text"].startswith("In this conversation you made 1 transfer(s): moved 10 from A to B")

    # Bob can neither write to Alice's chat nor resume it
    assert seen["intruder"]["status"] == "error" and "belongs to another user" in seen["intruder"]["error"]
    assert "belongs to another user" in seen["intruder"]["resumed"]

    # a reload mid-question: the saved conversation, the open question, the run in flight under the same message id
    before = seen["before_reload"]
    assert seen["saved"]["running"] == before["message"]["id"]
    assert seen["saved"]["pending"] == [before["approval"]]
    assert seen["saved"]["roles"] == ["user"]  # the message the run in flight answers; the stream brings the answer
    for replay in (seen["replayed"], seen["resumed"]["message"], seen["follower_asked"]):
        assert replay["id"] == before["message"]["id"]
        assert _tool(replay, "commit")["state"] == "approval-requested"
        assert _tool(replay, "commit")["approval"]["id"] == before["approval"]
    assert seen["resumed"]["status"] == "ready" and seen["resumed"]["messages"] == 2

    # the reloaded chat answered its way; the tab that followed the run saw the question answered and the end
    assert seen["finished"]["message"]["text"].startswith("Done: moved 5 from A to B")
    follower = seen["follower"]["message"]
    assert follower["id"] == before["message"]["id"] and follower["text"].startswith("Done: moved 5 from A to B")
    assert _tool(follower, "commit")["state"] == "output-available"
    if package == "ai7":  # told of the answer given in another tab (`tool-approval-response`)
        assert _tool(follower, "commit")["approval"] == {"id": before["approval"], "approved": True}
    else:  # AI SDK 6 has no chunk for it: the tool part shows the outcome, the data part the answer
        assert _tool(follower, "commit")["approval"] == {"id": before["approval"]}
    approvals = [part["data"] for part in follower["data"] if part["type"] == "data-llm-do-approval"]
    assert [(item["approval_id"], item["state"]) for item in approvals] == [(before["approval"], "approved")]
    assert seen["nothing_to_resume"] is True

    async with httpx.AsyncClient(base_url=service) as client:
        assert (await client.get("/accounts")).json() == {"A": 85, "B": 15, "C": 50, "D": 0}


@pytest.fixture
async def two_services(postgres: PostgresServer) -> AsyncIterator[list[str]]:
    async with bank_chats(postgres, 2) as urls:
        yield urls


@pytest.mark.long
@pytest.mark.parametrize("package", ["ai", "ai7"])
async def test_the_ai_sdk_resumes_and_answers_a_run_on_another_process_than_the_one_running_it(
    two_services: list[str], package: str
) -> None:
    one, two = two_services
    seen = await _run_node("anywhere.mjs", one, two, package)
    before = seen["before"]
    assert seen["saved"] == {"running": before["id"], "pending": [[before["approval"], "live"]]}
    assert seen["resumed"] == {"status": "ready", "id": before["id"], "approval": before["approval"]}
    finished = seen["finished"]
    assert finished["status"] == "ready" and finished["id"] == before["id"]
    assert finished["text"].startswith("Done: moved 5 from A to B")
    assert seen["nothing_to_resume"] == [True, True]
    async with httpx.AsyncClient(base_url=two) as client:
        assert (await client.get("/accounts")).json() == {"A": 95, "B": 5, "C": 50, "D": 0}


def _says(chat: str, text: str) -> dict[str, Any]:
    """The AI SDK's request body for the person's message `text` in chat `chat`."""
    message = {"id": f"u{len(text)}", "role": "user", "parts": [{"type": "text", "text": text}]}
    return {"id": chat, "messages": [message], "trigger": "submit-message"}


def _answers(chat: str, message_id: str, tool_call_id: str, approval_id: str, approved: bool) -> dict[str, Any]:
    """The AI SDK's request body after `addToolApprovalResponse`: the assistant's message carries the answer."""
    part = {
        "type": "dynamic-tool",
        "toolName": "commit",
        "toolCallId": tool_call_id,
        "state": "approval-responded",
        "input": {},
        "approval": {"id": approval_id, "approved": approved},
    }
    assistant = {"id": message_id, "role": "assistant", "parts": [{"type": "step-start"}, part]}
    return {"id": chat, "messages": [assistant], "trigger": "submit-message", "messageId": message_id}


async def _streamed(client: httpx.AsyncClient, body: dict[str, Any], user: str) -> list[dict[str, Any]]:
    async with client.stream("POST", "/chat/sessions", json=body, headers={"x-user": user}) as sse:
        assert sse.status_code == 200, await sse.aread()
        return [json.loads(line[6:]) async for line in sse.aiter_lines() if line.startswith("data: {")]


@pytest.mark.long
async def test_a_chat_request_reaches_its_own_session_only_and_only_its_owner_answers(service: str) -> None:
    async with httpx.AsyncClient(base_url=service, timeout=30) as client:
        asked: dict[str, tuple[str, str, str]] = {}
        for user, chat, text in (
            ("alice", "alice-chat", "move 10 from A to B"),
            ("bob", "bob-chat", "move 5 from C to D"),
        ):
            chunks = await _streamed(client, _says(chat, text), user)
            assert chunks[-1]["type"] == "finish"  # ended at the question; the run waits on it
            question = next(chunk for chunk in chunks if chunk["type"] == "tool-approval-request")
            asked[user] = (chunks[0]["messageId"], question["toolCallId"], question["approvalId"])
        alice_message, alice_tool, alice_approval = asked["alice"]
        bob_message, bob_tool, bob_approval = asked["bob"]

        # (Bob's transfer is between other accounts: Alice's waiting commit holds the row locks of A and B)
        # Bob cannot write to Alice's chat, nor answer her question in it, nor answer it through his own
        refused = await client.post("/chat/sessions", json=_says("alice-chat", "hello"), headers={"x-user": "bob"})
        assert refused.status_code == 403, refused.text
        theirs = _answers("alice-chat", alice_message, alice_tool, alice_approval, True)
        assert (await client.post("/chat/sessions", json=theirs, headers={"x-user": "bob"})).status_code == 403
        smuggled = _answers("bob-chat", bob_message, alice_tool, alice_approval, True)
        wrong = await client.post("/chat/sessions", json=smuggled, headers={"x-user": "bob"})
        assert wrong.status_code == 409 and "not a question of the run in flight" in wrong.json()["error"]
        saved = (await client.get("/chat/sessions/alice-chat", headers={"x-user": "alice"})).json()
        assert [item["approval_id"] for item in saved["pending"]] == [alice_approval]  # still waiting for Alice
        # a second message while the run waits is refused
        busy = await client.post("/chat/sessions", json=_says("alice-chat", "hello"), headers={"x-user": "alice"})
        assert busy.status_code == 409, busy.text

        # each answers their own, the SDK's way: the rest of the run, not what the first response sent
        rest = await _streamed(client, _answers("alice-chat", alice_message, alice_tool, alice_approval, True), "alice")
        assert rest[0] == {"type": "start", "messageId": alice_message}
        assert "tool-approval-request" not in [chunk["type"] for chunk in rest]
        outputs = [chunk["toolCallId"] for chunk in rest if chunk["type"] == "tool-output-available"]
        assert alice_tool in outputs  # the commit ran, and its result continues the same message
        text = "".join(chunk["delta"] for chunk in rest if chunk["type"] == "text-delta")
        assert text.startswith("Done: moved 10 from A to B")
        rest = await _streamed(client, _answers("bob-chat", bob_message, bob_tool, bob_approval, False), "bob")
        text = "".join(chunk["delta"] for chunk in rest if chunk["type"] == "text-delta")
        assert text.startswith("The transfer was not made")
        assert (await client.get("/accounts")).json() == {"A": 90, "B": 10, "C": 50, "D": 0}
        # nothing in flight any more: nothing to resume, and the conversations were saved
        for user, chat in (("alice", "alice-chat"), ("bob", "bob-chat")):
            assert (await client.get(f"/chat/sessions/{chat}/stream", headers={"x-user": user})).status_code == 204
            saved = (await client.get(f"/chat/sessions/{chat}", headers={"x-user": user})).json()
            assert saved["running"] is None and saved["pending"] == [] and saved["messages"][0]["role"] == "user"
