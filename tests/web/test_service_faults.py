"""The bank service (examples/service) when things break under it: the database restarted or its
backends ended, clients leaving mid-request, a shell program killed from outside mid-call.

The load tests are the fault benchmark (benchmarks/bench_faults.py) at a small size, on the suite's
throwaway PostgreSQL behind a real uvicorn server; the others make one fault happen at a known
point of a run.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from dependency_injector import providers

from llm_do import tool
from llm_do.testing import asgi_client

from ..jobs_support import query
from ..postgres import PostgresServer

sys.path.insert(0, str(Path(__file__).parents[2] / "examples" / "service"))
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import bench_faults
from bank import ledger
from bank.app import create_app
from bank.toolsets import Audit, LedgerToolset
from bank.wiring import Bank

REQUESTS, IN_FLIGHT = 200, 20


# -- under load, behind uvicorn ---------------------------------------------------------------------


def _holds(outcome: bench_faults.Outcome) -> None:
    assert outcome.other_failures == 0, outcome.failures
    assert outcome.money_conserved
    assert outcome.committed_equals_successes, outcome.notes
    assert outcome.idle_in_transaction == 0
    assert outcome.successes + outcome.clear_errors + outcome.disconnected == outcome.requests


async def test_a_restart_of_postgresql_mid_load_loses_nothing_and_the_service_serves_again(
    postgres: PostgresServer,
) -> None:
    outcome = await bench_faults.restart(postgres, REQUESTS, IN_FLIGHT, pool_size=10)
    _holds(outcome)
    assert outcome.clear_errors + outcome.retried > 0, "the restart hit no request: the test tested nothing"
    assert outcome.recovery is not None, "no transfer succeeded after the server was back"


async def test_backends_terminated_mid_load_lose_nothing(postgres: PostgresServer) -> None:
    outcome = await bench_faults.terminations(postgres, REQUESTS, IN_FLIGHT, count=8, pool_size=10)
    _holds(outcome)
    assert "8 backends terminated" in outcome.notes[0], outcome.notes


@pytest.mark.long
async def test_clients_leaving_mid_request_cancel_their_runs_and_roll_back(postgres: PostgresServer) -> None:
    outcome = await bench_faults.disconnects(postgres, REQUESTS, IN_FLIGHT, count=30, pool_size=10)
    _holds(outcome)
    assert outcome.disconnected > 0 and outcome.cancelled > 0, outcome.notes


async def test_a_shell_program_killed_from_outside_leaves_no_orphan() -> None:
    outcome = await bench_faults.shell_kills(3)
    assert outcome.orphans == 0
    assert outcome.clear_errors == 3, outcome.failures


# -- one fault at a known point of a run -------------------------------------------------------------


class PausingLedger(LedgerToolset):
    """Waits before its first `pause_before` tool of each of the first `times` transactions."""

    def __init__(
        self, pool: ledger.Pool, audit: Audit, paused: asyncio.Queue[int], go: asyncio.Queue[None], times: int
    ) -> None:
        super().__init__(pool, audit)
        self.paused, self.go, self.times = paused, go, times

    async def _pause(self, txn: str) -> None:
        if self.times > 0:
            self.times -= 1
            await self.paused.put(await self.txns.get(txn).conn.fetchval("SELECT pg_backend_pid()"))
            await self.go.get()

    @tool
    async def transfer(self, txn: str, source: str, target: str, amount: int, reference: str) -> str:
        """Pause, then move."""
        await self._pause(txn)
        return await super().transfer(txn, source, target, amount, reference)


class PausingBeforeCommit(PausingLedger):
    @tool
    async def transfer(self, txn: str, source: str, target: str, amount: int, reference: str) -> str:
        """Move without pausing."""
        return await LedgerToolset.transfer(self, txn, source, target, amount, reference)

    @tool
    async def commit(self, txn: str) -> str:
        """Pause, then commit."""
        await self._pause(txn)
        return await super().commit(txn)


@pytest.fixture
async def database(postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    name = postgres.new_database_name()
    await query(postgres.dsn(), f'CREATE DATABASE "{name}"')
    monkeypatch.setenv("LLM_DO_DATABASE_URL", postgres.dsn(name))
    monkeypatch.delenv("LLM_DO_POOL_SIZE", raising=False)
    yield postgres.dsn(name)
    await query(postgres.dsn(), f'DROP DATABASE "{name}" WITH (FORCE)')


async def _transfer_with_terminations(
    database: str, kind: type[PausingLedger], terminations: int
) -> tuple[httpx.Response, list[int]]:
    """One transfer whose first `terminations` transactions lose their backend at the pause."""
    bank = Bank()
    paused: asyncio.Queue[int] = asyncio.Queue()
    go: asyncio.Queue[None] = asyncio.Queue()
    pausing = providers.Factory(kind, pool=bank.pool, audit=bank.audit, paused=paused, go=go, times=terminations)
    ended = []
    with bank.ledger.override(pausing):
        async with asgi_client(create_app(bank)) as client:
            for name, balance in (("A", 100), ("B", 50)):
                assert (await client.post("/accounts", json={"name": name, "balance": balance})).status_code == 201
            body = {"reference": "pay-1", "source": "A", "target": "B", "amount": 10}
            request = asyncio.create_task(client.post("/transfer", json=body))
            for _ in range(terminations):
                pid = await asyncio.wait_for(paused.get(), 20)
                rows = await query(database, "SELECT pg_terminate_backend($1) AS done", pid)
                assert rows[0]["done"]
                ended.append(pid)
                await go.put(None)
            response = await asyncio.wait_for(request, 30)
    return response, ended


async def _state(database: str) -> tuple[dict[str, int], list[str], int]:
    balances = {row["name"]: row["balance"] for row in await query(database, "SELECT name, balance FROM accounts")}
    references = [row["reference"] for row in await query(database, "SELECT reference FROM transfers")]
    idle = await query(
        database,
        "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database()"
        " AND state LIKE 'idle in transaction%'",
    )
    return balances, references, int(idle[0]["n"])


def _txns(audit: list[str]) -> list[str]:
    return [match.group(1) for line in audit if (match := re.fullmatch(r"begin (txn_[0-9a-f]{8})", line))]


async def test_a_backend_ended_under_a_tool_is_a_tool_error_and_the_teller_begins_again(database: str) -> None:
    response, _ = await _transfer_with_terminations(database, PausingLedger, terminations=1)

    assert response.status_code == 200, response.text
    audit = response.json()["audit"]
    first, second = _txns(audit)
    assert audit[0] == f"begin {first}"
    moved = f"transfer 10 from A to B ref=pay-1 in {first}"
    assert audit[1].startswith(f"{moved} failed: the database connection was lost (")
    assert audit[1].endswith(f"{first} is gone and nothing in it was committed: call begin to start again.")
    assert audit[2:] == [f"begin {second}", f"transfer 10 from A to B ref=pay-1 in {second}", f"commit {second}"]
    assert await _state(database) == ({"A": 90, "B": 60}, ["pay-1"], 0)


async def test_a_commit_whose_backend_ended_is_looked_up_and_said_not_committed(database: str) -> None:
    response, _ = await _transfer_with_terminations(database, PausingBeforeCommit, terminations=1)

    assert response.status_code == 200, response.text
    audit = response.json()["audit"]
    first, second = _txns(audit)
    assert audit[2].startswith(f"commit {first} failed: the database connection was lost (")
    assert audit[2].endswith(f"{first} was not committed and is gone: call begin to start again.")
    assert audit[3:] == [f"begin {second}", f"transfer 10 from A to B ref=pay-1 in {second}", f"commit {second}"]
    assert await _state(database) == ({"A": 90, "B": 60}, ["pay-1"], 0)


async def test_when_the_database_fails_twice_the_caller_gets_a_503_and_nothing_moves(database: str) -> None:
    response, _ = await _transfer_with_terminations(database, PausingLedger, terminations=2)

    assert response.status_code == 503
    body = response.json()
    assert body["error"].startswith("the transfer was not made, the database is unavailable; retry later. transfer")
    assert body["error"].endswith("is gone and nothing in it was committed: call begin to start again.")
    assert len(_txns(body["audit"])) == 2
    assert await _state(database) == ({"A": 100, "B": 50}, [], 0)


async def test_a_reference_moves_money_once(database: str) -> None:
    async with asgi_client(create_app(Bank())) as client:
        for name, balance in (("A", 100), ("B", 50)):
            assert (await client.post("/accounts", json={"name": name, "balance": balance})).status_code == 201
        body = {"reference": "pay-1", "source": "A", "target": "B", "amount": 10}
        first = await client.post("/transfer", json=body)
        again = await client.post("/transfer", json=body)

    assert first.status_code == 200
    assert again.status_code == 409
    assert again.json()["error"] == "a transfer with reference 'pay-1' was already made; nothing more was moved"
    assert await _state(database) == ({"A": 90, "B": 60}, ["pay-1"], 0)
