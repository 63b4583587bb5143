"""The bank example's transfer jobs: the app defers them (`POST /jobs/transfer`), two real
`llm-do worker` processes run them, one is SIGKILLed mid-load; every job is accounted for and each
transfer is made exactly once (its reference is the idempotency key)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from llm_do.jobs import JobQueue

from ..jobs_support import ROOT, Worker, eventually, fresh_database, wait_for_workers
from ..journal_app import parking
from ..postgres import PostgresServer
from ..tiers import sized
from .test_service import served

from bank.app import create_app  # isort: skip  (examples/service is on sys.path via test_service)
from bank.wiring import Bank  # isort: skip

ACCOUNTS = [f"acct{n}" for n in range(10)]
START = 1_000
WORKER_ARGS = ("--app-dir", str(ROOT / "examples" / "service"))


@pytest.fixture
async def database(postgres: PostgresServer) -> AsyncIterator[str]:
    async with fresh_database(postgres) as dsn:
        yield dsn


@pytest.fixture
async def service(database: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    """The app behind uvicorn on loopback, with the accounts opened."""
    monkeypatch.setenv("LLM_DO_DATABASE_URL", database)
    async with served(create_app(Bank())) as url, httpx.AsyncClient(base_url=url, timeout=60) as client:
        for name in ACCOUNTS:
            (await client.post("/accounts", json={"name": name, "balance": START})).raise_for_status()
        yield client


def workers(database: str, tmp_path: Path, count: int, concurrency: int) -> list[Worker]:
    env = {"LLM_DO_DATABASE_URL": database, "LLM_DO_POOL_SIZE": str(concurrency)}
    return [
        Worker(
            "bank.jobs:queue", database, tmp_path / f"worker{n}.log", concurrency=concurrency, env=env, args=WORKER_ARGS
        )
        for n in range(count)
    ]


def stop_all(started: list[Worker]) -> None:
    for worker in started:
        if worker.process.poll() is None:
            assert worker.stop() == 0, worker.output()


async def test_defer_read_and_cancel_through_the_endpoints(
    service: httpx.AsyncClient, database: str, tmp_path: Path
) -> None:
    missing = await service.get("/jobs/424242")
    assert missing.status_code == 404 and "no llm-do job with id 424242" in missing.json()["error"]
    assert (await service.delete("/jobs/424242")).status_code == 404
    body = {"reference": "twice", "source": "acct0", "target": "acct1", "amount": 7}
    first = (await service.post("/jobs/transfer", json=body)).json()
    second = (await service.post("/jobs/transfer", json=body)).json()  # the client sends it again
    queued = (await service.post("/jobs/transfer", json={**body, "reference": "never"})).json()
    cancelled = await service.delete(f"/jobs/{queued['id']}")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    started = workers(database, tmp_path, 1, 2)
    try:
        results = []
        for job in (first, second):

            async def done(job_id: int = job["id"]) -> bool:
                return (await service.get(f"/jobs/{job_id}")).json()["status"] in {"succeeded", "failed"}

            await eventually(done, f"job {job['id']} finished")
            results.append((await service.get(f"/jobs/{job['id']}")).json())
    finally:
        stop_all(started)
    assert [result["status"] for result in results] == ["succeeded", "succeeded"]
    outputs = sorted(result["output"] for result in results)
    assert outputs[1].startswith("moved 7 from acct0 to acct1")
    assert outputs[0] == "a transfer with reference 'twice' was already made; nothing more was moved"
    made = next(result for result in results if result["output"].startswith("moved"))
    assert [(call["entry"], call["depth"]) for call in made["calls"]] == [("transfer", 0), ("teller", 1)]
    assert made["usage"]["requests"] == 4
    balances = (await service.get("/accounts")).json()
    assert balances["acct0"] == START - 7 and balances["acct1"] == START + 7  # once, not twice
    gone = await service.delete(f"/jobs/{first['id']}")
    assert gone.status_code == 409 and "already ended (succeeded)" in gone.json()["error"]
    assert [job["id"] for job in (await service.get("/jobs", params={"status": "cancelled"})).json()] == [queued["id"]]
    bad = await service.get("/jobs", params={"status": "done"})
    assert bad.status_code == 400 and "unknown job status 'done'" in bad.json()["error"]


@pytest.mark.long
@pytest.mark.deep
async def test_hundreds_of_jobs_two_workers_one_sigkilled_every_job_accounted_for_and_money_conserved(
    service: httpx.AsyncClient, database: str, tmp_path: Path
) -> None:
    """150 jobs in `make test`, 500 in `make test-deep`, posted 50 at a time; a worker is killed after 40% of them."""
    total = sized(dev=150, deep=500)
    kill_after = total * 2 // 5 // 50 * 50  # the batch after which one worker is killed (200 of 500, 50 of 150)
    bodies: list[dict[str, Any]] = []
    for number in range(total):
        source, target = ACCOUNTS[number % 10], ACCOUNTS[(number * 3 + 1) % 10]
        if target == source:
            target = ACCOUNTS[(number + 1) % 10]
        if number % 10 == 9:
            target = "nobody"  # 10% fail: the account does not exist
        bodies.append({"reference": f"job-{number:03d}", "source": source, "target": target, "amount": 1 + number % 3})
    started = workers(database, tmp_path, 2, 10)
    try:
        await wait_for_workers(database, 2, started)
        ids: list[int] = []
        for batch in range(0, total, 50):
            answers = await asyncio.gather(
                *(service.post("/jobs/transfer", json=body) for body in bodies[batch : batch + 50])
            )
            ids.extend(answer.json()["id"] for answer in answers)
            if batch == kill_after:
                # more jobs running than one worker's concurrency: both workers are in the middle of jobs
                await eventually(lambda: _count(database, "doing", at_least=11), "both workers busy", within=60)
                started[0].kill()
        await eventually(lambda: _all_final(database), "every job final", within=120)
        records = [(await service.get(f"/jobs/{job_id}")).json() for job_id in ids]
    finally:
        stop_all(started)
    assert len(set(ids)) == total
    by_status = Counter(record["status"] for record in records)
    assert by_status == {"succeeded": total * 9 // 10, "failed": total // 10}, by_status
    for body, record in zip(bodies, records, strict=True):
        if body["target"] == "nobody":
            assert record["status"] == "failed" and record["error"] == (
                "AccountNotFound: no account named 'nobody'; open it first (POST /accounts)"
            ), record
        else:
            assert record["status"] == "succeeded" and record["outcome"] == "ok", record
    expected = dict.fromkeys(ACCOUNTS, START)
    for body in bodies:
        if body["target"] != "nobody":
            expected[body["source"]] -= body["amount"]
            expected[body["target"]] += body["amount"]
    balances = (await service.get("/accounts")).json()
    assert balances == expected  # each transfer exactly once: none lost, none twice
    assert sum(balances.values()) == START * len(ACCOUNTS)
    conn = await asyncpg.connect(database)
    try:
        made = await conn.fetchval("SELECT count(*) FROM transfers")
    finally:
        await conn.close()
    assert made == total * 9 // 10
    assert "queued again" in started[1].output(), "the survivor ran the killed worker's jobs again"


async def _count(database: str, status: str, at_least: int) -> bool:
    conn = await asyncpg.connect(database)
    try:
        found = await conn.fetchval("SELECT count(*) FROM procrastinate_jobs WHERE status = $1", status)
    finally:
        await conn.close()
    return int(found) >= at_least


async def _all_final(database: str) -> bool:
    conn = await asyncpg.connect(database)
    try:
        pending = await conn.fetchval("SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')")
    finally:
        await conn.close()
    return int(pending) == 0


async def test_a_parked_job_is_listed_and_decided_through_the_service(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service over a parking queue (tests/journal_app.py's): `GET /jobs/{id}/approvals` shows what the job
    waits on, `POST /jobs/{id}/approvals/{approval_id}` decides it, once."""
    monkeypatch.setenv("LLM_DO_DATABASE_URL", database)
    queue = JobQueue(database, entries=list(parking.entries.values()), queue=parking.queue_name, approvals="park")
    notes = tmp_path / "notes"
    worker = Worker("tests.journal_app:parking", database, tmp_path / "worker.log", concurrency=1)
    try:
        app = create_app(Bank(), queue, with_chat=False)
        async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=60) as client:
            job_id = await queue.defer("payer", json.dumps({"notes": str(notes), "amount": 5}))

            async def parked() -> bool:
                return (await client.get(f"/jobs/{job_id}")).json()["status"] == "awaiting_approval"

            await eventually(parked, "the job is parked")
            [question] = (await client.get(f"/jobs/{job_id}/approvals")).json()
            assert (question["chain"], question["tool"], question["args"]["amount"]) == (["payer"], "pay", 5)
            assert question["call_id"] == "call_1" and question["tool_call_id"]
            assert question["attachments"] == []  # the payment hands over no files
            url_of = f"/jobs/{job_id}/approvals/{question['approval_id']}"
            unknown = await client.post(f"/jobs/{job_id}/approvals/apr_nope", json={"choice": "approve"})
            assert unknown.status_code == 409 and "has no approval 'apr_nope'" in unknown.json()["error"]
            assert (await client.post("/jobs/424242/approvals/apr_x", json={"choice": "deny"})).status_code == 404
            assert (await client.post(url_of, json={"choice": "maybe"})).status_code == 422
            decided = await client.post(url_of, json={"choice": "approve"})
            assert decided.status_code == 200, decided.text  # queued again, and its workers woken: one may have it
            assert decided.json()["status"] in ("todo", "doing", "succeeded"), decided.text
            again = await client.post(url_of, json={"choice": "deny"})
            assert again.status_code == 409 and "already decided" in again.json()["error"]

            async def done() -> bool:
                return (await client.get(f"/jobs/{job_id}")).json()["status"] == "succeeded"

            await eventually(done, "the decided job succeeded")
            assert (await client.get(f"/jobs/{job_id}")).json()["output"] == "done: quote ok, step 1 ok, paid 5"
            assert (await client.get(f"/jobs/{job_id}/approvals")).json() == []
    finally:
        assert worker.stop() == 0, worker.output()
    assert notes.read_text().count("paid 5") == 1
