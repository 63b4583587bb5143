"""The example's chat over HTTP, on two real uvicorn processes sharing one PostgreSQL: a run streamed by
one process, its approval answered through the other; who may answer; a conversation that continues."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from llm_do.testing import ChatClient

from ..jobs_support import query
from ..postgres import PostgresServer
from ..web_processes import PROCESSES, bank_chat, chat_processes, chunks, fresh_database


@pytest.fixture
async def two_processes(postgres: PostgresServer) -> AsyncIterator[tuple[str, str, str]]:
    name = postgres.new_database_name()
    await fresh_database(postgres.dsn(), name)
    async with chat_processes(postgres.dsn(name), 2) as (one, two):
        async with httpx.AsyncClient(base_url=one) as client:
            for account, balance in {"A": 100, "B": 0}.items():
                created = await client.post("/accounts", json={"name": account, "balance": balance})
                assert created.status_code == 201, created.text
        yield one, two, postgres.dsn(name)


async def _session(client: httpx.AsyncClient, user: str) -> str:
    opened = await client.post("/chat/sessions", headers={"x-user": user})
    assert opened.status_code == 201, opened.text
    return str(opened.json()["id"])


@pytest.mark.long
async def test_a_decision_posted_to_another_process_reaches_the_run(two_processes: tuple[str, str, str]) -> None:
    one, two, _ = two_processes
    alice = {"x-user": "alice"}
    async with httpx.AsyncClient(base_url=one, timeout=30) as streaming, httpx.AsyncClient(base_url=two) as other:
        session = await _session(streaming, "alice")
        seen: list[dict[str, Any]] = []
        message = {"text": "move 10 from A to B"}
        async with streaming.stream("POST", f"/chat/sessions/{session}/messages", json=message, headers=alice) as sse:
            assert sse.status_code == 200
            assert sse.headers["x-vercel-ai-ui-message-stream"] == "v1"
            async for chunk in chunks(sse):
                seen.append(chunk)
                if chunk["type"] != "tool-approval-request":
                    continue
                approval = chunk["approvalId"]
                # Bob may not answer Alice's approval, in any process
                bob = await other.post(
                    f"/chat/sessions/{session}/decisions",
                    json={"approval_id": approval, "choice": "approve"},
                    headers={"x-user": "bob"},
                )
                assert bob.status_code == 403, bob.text
                # an approval that is not pending in Alice's session is refused by the process holding her run
                unknown = await other.post(
                    f"/chat/sessions/{session}/decisions",
                    json={"approval_id": "apr_0000000000000000", "choice": "approve"},
                    headers=alice,
                )
                assert unknown.status_code == 409, unknown.text
                assert "'apr_0000000000000000' is not pending in this run" in unknown.json()["error"]
                assert approval in unknown.json()["error"]  # it says what is pending
                # Alice's answer, to the other process, in the AI SDK's shape
                answered = await other.post(
                    f"/chat/sessions/{session}/decisions", json={"id": approval, "approved": True}, headers=alice
                )
                assert answered.status_code == 204, answered.text
        kinds = [chunk["type"] for chunk in seen]
        assert kinds[0] == "start" and kinds[-1] == "finish"
        text = "".join(chunk["delta"] for chunk in seen if chunk["type"] == "text-delta")
        assert text.startswith("Done: moved 10 from A to B: txn_") and text.endswith(" committed")
        calls = {chunk["id"]: chunk["data"] for chunk in seen if chunk["type"] == "data-llm-do-call"}
        assert {call["entry"]: call["state"] for call in calls.values()} == {"banker": "ok", "cashier": "ok"}
        assert calls["call_2"]["parent"] == "call_1"
        assert (await other.get("/accounts")).json() == {"A": 90, "B": 10}

        # the conversation goes on, served by the other process, from what the first message left
        async with other.stream(
            "POST", f"/chat/sessions/{session}/messages", json={"text": "what did I do?"}, headers=alice
        ) as sse:
            again = [chunk async for chunk in chunks(sse)]
        text = "".join(chunk["delta"] for chunk in again if chunk["type"] == "text-delta")
        assert text.startswith("In this conversation you made 1 transfer(s): moved 10 from A to B")


@pytest.mark.long
async def test_a_process_told_to_stop_mid_question_tells_the_person_and_exits(
    two_processes: tuple[str, str, str],
) -> None:
    one, two, _ = two_processes
    alice = {"x-user": "alice"}
    async with (
        httpx.AsyncClient(base_url=one, timeout=30) as streaming,
        httpx.AsyncClient(base_url=two, timeout=30) as other,
    ):
        session = await _session(streaming, "alice")
        seen: list[dict[str, Any]] = []
        message = {"text": "move 10 from A to B"}
        async with streaming.stream("POST", f"/chat/sessions/{session}/messages", json=message, headers=alice) as sse:
            async for chunk in chunks(sse):
                seen.append(chunk)
                if chunk["type"] == "tool-approval-request":
                    approval = chunk["approvalId"]
                    PROCESSES[one].send_signal(signal.SIGTERM)  # a deploy, while Alice has a question open
                    stopping = asyncio.get_running_loop().time()
        exited = await asyncio.wait_for(PROCESSES[one].wait(), 20)
        took = asyncio.get_running_loop().time() - stopping
        kinds = [chunk["type"] for chunk in seen]
        assert kinds[0] == "start" and kinds[-1] == "finish"  # a whole stream, not a cut one
        decided = [
            chunk["data"] for chunk in seen if chunk["type"] == "data-llm-do-approval" and chunk["id"] == approval
        ]
        assert decided[-1]["state"] == "denied"
        assert "restarting" in decided[-1]["why"]
        assert exited in (0, -signal.SIGTERM) and took < 15  # uvicorn raises the signal again once it has shut down
        assert (await other.get("/accounts")).json() == {"A": 100, "B": 0}  # nothing half-done
        late = await other.post(
            f"/chat/sessions/{session}/decisions", json={"approval_id": approval, "choice": "approve"}, headers=alice
        )
        assert late.status_code == 404  # no process holds a run waiting on it


@pytest.mark.long
async def test_a_decision_nobody_holds_is_refused_readably(two_processes: tuple[str, str, str]) -> None:
    one, _, _ = two_processes
    async with httpx.AsyncClient(base_url=one, timeout=30) as client:
        session = await _session(client, "alice")
        decided = await client.post(
            f"/chat/sessions/{session}/decisions",
            json={"approval_id": "apr_1", "choice": "deny", "note": "no"},
            headers={"x-user": "alice"},
        )
        assert decided.status_code == 404, decided.text
        assert f"no process holds a live run of session {session!r}" in decided.json()["error"]
        malformed = await client.post(
            f"/chat/sessions/{session}/decisions", json={"approval_id": "apr_1"}, headers={"x-user": "alice"}
        )
        assert malformed.status_code == 400 and "choose one of" in malformed.json()["error"]
        nobody = await client.post("/chat/sessions", headers={})
        assert nobody.status_code == 401


@pytest.mark.long
async def test_a_person_who_leaves_while_asked_finds_the_run_again_and_a_denial_rolls_it_back(
    two_processes: tuple[str, str, str],
) -> None:
    one, two, dsn = two_processes
    alice = {"x-user": "alice"}
    async with httpx.AsyncClient(base_url=one, timeout=30) as client, httpx.AsyncClient(base_url=two) as other:
        session = await _session(client, "alice")
        message = {"text": "move 10 from A to B"}
        async with client.stream("POST", f"/chat/sessions/{session}/messages", json=message, headers=alice) as sse:
            approval = started = None
            async for chunk in chunks(sse):
                if chunk["type"] == "start":
                    started = chunk["messageId"]
                if chunk["type"] == "tool-approval-request":
                    approval = chunk["approvalId"]
                    break  # the person closes the tab (or reloads): the response is closed unread
        assert approval is not None and started is not None
        # the run waits for its answer: the conversation says so, and takes no other message meanwhile
        saved = (await client.get(f"/chat/sessions/{session}", headers=alice)).json()
        assert saved["running"] == started
        assert [item["approval_id"] for item in saved["pending"]] == [approval]
        assert saved["pending"][0]["tool"] == "commit"
        busy = await other.post(f"/chat/sessions/{session}/messages", json={"text": "hello"}, headers=alice)
        assert busy.status_code == 409, busy.text
        assert (await client.get(f"/chat/sessions/{session}", headers={"x-user": "bob"})).status_code == 403
        assert (await client.get(f"/chat/sessions/{session}/stream", headers={"x-user": "bob"})).status_code == 403
        # the AI SDK's resumable stream: the run from its start, to the open question
        async with client.stream("GET", f"/chat/sessions/{session}/stream", headers=alice) as again:
            replayed = [chunk async for chunk in chunks(again)]
        assert replayed[0] == {"type": "start", "messageId": started}
        assert [chunk["approvalId"] for chunk in replayed if chunk["type"] == "tool-approval-request"] == [approval]
        assert replayed[-1]["type"] == "finish"
        # followed to its end by AI SDK 7, told of the denial given meanwhile through the other process
        follow = f"/chat/sessions/{session}/stream?follow=true&sdk=7"
        async with client.stream("GET", follow, headers=alice) as followed:
            seen = []
            async for chunk in chunks(followed):
                seen.append(chunk)
                if chunk["type"] == "tool-approval-request":
                    decision = {"approval_id": approval, "choice": "deny", "note": "not today"}
                    denied = await other.post(f"/chat/sessions/{session}/decisions", json=decision, headers=alice)
                    assert denied.status_code == 204, denied.text
        text = "".join(chunk["delta"] for chunk in seen if chunk["type"] == "text-delta")
        assert text.startswith("The transfer was not made") and seen[-1]["type"] == "finish"
        [answer] = [chunk for chunk in seen if chunk["type"] == "tool-approval-response"]
        assert answer["approvalId"] == approval and answer["approved"] is False and "not today" in answer["reason"]
        # its transaction was rolled back when the cashier's call ended: nothing moved, no connection left in it
        idle = await query(
            dsn, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in%'"
        )
        assert idle[0][0] == 0
        assert (await client.get("/accounts")).json() == {"A": 100, "B": 0}
        assert (await client.get(f"/chat/sessions/{session}/stream", headers=alice)).status_code == 204
        async with client.stream(
            "POST", f"/chat/sessions/{session}/messages", json={"text": "hello"}, headers=alice
        ) as sse:
            text = "".join([chunk["delta"] async for chunk in chunks(sse) if chunk["type"] == "text-delta"])
        assert text.startswith("Hello!")  # the session takes the next message
        roles = [
            item["role"] for item in (await client.get(f"/chat/sessions/{session}", headers=alice)).json()["messages"]
        ]
        assert roles[0] == "user" and roles[-1] == "assistant"


async def _approve_and_read(
    streaming: httpx.AsyncClient, deciding: httpx.AsyncClient, session: str, text: str, user: dict[str, str]
) -> str:
    """Send `text`, approve its commit through `deciding`, and return the answer's text."""
    seen: list[dict[str, Any]] = []
    async with streaming.stream("POST", f"/chat/sessions/{session}/messages", json={"text": text}, headers=user) as sse:
        assert sse.status_code == 200
        async for chunk in chunks(sse):
            seen.append(chunk)
            if chunk["type"] == "tool-approval-request":
                decision = {"approval_id": chunk["approvalId"], "choice": "approve"}
                answered = await deciding.post(f"/chat/sessions/{session}/decisions", json=decision, headers=user)
                assert answered.status_code == 204, answered.text
    return "".join(chunk["delta"] for chunk in seen if chunk["type"] == "text-delta")


@pytest.mark.long
async def test_a_second_message_to_a_busy_conversation_is_refused_by_every_process(
    two_processes: tuple[str, str, str],
) -> None:
    one, two, _ = two_processes
    alice = {"x-user": "alice"}
    async with (
        httpx.AsyncClient(base_url=one, timeout=30) as first,
        httpx.AsyncClient(base_url=two, timeout=30) as other,
    ):
        session = await _session(first, "alice")
        message = {"text": "move 10 from A to B"}
        async with first.stream("POST", f"/chat/sessions/{session}/messages", json=message, headers=alice) as sse:
            async for chunk in chunks(sse):
                if chunk["type"] != "tool-approval-request":
                    continue
                # the run waits for Alice: a second message is refused, by the other process as by this one
                for client in (other, first):
                    again = await client.post(
                        f"/chat/sessions/{session}/messages", json={"text": "move 5 from A to B"}, headers=alice
                    )
                    assert again.status_code == 409, again.text
                    assert f"conversation {session!r} is still answering" in again.json()["error"]
                decision = {"approval_id": chunk["approvalId"], "choice": "approve"}
                answered = await other.post(f"/chat/sessions/{session}/decisions", json=decision, headers=alice)
                assert answered.status_code == 204, answered.text
        assert (await other.get("/accounts")).json() == {"A": 90, "B": 10}

        # once answered, the conversation takes the next message, in either process, and each continues from
        # the other's last turn (the first process's open session reads what the second one added)
        text = await _approve_and_read(other, first, session, "move 5 from A to B", alice)
        assert text.startswith("Done: moved 5 from A to B")
        # read through the first process, whose session stayed open: the turn the second one saved is there
        shown = (await first.get(f"/chat/sessions/{session}", headers=alice)).json()["messages"]
        asked = [part["text"] for item in shown if item["role"] == "user" for part in item["parts"]]
        assert asked == ["move 10 from A to B", "move 5 from A to B"]
        async with first.stream(
            "POST", f"/chat/sessions/{session}/messages", json={"text": "what did I do?"}, headers=alice
        ) as sse:
            text = "".join([chunk["delta"] async for chunk in chunks(sse) if chunk["type"] == "text-delta"])
        assert text.startswith("In this conversation you made 2 transfer(s): moved 10 from A to B")
        assert "moved 5 from A to B" in text
        # sent as soon as the answer ended, to the process that gave it: taken too
        async with first.stream(
            "POST", f"/chat/sessions/{session}/messages", json={"text": "and?"}, headers=alice
        ) as sse:
            assert sse.status_code == 200, await sse.aread()
            text = "".join([chunk["delta"] async for chunk in chunks(sse) if chunk["type"] == "text-delta"])
        assert text.startswith("In this conversation you made 2 transfer(s)")
        assert (await first.get("/accounts")).json() == {"A": 85, "B": 15}


@pytest.mark.long
async def test_the_conversation_locks_are_taken_back_when_their_connection_comes_back(
    two_processes: tuple[str, str, str],
) -> None:
    one, two, dsn = two_processes
    alice, bob = {"x-user": "alice"}, {"x-user": "bob"}
    first, other = httpx.AsyncClient(base_url=one, timeout=30), httpx.AsyncClient(base_url=two, timeout=30)
    async with first, other:
        session = await _session(first, "alice")
        message = {"text": "move 10 from A to B"}
        async with first.stream("POST", f"/chat/sessions/{session}/messages", json=message, headers=alice) as sse:
            async for chunk in chunks(sse):
                if chunk["type"] != "tool-approval-request":
                    continue
                # the connection holding the first process's locks is ended under it
                ended = await query(
                    dsn,
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = 'llm-do turns' AND pid IN "
                    "(SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted)",
                )
                assert [row[0] for row in ended] == [True]
                # the next claim in that process connects again (Bob's conversation) and takes Alice's lock back
                for _ in range(20):
                    hello = await first.post(
                        f"/chat/sessions/{await _session(first, 'bob')}/messages", json={"text": "hello"}, headers=bob
                    )
                    if hello.status_code != 503:
                        break
                    await asyncio.sleep(0.1)
                assert hello.status_code == 200, hello.text
                again = await other.post(f"/chat/sessions/{session}/messages", json={"text": "hi"}, headers=alice)
                assert again.status_code == 409, again.text
                decision = {"approval_id": chunk["approvalId"], "choice": "approve"}
                answered = await other.post(f"/chat/sessions/{session}/decisions", json=decision, headers=alice)
                assert answered.status_code == 204, answered.text
        assert (await other.get("/accounts")).json() == {"A": 90, "B": 10}
        # and let go when the run ended
        text = await _approve_and_read(other, first, session, "move 5 from A to B", alice)
        assert text.startswith("Done: moved 5 from A to B")


@pytest.mark.long
async def test_an_oversize_message_is_refused_never_cut_and_a_test_reads_the_chat_in_a_few_lines(
    postgres: PostgresServer,
) -> None:
    async with bank_chat(postgres) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        alice = ChatClient(client, "/chat/sessions", headers={"x-user": "alice"})
        session = await alice.open()
        long = "move 10 from A to B" + " please" * 300  # 2119 characters: the chat takes 2000
        said = {
            "id": "alice-long",
            "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": long}]}],
        }
        for refused in (
            await client.post(f"/chat/sessions/{session}/messages", json={"text": long}, headers=alice.headers),
            await client.post("/chat/sessions", json={**said, "trigger": "submit-message"}, headers=alice.headers),
        ):
            assert refused.status_code == 413, refused.text
            assert "the message is 2,119 characters long" in refused.json()["error"]
        assert (await client.get("/accounts")).json() == {"A": 100, "B": 0, "C": 50, "D": 0}  # nothing ran

        # the chat, read and answered by the testing kit: the page's way, then the AI SDK's
        reply = await alice.send(session, "move 10 from A to B", answer=lambda question: "approve")
        assert reply.text.startswith("Done: moved 10 from A to B: txn_")
        assert [question.tool for question in reply.questions] == ["commit"]
        assert [(call.tool, call.state) for call in reply.tool_calls] == [
            ("cashier", "done"),
            ("begin", "done"),
            ("transfer", "done"),
            ("commit", "done"),
        ]
        denied = await alice.send("alice-sdk", "move 5 from C to D", answer=lambda q: ("deny", "no"), via="sdk")
        assert denied.text.startswith("The transfer was not made") and denied.tool_call("commit").state == "denied"
        assert (await client.get("/accounts")).json() == {"A": 90, "B": 10, "C": 50, "D": 0}


@pytest.mark.long
async def test_a_reload_on_another_process_finds_the_run_and_its_question_and_a_dead_process_s_run_is_gone(
    two_processes: tuple[str, str, str],
) -> None:
    one, two, _ = two_processes
    alice = {"x-user": "alice"}
    async with (
        httpx.AsyncClient(base_url=one, timeout=30) as client,
        httpx.AsyncClient(base_url=two, timeout=30) as other,
    ):
        session = await _session(client, "alice")
        message = {"text": "move 10 from A to B"}
        async with client.stream("POST", f"/chat/sessions/{session}/messages", json=message, headers=alice) as sse:
            first = []
            async for chunk in chunks(sse):
                first.append(chunk)
                if chunk["type"] == "tool-approval-request":
                    break  # the page reloads, and the balancer sends it to the other process
        approval = first[-1]["approvalId"]
        started = first[0]["messageId"]

        # the other process: the conversation, its open question (live, in the run in flight), and the run's stream
        saved = (await other.get(f"/chat/sessions/{session}", headers=alice)).json()
        assert saved["running"] == started
        [question] = saved["pending"]
        assert (question["approval_id"], question["tool"], question["held"]) == (approval, "commit", "live")
        assert (await other.get(f"/chat/sessions/{session}/stream", headers={"x-user": "bob"})).status_code == 403
        async with other.stream("GET", f"/chat/sessions/{session}/stream?follow=true", headers=alice) as followed:
            replayed = []
            async for chunk in chunks(followed):
                replayed.append(chunk)
                if chunk["type"] == "tool-approval-request":
                    assert replayed == first  # the run's own stream, from its start
                    decision = {"approval_id": approval, "choice": "approve"}
                    answered = await other.post(f"/chat/sessions/{session}/decisions", json=decision, headers=alice)
                    assert answered.status_code == 204, answered.text
        text = "".join(chunk["delta"] for chunk in replayed if chunk["type"] == "text-delta")
        assert text.startswith("Done: moved 10 from A to B") and replayed[-1]["type"] == "finish"
        assert (await other.get("/accounts")).json() == {"A": 90, "B": 10}

        # the next run's process dies while its question waits: the other process no longer finds it, a reader
        # there is told, and the conversation takes a message again (its turn's lock went with the process)
        async with client.stream("POST", f"/chat/sessions/{session}/messages", json=message, headers=alice) as sse:
            async for chunk in chunks(sse):
                if chunk["type"] == "tool-approval-request":
                    break
        async with other.stream("GET", f"/chat/sessions/{session}/stream?follow=true", headers=alice) as followed:
            reading = chunks(followed)
            async for chunk in reading:
                if chunk["type"] == "tool-approval-request":
                    break
            PROCESSES[one].kill()
            rest = [chunk async for chunk in reading]
        assert [chunk["type"] for chunk in rest] == ["data-llm-do-approval", "error", "finish"]  # (its description)
        assert "stopped before it ended" in rest[1]["errorText"]
        saved = (await other.get(f"/chat/sessions/{session}", headers=alice)).json()
        assert saved["pending"] == [] and saved["running"] is None
        assert (await other.get(f"/chat/sessions/{session}/stream", headers=alice)).status_code == 204
        async with other.stream("POST", f"/chat/sessions/{session}/messages", json=message, headers=alice) as sse:
            async for chunk in chunks(sse):
                if chunk["type"] == "tool-approval-request":
                    decision = {"approval_id": chunk["approvalId"], "choice": "deny"}
                    denied = await other.post(f"/chat/sessions/{session}/decisions", json=decision, headers=alice)
                    assert denied.status_code == 204, denied.text
        assert (await other.get("/accounts")).json() == {"A": 90, "B": 10}  # the dead run's transaction rolled back
