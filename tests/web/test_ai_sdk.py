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
from ..web_processes import chat_process, fresh_database

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
    name = postgres.new_database_name()
    await fresh_database(postgres.dsn(), name)
    async with chat_process(postgres.dsn(name)) as url:
        async with httpx.AsyncClient(base_url=url) as client:
            for account, balance in {"A": 100, "B": 0}.items():
                created = await client.post("/accounts", json={"name": account, "balance": balance})
                assert created.status_code == 201, created.text
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
        assert (await client.get("/accounts")).json() == {"A": 85, "B": 15}
