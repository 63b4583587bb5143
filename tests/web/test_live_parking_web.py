"""A deploy that loses nothing: two real uvicorn processes of tests/live_web_app.py and a real worker on one
PostgreSQL; `SIGTERM` to the process streaming two runs that wait for their people. The run that may park parks as a
job (its stream says so and ends whole), the one that cannot is denied (the model reads why); the process exits;
the parked question is answered through the other process by its own person only, and a worker finishes the run in
its session, paying nothing twice."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic_ai.messages import ModelResponse, TextPart

from llm_do import PostgresHistoryStore
from llm_do.jobs import JobQueue, LiveParking
from llm_do.testing import asgi_client
from llm_do.web import chat_router

from ..jobs_support import Worker, wait_for_workers
from ..journal_app import sent
from ..live_app import ENTRIES, QUEUE, live_runtime
from ..web_processes import PROCESSES, app_processes, chunks


def ask(notes: Path, amount: int) -> dict[str, str]:
    return {"text": json.dumps({"notes": str(notes), "amount": amount})}


def paid(notes: Path) -> list[str]:
    return [line for line in (notes.read_text().splitlines() if notes.exists() else []) if line.startswith("paid ")]


async def until_asked(stream: AsyncIterator[dict[str, Any]], seen: list[dict[str, Any]]) -> str:
    async for chunk in stream:
        seen.append(chunk)
        if chunk["type"] == "tool-approval-request":
            return str(chunk["approvalId"])
    raise AssertionError(f"the stream ended without a question: {seen}")


@pytest.mark.long
async def test_a_deploy_parks_the_runs_that_may_park_denies_the_others_and_a_worker_finishes_them(
    dsn: str, tmp_path: Path
) -> None:
    env = {"LLM_DO_JOBS_DATABASE_URL": dsn, "LLM_DO_JOBS_PARK_AFTER": "300"}  # only the deploy parks here
    alice, bob = {"x-user": "alice"}, {"x-user": "bob"}
    alice_notes, bob_notes = tmp_path / "alice", tmp_path / "bob"
    worker = Worker("tests.live_app:queue", dsn, tmp_path / "worker.log", concurrency=1)
    try:
        async with app_processes("tests.live_web_app:create_app", 2, env, probe="/health") as (one, two):
            await wait_for_workers(dsn, 1, [worker])
            first = httpx.AsyncClient(base_url=one, timeout=30)
            other = httpx.AsyncClient(base_url=two, timeout=30)
            async with first, other:
                alices: list[dict[str, Any]] = []
                bobs: list[dict[str, Any]] = []
                async with (
                    first.stream("POST", "/sessions/alice-1/messages", json=ask(alice_notes, 7), headers=alice) as a,
                    first.stream("POST", "/sessions/bob-1/messages?park=0", json=ask(bob_notes, 9), headers=bob) as b,
                ):
                    alice_chunks, bob_chunks = chunks(a), chunks(b)
                    approval = await until_asked(alice_chunks, alices)
                    await until_asked(bob_chunks, bobs)
                    stolen = await first.post(
                        "/sessions/alice-1/decisions", json={"approval_id": approval, "choice": "approve"}, headers=bob
                    )
                    assert stolen.status_code == 403
                    PROCESSES[one].send_signal(signal.SIGTERM)  # a deploy, while both wait for their people
                    alices.extend([chunk async for chunk in alice_chunks])
                    bobs.extend([chunk async for chunk in bob_chunks])
                exited = await asyncio.wait_for(PROCESSES[one].wait(), 30)
                assert exited in (0, -signal.SIGTERM)  # uvicorn raises the signal again once it has shut down

                # Alice's page: her question parked as a job, and a whole stream
                assert [c["type"] for c in alices][-1] == "finish"
                [told] = [c["data"] for c in alices if c["type"] == "data-llm-do-parked"]
                assert told["approval_ids"] == [approval] and told["session_id"] == "alice-1"
                # Bob's page: his question denied with the reason, the model's answer, a whole stream
                assert [c["type"] for c in bobs][-1] == "finish"
                [bob_denied] = [c["data"] for c in bobs if c["type"] == "data-llm-do-approval" and "why" in c["data"]]
                assert bob_denied["state"] == "denied" and "restarting" in bob_denied["why"]
                assert paid(alice_notes) == paid(bob_notes) == []

                # the parked question, through the other process: Alice's only
                assert (await other.get("/sessions/alice-1/pending", headers=bob)).status_code == 403
                listed = await other.get("/sessions/alice-1/pending", headers=alice)
                assert [item["approval_id"] for item in listed.json()] == [approval]
                refused = await other.post(
                    "/sessions/bob-1/decisions", json={"approval_id": approval, "choice": "approve"}, headers=bob
                )
                assert refused.status_code == 409 and "no parked question of session 'bob-1'" in refused.text
                decided = await other.post(
                    "/sessions/alice-1/decisions", json={"id": approval, "approved": True}, headers=alice
                )
                assert decided.status_code == 204, decided.text
                async with JobQueue(dsn, entries=ENTRIES, queue=QUEUE, approvals="park") as queue, asyncio.timeout(60):
                    record = await queue.wait(told["job_id"], interval=0.05)
                assert (record.status, record.session) == ("succeeded", "alice-1"), (record, worker.output())
    finally:
        stopped = worker.stop()
    assert stopped == 0, worker.output()
    assert paid(alice_notes) == ["paid 7"]
    assert sent(alice_notes) == {("payer", 0): 1, ("payer", 1): 1, ("payer", 2): 1, ("payer", 3): 1}
    async with PostgresHistoryStore(dsn) as store:
        history = (await store.load("alice-1")).messages
    final = history[-1]
    assert isinstance(final, ModelResponse) and final.parts == [TextPart("done: quote ok, step 1 ok, paid 7")]


async def test_a_decision_whose_ids_hold_a_nul_character_is_refused_as_unknown_with_parking(dsn: str) -> None:
    """A decision no live run waits on goes to the parked questions (PostgreSQL, whose text refuses NUL): one whose
    approval id holds a NUL character is a 404, as any unknown id, not a 500."""
    async with JobQueue(dsn, entries=ENTRIES, queue=QUEUE, approvals="park") as queue:
        await queue.apply_schema()
        async with live_runtime(dsn) as runtime, LiveParking(queue, runtime) as parking:
            app = FastAPI()
            app.include_router(
                chat_router(runtime, entry="payer", parking=parking, database_url=dsn, allow_anyone=True)
            )
            async with asgi_client(app) as client:
                for decision in (
                    {"approval_id": "apr_\x00", "choice": "approve"},
                    {"id": "apr_\x00", "approved": False, "reason": "no\x00"},
                ):
                    refused = await client.post("/chats/c1/decisions", json=decision)
                    assert refused.status_code == 404, refused.text
                    assert "not applied" in refused.json()["error"]
                assert (await client.get("/chats/c1")).json()["pending"] == []
