"""A conversation's run from any web process: its stream read from the start or from after the chunk a reader had
(in one process, and in another through PostgreSQL), its questions listed and answered wherever they wait."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

from llm_do import PostgresHistoryStore, Runtime
from llm_do.testing import ChatClient, ScriptedModel, asgi_client
from llm_do.web.postgres_runs import PostgresRuns
from llm_do.web.runs import LocalRuns

from .test_chat_router import SENT, app_with, clerk, make_runtime, sending, serving


@pytest.fixture(autouse=True)
def _forget() -> None:
    SENT.clear()


WORDS = " ".join(f"w{number}" for number in range(60))


def long_then_send() -> ScriptedModel:
    """Sixty words streamed one by one, then a `send` to Ada (asked), then `Done.`."""
    return ScriptedModel(ModelResponse(parts=[TextPart(WORDS), ToolCallPart("send", {"to": "ada"})]), "Done.")


async def events(response: httpx.Response) -> list[tuple[int | None, dict[str, Any]]]:
    """Each server-sent event of a stream: its id (None when it has none) and its chunk, to `[DONE]`."""
    found: list[tuple[int | None, dict[str, Any]]] = []
    number: int | None = None
    async for line in response.aiter_lines():
        if line.startswith("id: "):
            number = int(line.removeprefix("id: "))
        elif line.startswith("data: "):
            data = line.removeprefix("data: ")
            if data == "[DONE]":
                break
            found.append((number, json.loads(data)))
            number = None
    return found


async def stream(client: httpx.AsyncClient, path: str, **options: Any) -> list[tuple[int | None, dict[str, Any]]]:
    async with client.stream("GET", path, **options) as response:
        assert response.status_code == 200, await response.aread()
        return await events(response)


async def asked(client: httpx.AsyncClient, conversation_id: str, text: str) -> list[tuple[int | None, dict[str, Any]]]:
    """The AI SDK's request for the person's message: its stream, to the question the run waits on."""
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}
    body = {"id": conversation_id, "messages": [message], "trigger": "submit-message"}
    async with client.stream("POST", "/chats", json=body) as response:
        assert response.status_code == 200, await response.aread()
        return await events(response)


def text(chunks: list[tuple[int | None, dict[str, Any]]]) -> str:
    return "".join(chunk["delta"] for _, chunk in chunks if chunk["type"] == "text-delta")


def deltas(chunks: list[tuple[int | None, dict[str, Any]]]) -> list[tuple[int | None, dict[str, Any]]]:
    return [(number, chunk) for number, chunk in chunks if chunk["type"] == "text-delta"]


async def test_a_reader_goes_on_after_the_last_chunk_it_had_even_once_the_deltas_it_had_were_merged() -> None:
    async with serving(long_then_send(), allow_anyone=True, runs=LocalRuns(keep=8)) as (client, _):
        first = await asked(client, "c1", "write to Ada")
        assert first[-1][1]["type"] == "finish" and text(first) == WORDS  # to the question, each word a delta
        numbers = [number for number, _ in first if number is not None]
        assert numbers == list(range(len(numbers)))  # every chunk numbered, from 0
        words = deltas(first)
        assert len(words) == 60
        cut, _ = words[19]  # the reader had twenty words when its connection dropped

        rest = await stream(client, "/chats/c1/stream", params={"seen": cut})
        assert text(words[:20]) + text(rest) == WORDS  # the rest, nothing twice
        assert len(deltas(rest)) == 1  # the words it lacked, merged since into one delta
        assert "start" not in [chunk["type"] for _, chunk in rest]
        assert "tool-approval-request" in [chunk["type"] for _, chunk in rest]
        by_header = await stream(client, "/chats/c1/stream", headers={"last-event-id": str(cut)})
        assert [chunk for _, chunk in by_header] == [chunk for _, chunk in rest]

        whole = await stream(client, "/chats/c1/stream")  # a reload: from the start, the words merged
        assert whole[0][1] == first[0][1] and text(whole) == WORDS and len(deltas(whole)) == 1
        last_seen = first[-2][0]  # the reader had everything up to the question: it reads on from there
        assert last_seen is not None
        approval = next(chunk for _, chunk in first if chunk["type"] == "tool-approval-request")
        params = {"seen": last_seen, "follow": "true"}
        async with client.stream("GET", "/chats/c1/stream", params=params) as reading:
            decision = {"approval_id": approval["approvalId"], "choice": "approve"}
            assert (await client.post("/chats/c1/decisions", json=decision)).status_code == 204
            after_all = await events(reading)
        assert min(number for number, _ in after_all if number is not None) > last_seen and text(after_all) == "Done."
        assert [chunk["type"] for _, chunk in after_all][:2] == ["data-llm-do-approval", "tool-output-available"]
        assert SENT == ["ada"]


@asynccontextmanager
async def two_processes(
    dsn: str, **options: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient, Runtime]]:
    """Two web processes of one service (each its runtime and its router) on one database; yields their clients
    and the second one's runtime."""
    async with (
        PostgresHistoryStore(dsn) as history,
        make_runtime(history_store=history) as one,
        make_runtime(history_store=history) as two,
    ):
        apps = [app_with(runtime, allow_anyone=True, database_url=dsn, **options) for runtime in (one, two)]
        async with asgi_client(apps[0]) as first, asgi_client(apps[1]) as other:
            yield first, other, two


async def test_another_process_streams_the_run_lists_its_question_and_takes_its_answer_the_sdks_way(dsn: str) -> None:
    with clerk.agent.override(model=long_then_send()):
        async with two_processes(dsn) as (first, other, runtime):
            started = await asked(first, "c1", "write to Ada")
            [approval] = [chunk for _, chunk in started if chunk["type"] == "tool-approval-request"]
            message_id = started[0][1]["messageId"]

            # the other process lists the question (live, in the run in flight there), and its runtime's inbox does
            saved = (await other.get("/chats/c1")).json()
            assert saved["running"] == message_id
            assert saved["messages"] == [
                {"id": f"{message_id}_prompt", "role": "user", "parts": [{"type": "text", "text": "write to Ada"}]}
            ]
            [listed] = saved["pending"]
            assert listed["approval_id"] == approval["approvalId"] and listed["tool_call_id"] == approval["toolCallId"]
            assert (listed["tool"], listed["args"], listed["held"], listed["run"]) == (
                "send",
                {"to": "ada"},
                "live",
                message_id,
            )
            assert listed["session_id"] == "c1" and listed["choices"] == ["approve", "approve_for_session", "deny"]
            assert "c1" not in runtime.sessions  # the other process has no session of it open
            [question] = await runtime.questions("c1")
            assert (question.approval_id, question.held, question.run) == (approval["approvalId"], "live", message_id)

            # its stream, read there: the run's own, from the start (the same chunks, the same numbers), or on
            replayed = await stream(other, "/chats/c1/stream")
            assert replayed == started
            cut = deltas(started)[29][0]
            rest = await stream(other, "/chats/c1/stream", params={"seen": cut})
            assert (
                text(deltas(started)[:30]) + text(rest) == WORDS
                and rest == started[started.index(deltas(started)[29]) + 1 :]
            )

            # the AI SDK's answer, sent to the other process: applied in the first, the rest streamed from there
            part = {
                "type": "tool-send",
                "toolCallId": approval["toolCallId"],
                "state": "approval-responded",
                "input": {"to": "ada"},
                "approval": {"id": approval["approvalId"], "approved": True},
            }
            assistant = {"id": message_id, "role": "assistant", "parts": [{"type": "step-start"}, part]}
            body = {"id": "c1", "messages": [assistant], "trigger": "submit-message", "messageId": message_id}
            async with other.stream("POST", "/chats", json=body) as response:
                answered = await events(response)
            assert answered[0][1] == {"type": "start", "messageId": message_id}
            assert text(answered) == "Done." and SENT == ["ada"]
            assert "tool-approval-request" not in [chunk["type"] for _, chunk in answered]
            assert (await other.get("/chats/c1/stream")).status_code == 204  # ended: nothing to resume, anywhere
            assert (await first.get("/chats/c1/stream")).status_code == 204
            assert (await other.get("/chats/c1")).json()["pending"] == [] and await runtime.questions("c1") == ()


async def test_a_session_answers_its_question_from_another_process_through_its_inbox(dsn: str) -> None:
    with clerk.agent.override(model=sending("ada")):
        async with two_processes(dsn) as (first, _, runtime):
            reply = await ChatClient(first).send("c1", "write to Ada")
            [question] = reply.open
            session = await runtime.session("c1")  # open in the other process, its run held by the first one
            assert session.pending == ()  # (none of its own live runs here)
            [waiting] = await session.questions()
            assert waiting.approval_id == question.approval_id and waiting.held == "live"
            assert waiting.request.tool == "send" and waiting.request.session_id == "c1"
            # followed from before the answer: a follow that starts after the run has ended gets 204
            async with first.stream("GET", "/chats/c1/stream", params={"follow": "true"}) as followed:
                assert followed.status_code == 200
                await session.answer(question.approval_id, "approve")  # relayed to the first process
                rest = await events(followed)
            assert text(rest) == "Done: sent to ada" and SENT == ["ada"]


async def test_a_log_that_merged_its_deltas_is_read_whole_in_another_process_and_from_a_reader_s_place(
    dsn: str,
) -> None:
    async with (
        PostgresRuns(dsn, keep=8) as one_runs,
        PostgresRuns(dsn, keep=8) as other_runs,
        PostgresHistoryStore(dsn) as history,
        make_runtime(history_store=history) as one,
        make_runtime(history_store=history) as two,
    ):
        apps = [
            app_with(runtime, allow_anyone=True, database_url=dsn, runs=runs)
            for runtime, runs in ((one, one_runs), (two, other_runs))
        ]
        with clerk.agent.override(model=long_then_send()):
            async with asgi_client(apps[0]) as first, asgi_client(apps[1]) as other:
                started = await asked(first, "c1", "write to Ada")
                cut = deltas(started)[9][0]
                whole = await stream(other, "/chats/c1/stream")
                assert text(whole) == WORDS and len(deltas(whole)) == 1  # merged, written again merged
                assert whole[0] == started[0] and whole[-1] == started[-1]
                rest = await stream(other, "/chats/c1/stream", params={"seen": cut})
                assert text(deltas(started)[:10]) + text(rest) == WORDS
                approval = next(chunk for _, chunk in started if chunk["type"] == "tool-approval-request")
                decision = {"approval_id": approval["approvalId"], "choice": "approve"}
                # followed from before the decision: a follow that starts after the run has ended gets 204
                async with other.stream("GET", "/chats/c1/stream", params={"follow": "true"}) as followed:
                    assert followed.status_code == 200
                    assert (await other.post("/chats/c1/decisions", json=decision)).status_code == 204
                    assert text(await events(followed)) == WORDS + "Done."


async def test_a_readers_place_that_names_no_chunk_of_the_stream_is_refused_at_once() -> None:
    async with serving(long_then_send(), allow_anyone=True) as (client, _):
        first = await asked(client, "c1", "write to Ada")
        last = first[-2][0]  # the question's chunk: the pause's `finish` has no number
        assert last is not None
        async with asyncio.timeout(60):  # a guard against a hang, not a measure: each answer comes at once
            for params, headers in (
                ({"seen": last + 1_000}, {}),  # past every chunk written: the run waits on its question
                ({}, {"last-event-id": str(10**6)}),
                ({"seen": 2**63}, {}),  # past what any stream numbers
                ({}, {"last-event-id": str(2**70)}),
                ({}, {"last-event-id": "9" * 5_000}),  # more digits than Python's int() reads by default
            ):
                refused = await client.get("/chats/c1/stream", params=params, headers=headers)
                assert refused.status_code == 400, refused.text
                assert "names no chunk of the stream" in refused.json()["error"]
            too_long = await client.get("/chats/c1/stream", params={"seen": "9" * 5_000})
            assert too_long.status_code == 422 and too_long.json()["detail"][0]["loc"] == ["query", "seen"]
            for header in (b"\xb2", b"-3", b"x"):  # a superscript two (Latin-1), a negative, a word: no chunk number
                odd = await client.get("/chats/c1/stream", headers={"last-event-id": header})  # type: ignore[dict-item]
                assert odd.status_code == 400, odd.text
                assert "Last-Event-ID" in odd.json()["error"]
        again = await stream(client, "/chats/c1/stream")  # the run goes on, its question still open
        assert text(again) == WORDS and again[-2] == first[-2]
        approval = next(chunk for _, chunk in first if chunk["type"] == "tool-approval-request")
        decision = {"approval_id": approval["approvalId"], "choice": "approve"}
        assert (await client.post("/chats/c1/decisions", json=decision)).status_code == 204


async def test_a_reader_in_another_process_whose_place_is_past_the_stream_is_told_when_the_run_ends(
    dsn: str,
) -> None:
    with clerk.agent.override(model=long_then_send()):
        async with two_processes(dsn) as (first, other, _):
            started = await asked(first, "c1", "write to Ada")
            approval = next(chunk for _, chunk in started if chunk["type"] == "tool-approval-request")
            refused = await other.get("/chats/c1/stream", params={"seen": 2**63})
            assert refused.status_code == 400 and "names no chunk of the stream" in refused.json()["error"]
            async with asyncio.timeout(60):  # a guard against a hang: the reading ends with the run
                # ahead of what the database holds (a reader of the run's own process may be): it waits for it
                async with other.stream("GET", "/chats/c1/stream", params={"seen": 10**6}) as ahead:
                    assert ahead.status_code == 200
                    decision = {"approval_id": approval["approvalId"], "choice": "approve"}
                    assert (await first.post("/chats/c1/decisions", json=decision)).status_code == 204
                    lines = [line async for line in ahead.aiter_lines() if line]
            assert lines == ["data: [DONE]"] and SENT == ["ada"]  # nothing it had not had; then the stream's end


async def test_decisions_racing_from_two_processes_one_wins_and_no_conversation_takes_anothers(dsn: str) -> None:
    """Ada's run lives in the first process and Bo's in the other. Bo's question, sent as Ada's conversation's or
    one with no run, is refused in either process and stays open; four answers to each question at once, from both
    processes: one applies, the others are refused, each letter sent once."""
    with clerk.agent.override(model=sending("ada", "bo")):
        async with two_processes(dsn) as (first, other, _):
            ada = await ChatClient(first).send("ada-chat", "write to Ada")
            bo = await ChatClient(other).send("bo-chat", "write to Bo")
            ada_question, bo_question = ada.open[0].approval_id, bo.open[0].approval_id
            for client in (first, other):
                smuggled = {"approval_id": bo_question, "choice": "approve"}
                refused = await client.post("/chats/ada-chat/decisions", json=smuggled)
                assert refused.status_code == 409 and ada_question in refused.json()["error"]
                assert (await client.post("/chats/idle/decisions", json=smuggled)).status_code == 404
                malformed = {"approval_id": "apr_\x00", "choice": "deny", "note": "no\x00"}  # text PostgreSQL refuses
                assert (await client.post("/chats/ada-chat/decisions", json=malformed)).status_code == 409
            for client, conversation, question in ((other, "ada-chat", ada_question), (first, "bo-chat", bo_question)):
                listed = (await client.get(f"/chats/{conversation}")).json()["pending"]
                assert [asked["approval_id"] for asked in listed] == [question]  # its own, still open
            approved: list[str] = []
            for conversation, question in (("ada-chat", ada_question), ("bo-chat", bo_question)):
                racing = [(first, "approve"), (other, "deny"), (other, "approve"), (first, "deny")]
                async with first.stream("GET", f"/chats/{conversation}/stream", params={"follow": "true"}) as rest:
                    assert rest.status_code == 200
                    answers = await asyncio.gather(
                        *(
                            client.post(
                                f"/chats/{conversation}/decisions", json={"approval_id": question, "choice": choice}
                            )
                            for client, choice in racing
                        )
                    )
                    said = text(await events(rest))
                statuses = [answer.status_code for answer in answers]
                assert sorted(statuses) == [204, 409, 409, 409], [answer.text for answer in answers]
                name = conversation.removesuffix("-chat")
                if racing[statuses.index(204)][1] == "approve":
                    approved.append(name)
                    assert said == f"Done: sent to {name}"
            assert approved == SENT  # each approved letter sent once, a denied one never
