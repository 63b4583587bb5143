"""The FastAPI + PostgreSQL example (examples/service): through its lifespan, in process and
behind a real uvicorn server, under concurrency, with client disconnects and pool overrides."""

from __future__ import annotations

import asyncio
import gc
import logging
import random
import re
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import uvicorn
from dependency_injector import providers
from fastapi import FastAPI, Request

from llm_do import tool
from llm_do.testing import asgi_client, track_leaks

from ..jobs_support import query
from ..postgres import PostgresServer

sys.path.insert(0, str(Path(__file__).parents[2] / "examples" / "service"))

from bank import ledger
from bank.app import create_app
from bank.toolsets import Audit, LedgerToolset
from bank.wiring import APPLICATION, Bank, open_pool

SERVICE = Path(__file__).resolve().parents[2] / "examples" / "service"

# -- databases and what PostgreSQL says about them ----------------------------------------------


async def _admin(postgres: PostgresServer, sql: str) -> None:
    conn = await asyncpg.connect(**postgres.connect_kwargs())  # type: ignore[arg-type]
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@asynccontextmanager
async def _fresh_database(postgres: PostgresServer) -> AsyncIterator[str]:
    name = postgres.new_database_name()
    await _admin(postgres, f'CREATE DATABASE "{name}"')
    try:
        yield postgres.dsn(name)
    finally:
        await _admin(postgres, f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def database(postgres: PostgresServer) -> Iterator[str]:
    """A database of this module's own; each test starts it without the accounts table."""
    name = postgres.new_database_name()
    asyncio.run(_admin(postgres, f'CREATE DATABASE "{name}"'))
    yield postgres.dsn(name)
    asyncio.run(_admin(postgres, f'DROP DATABASE "{name}" WITH (FORCE)'))


@pytest.fixture
async def other_database(postgres: PostgresServer) -> AsyncIterator[str]:
    async with _fresh_database(postgres) as dsn:
        yield dsn


@pytest.fixture
async def bank(database: str, monkeypatch: pytest.MonkeyPatch) -> Bank:
    """The example's container, configured from the environment as in production."""
    await query(database, "DROP TABLE IF EXISTS accounts, transfers")  # the app creates them at start-up
    monkeypatch.setenv("LLM_DO_DATABASE_URL", database)
    monkeypatch.delenv("LLM_DO_POOL_SIZE", raising=False)
    return Bank()


async def balances(dsn: str) -> dict[str, int]:
    return {row["name"]: row["balance"] for row in await query(dsn, "SELECT name, balance FROM accounts")}


async def idle_in_transaction(dsn: str) -> int:
    rows = await query(
        dsn,
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
    )
    return int(rows[0][0])


async def pool_connections(dsn: str) -> int:
    """Connections the example's pools hold to this database."""
    rows = await query(
        dsn,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1",
        APPLICATION,
    )
    return int(rows[0][0])


async def eventually(check: Callable[[], Awaitable[bool]], what: str, within: float = 20.0) -> None:
    """Wait until `check()` holds (PostgreSQL ends a closed connection's backend asynchronously)."""
    deadline = asyncio.get_running_loop().time() + within
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"still not true after {within}s: {what}")
        await asyncio.sleep(0.05)


async def no_pool_connections(dsn: str) -> None:
    async def none_left() -> bool:
        return await pool_connections(dsn) == 0

    await eventually(none_left, f"no connection of application {APPLICATION!r} is left")


async def seed(client: httpx.AsyncClient, **accounts: int) -> None:
    for name, balance in accounts.items():
        response = await client.post("/accounts", json={"name": name, "balance": balance})
        assert response.status_code == 201, response.text


def handle_of(audit: list[str]) -> str:
    match = re.fullmatch(r"begin (txn_[0-9a-f]{8})", audit[0])
    assert match, audit
    return match.group(1)


# -- in process, through the lifespan -------------------------------------------------------------


async def test_the_service_without_job_endpoints_transfers_and_never_loads_the_job_queue(
    bank: Bank, database: str
) -> None:
    async with asgi_client(create_app(bank, with_jobs=False)) as client:
        await seed(client, A=100, B=50)
        response = await client.post("/transfer", json={"reference": "solo", "source": "A", "target": "B", "amount": 5})
        assert response.status_code == 200, response.text
        assert (
            await client.post("/jobs/transfer", json={"reference": "j", "source": "A", "target": "B", "amount": 1})
        ).status_code == 404
    assert await balances(database) == {"A": 95, "B": 55}
    probe = (
        f"import sys; sys.path.insert(0, {str(SERVICE)!r}); import bank.app; bank.app.create_transfer_app(); "
        "print(sorted(name for name in ('procrastinate', 'psycopg', 'llm_do.jobs') if name in sys.modules))"
    )
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", probe, stdout=asyncio.subprocess.PIPE)
    out, _ = await process.communicate()
    assert process.returncode == 0 and out.decode().strip() == "[]"
    with pytest.raises(ValueError, match="with_jobs=False"):
        create_app(bank, jobs=object(), with_jobs=False)  # type: ignore[arg-type]


async def test_a_transfer_commits_and_answers_with_output_audit_and_usage(bank: Bank, database: str) -> None:
    async with asgi_client(create_app(bank)) as client:
        await seed(client, A=100, B=50)
        response = await client.post(
            "/transfer", json={"reference": "pay-1", "source": "A", "target": "B", "amount": 10}
        )
        assert (await client.get("/accounts")).json() == {"A": 90, "B": 60}

    assert response.status_code == 200
    body = response.json()
    txn = handle_of(body["audit"])
    assert body["audit"] == [f"begin {txn}", f"transfer 10 from A to B ref=pay-1 in {txn}", f"commit {txn}"]
    assert body["output"] == f"moved 10 from A to B: {txn} committed"
    assert body["reference"] == "pay-1"
    assert body["usage"]["requests"] == 4 and body["usage"]["tool_calls"] == 3
    assert await balances(database) == {"A": 90, "B": 60}


async def test_a_forgotten_transaction_is_rolled_back(bank: Bank, database: str) -> None:
    async with asgi_client(create_app(bank)) as client:
        await seed(client, A=100, B=50)
        transfer = {"reference": "pay-2", "source": "A", "target": "B", "amount": 10, "forget_commit": True}
        response = await client.post("/transfer", json=transfer)
        assert await idle_in_transaction(database) == 0

    assert response.status_code == 200
    audit = response.json()["audit"]
    txn = handle_of(audit)
    assert audit == [
        f"begin {txn}",
        f"transfer 10 from A to B ref=pay-2 in {txn}",
        f"rollback {txn} (never committed)",
    ]
    assert await balances(database) == {"A": 100, "B": 50}


@pytest.mark.parametrize(
    ("transfer", "status", "error"),
    [
        ({"source": "A", "target": "Z", "amount": 1}, 404, "no account named 'Z'; open it first (POST /accounts)"),
        ({"source": "A", "target": "B", "amount": 101}, 409, "account 'A' holds 100, less than the 101 to move"),
    ],
)
async def test_a_failing_tool_answers_with_a_json_error_and_the_audit(
    bank: Bank, database: str, transfer: dict[str, Any], status: int, error: str
) -> None:
    async with asgi_client(create_app(bank)) as client:
        await seed(client, A=100, B=50)
        response = await client.post("/transfer", json={"reference": "pay-3", **transfer})

    assert response.status_code == status
    body = response.json()
    txn = handle_of(body["audit"])
    what = f"transfer {transfer['amount']} from A to {transfer['target']} ref=pay-3 in {txn}"
    assert body == {
        "error": error,
        "audit": [f"begin {txn}", f"{what} refused: {error}", f"rollback {txn} (never committed)"],
    }
    assert await balances(database) == {"A": 100, "B": 50}
    assert await idle_in_transaction(database) == 0


class BrokenLedger(LedgerToolset):
    @tool
    async def transfer(self, txn: str, source: str, target: str, amount: int, reference: str) -> str:
        """Fails the way a bug would."""
        raise RuntimeError("internal detail the caller must not see")


async def test_an_unexpected_error_is_a_500_that_hides_its_details(bank: Bank, database: str) -> None:
    with bank.ledger.override(providers.Factory(BrokenLedger, pool=bank.pool, audit=bank.audit)):
        async with asgi_client(create_app(bank)) as client:
            await seed(client, A=100, B=50)
            response = await client.post(
                "/transfer", json={"reference": "r", "source": "A", "target": "B", "amount": 1}
            )

    assert response.status_code == 500
    body = response.json()
    assert "internal detail" not in response.text
    assert body["error"] == "the transfer failed (RuntimeError); see the server log"
    txn = handle_of(body["audit"])
    assert body["audit"] == [f"begin {txn}", f"rollback {txn} (never committed)"]


def _audit_shape(audit: list[str]) -> list[str]:
    """The audit without its handles and the balances it read (the two apps run one after the other)."""
    return [re.sub(r"holds \d+", "holds N", re.sub(r"txn_[0-9a-f]{8}", "txn", line)) for line in audit]


async def test_the_plain_twin_answers_the_mix_as_the_llm_do_app_does(bank: Bank, database: str) -> None:
    """The benchmark's baseline does the same work: same answers, audits and money for each kind."""
    from bank.plain import create_app as create_plain_app

    kinds = {
        "committed": ({"amount": 10}, 200),
        "failed": ({"amount": 10_000}, 409),
        "forgotten": ({"amount": 10, "forget_commit": True}, 200),
    }

    async def send_each_kind(client: httpx.AsyncClient, server: str) -> list[tuple[int, list[str]]]:
        answers = []
        for kind, (extra, _) in kinds.items():
            body = {"reference": f"{server}-{kind}", "source": "A", "target": "B", **extra}
            response = await client.post("/transfer", json=body)
            audit = [line.replace(server, "server") for line in response.json()["audit"]]
            answers.append((response.status_code, _audit_shape(audit)))
        return answers

    async with asgi_client(create_app(bank, with_jobs=False)) as client:  # creates the tables
        await seed(client, A=100, B=50)
        ours = await send_each_kind(client, "llm-do")
    async with asgi_client(create_plain_app()) as client:
        theirs = await send_each_kind(client, "plain")
    assert await idle_in_transaction(database) == 0
    assert [status for status, _ in ours] == [status for _, status in kinds.values()]
    assert theirs == ours
    assert await balances(database) == {"A": 80, "B": 70}  # one committed transfer of 10 from each app


async def test_a_commit_once_sent_finishes_when_its_caller_is_cancelled(bank: Bank, database: str) -> None:
    """`bank.ledger.finish_even_if_cancelled`, the commit both apps use: the caller's cancellation
    waits for the commit's outcome, then goes on."""
    async with asgi_client(create_app(bank, with_jobs=False)) as client:
        await seed(client, A=100, B=50)
    async with asynccontextmanager(open_pool)(database, 2) as pool:
        transaction = await ledger.Transaction.begin(pool)
        await ledger.transfer(transaction.conn, "A", "B", 7, "sent-then-left")
        recorded: list[str] = []

        async def commit_and_record() -> None:
            await transaction.commit()
            recorded.append("commit")  # what the toolset's audit does once the commit has answered

        caller = asyncio.ensure_future(ledger.finish_even_if_cancelled(commit_and_record()))
        await asyncio.sleep(0)  # the commit is on its way
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert caller.cancelled()
        assert recorded == ["commit"]  # the cancellation waited for the commit's answer
        assert pool.get_idle_size() == pool.get_size()  # and its connection is back in the pool
        assert await ledger.transferred(pool, "sent-then-left")
    assert await balances(database) == {"A": 93, "B": 57}


async def test_a_bad_request_body_is_refused_before_any_run(bank: Bank) -> None:
    async with asgi_client(create_app(bank)) as client:
        response = await client.post("/transfer", json={"reference": "r", "source": "A", "target": "B", "amount": -5})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "amount"]


async def test_200_concurrent_transfers_conserve_money_and_each_gets_its_own_audit(bank: Bank, database: str) -> None:
    names = ["A", "B", "C", "D", "E"]
    rng = random.Random(20)
    transfers = []
    for number in range(200):
        source, target = rng.sample(names, 2)
        transfers.append(
            {
                "reference": f"ref-{number:03d}",
                "source": source,
                "target": target,
                "amount": rng.randint(1, 300),
                "forget_commit": number % 10 == 0,
            }
        )

    with track_leaks() as leaks:
        async with asgi_client(create_app(bank)) as client:
            await seed(client, **dict.fromkeys(names, 1000))
            pool = await bank.pool()
            responses = await asyncio.gather(*(client.post("/transfer", json=t) for t in transfers))
            assert await idle_in_transaction(database) == 0
            assert not pool.is_closing()
            # The pool lives on, and so do callbacks armed inside the runs with copies of the runs'
            # contexts (each connection's socket reader and idle timer): they keep nothing of any run.
            leaks.assert_no_leaks()
    assert pool.is_closing()  # the runtime closed the pool at shutdown ...
    await no_pool_connections(database)  # ... and PostgreSQL saw every connection go

    expected = dict.fromkeys(names, 1000)
    handles = set()
    for transfer, response in zip(transfers, responses, strict=True):
        assert response.status_code in (200, 409), response.text
        audit = response.json()["audit"]
        txn = handle_of(audit)
        handles.add(txn)
        moved = f"transfer {transfer['amount']} from {transfer['source']} to {transfer['target']}"
        moved += f" ref={transfer['reference']} in {txn}"
        if response.status_code == 409:
            assert audit[1].startswith(f"{moved} refused: account {transfer['source']!r} holds ")
            assert audit[2:] == [f"rollback {txn} (never committed)"]
        elif transfer["forget_commit"]:
            assert audit[1:] == [moved, f"rollback {txn} (never committed)"]
        else:
            assert audit[1:] == [moved, f"commit {txn}"]
            expected[transfer["source"]] -= transfer["amount"]
            expected[transfer["target"]] += transfer["amount"]
    assert len(handles) == 200  # no run saw another's transaction
    final = await balances(database)
    assert sum(final.values()) == 5000
    assert final == expected  # exactly the transfers answered as committed


# -- a real uvicorn server --------------------------------------------------------------------------


@asynccontextmanager
async def served(app: FastAPI) -> AsyncIterator[str]:
    """Serve `app` with uvicorn on a free loopback port, in this event loop; yield its base URL."""
    # The server keeps an idle connection longer than httpx's client (5 s): with both at 5 s, a client reusing a
    # connection just as the server closes it fails with ReadError (seen under load, after a pause of 5 s).
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", timeout_graceful_shutdown=10, timeout_keep_alive=30
    )
    server = uvicorn.Server(config)  # a request still running 10 s after should_exit is cancelled
    task = asyncio.create_task(server.serve())
    try:
        await eventually(_started(server, task), "uvicorn started")
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


def _started(server: uvicorn.Server, task: asyncio.Task[None]) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        if task.done():
            task.result()
            raise AssertionError("uvicorn stopped during start-up")
        return server.started

    return check


async def test_through_a_real_uvicorn_server(bank: Bank, database: str) -> None:
    async with served(create_app(bank)) as url, httpx.AsyncClient(base_url=url) as client:
        await seed(client, A=100, B=50)
        response = await client.post("/transfer", json={"reference": "u-1", "source": "B", "target": "A", "amount": 50})
        pool = await bank.pool()
        assert response.status_code == 200, response.text
        assert response.json()["output"].startswith("moved 50 from B to A: txn_")
    assert pool.is_closing()
    assert await balances(database) == {"A": 150, "B": 0}
    await no_pool_connections(database)


async def test_uvicorn_does_not_cancel_an_endpoint_whose_client_left() -> None:
    """Why the example watches for disconnects itself (uvicorn 0.54, h11)."""
    reached, survived = asyncio.Event(), asyncio.Event()
    app = FastAPI()

    @app.post("/wait")
    async def wait(request: Request) -> dict[str, str]:
        reached.set()
        while (await request.receive())["type"] != "http.disconnect":
            pass
        for _ in range(3):
            await asyncio.sleep(0)  # a cancellation from the server would land here
        survived.set()
        return {}

    async with served(app) as url, httpx.AsyncClient(base_url=url) as client:
        request = asyncio.create_task(client.post("/wait", json={}))
        await asyncio.wait_for(reached.wait(), 20)
        request.cancel()  # the client gives up and closes its connection
        with suppress(asyncio.CancelledError):
            await request
        await asyncio.wait_for(survived.wait(), 20)


class StallingLedger(LedgerToolset):
    """Moves the money, then waits forever before the model can commit."""

    def __init__(self, pool: ledger.Pool, audit: Audit, reached: asyncio.Event, cancelled: asyncio.Event) -> None:
        super().__init__(pool, audit)
        self.reached, self.cancelled = reached, cancelled

    @tool
    async def transfer(self, txn: str, source: str, target: str, amount: int, reference: str) -> str:
        """Move, then stall."""
        moved = await super().transfer(txn, source, target, amount, reference)
        self.reached.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return moved


async def test_a_client_that_disconnects_cancels_the_run_and_rolls_back(
    bank: Bank, database: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bank")
    reached, cancelled = asyncio.Event(), asyncio.Event()
    stalling = providers.Factory(StallingLedger, pool=bank.pool, audit=bank.audit, reached=reached, cancelled=cancelled)
    with bank.ledger.override(stalling):
        async with served(create_app(bank)) as url, httpx.AsyncClient(base_url=url) as client:
            await seed(client, A=100, B=50)
            transfer = {"reference": "gone-1", "source": "A", "target": "B", "amount": 30}
            request = asyncio.create_task(client.post("/transfer", json=transfer))
            await asyncio.wait_for(reached.wait(), 20)
            assert await idle_in_transaction(database) == 1  # the transfer is made, not committed
            request.cancel()  # the client gives up and closes its connection
            with suppress(asyncio.CancelledError):
                await request
            await asyncio.wait_for(cancelled.wait(), 20)  # the server cancelled the run

            async def logged() -> bool:
                return any("gone-1 cancelled" in record.getMessage() for record in caplog.records)

            await eventually(logged, "the endpoint logged the cancelled run")
            assert await idle_in_transaction(database) == 0
            assert await balances(database) == {"A": 100, "B": 50}

    (message,) = [record.getMessage() for record in caplog.records if "gone-1 cancelled" in record.getMessage()]
    assert "ref=gone-1" in message and "(never committed)" in message  # the run's audit, from run_report


# -- overriding the pool ----------------------------------------------------------------------------


def recording_pool(opened: list[ledger.Pool]) -> Callable[[str, int], AsyncIterator[ledger.Pool]]:
    async def pool(dsn: str, size: int) -> AsyncIterator[ledger.Pool]:
        async with asynccontextmanager(open_pool)(dsn, size) as made:
            opened.append(made)
            yield made

    return pool


async def test_a_pool_overridden_before_start_up_is_used_and_closed(
    bank: Bank, database: str, other_database: str
) -> None:
    opened: list[ledger.Pool] = []
    with bank.pool.override(providers.Resource(recording_pool(opened), dsn=other_database, size=2)):
        async with asgi_client(create_app(bank)) as client:
            assert len(opened) == 1  # opened at start-up, not by the first request
            await seed(client, A=100, B=50)
            response = await client.post(
                "/transfer", json={"reference": "o", "source": "A", "target": "B", "amount": 1}
            )
            assert response.status_code == 200, response.text
    assert opened[0].is_closing()
    assert await balances(other_database) == {"A": 99, "B": 51}
    assert (await query(database, "SELECT to_regclass('accounts') AS t"))[0]["t"] is None  # never opened
    await no_pool_connections(other_database)


async def test_a_pool_overridden_after_start_up_is_closed_when_the_runtime_closes(
    bank: Bank, database: str, other_database: str
) -> None:
    opened: list[ledger.Pool] = []
    async with asgi_client(create_app(bank)) as client:
        original = await bank.pool()
        await seed(client, A=100, B=50)
        with bank.pool.override(providers.Resource(recording_pool(opened), dsn=other_database, size=2)):
            await seed(client, A=10, B=0)  # into the other database, through the overriding pool
            response = await client.post(
                "/transfer", json={"reference": "o", "source": "A", "target": "B", "amount": 1}
            )
            assert response.status_code == 200, response.text
        assert len(opened) == 1 and not opened[0].is_closing()
    assert original.is_closing()
    assert opened[0].is_closing()  # shut down with the runtime, though the override had ended
    assert await balances(other_database) == {"A": 9, "B": 1}
    assert await balances(database) == {"A": 100, "B": 50}
    await no_pool_connections(database)
    await no_pool_connections(other_database)


# -- memory under the realistic mix -----------------------------------------------------------------


def _mixed_transfer(number: int) -> tuple[dict[str, Any], int]:
    """The mix of the service benchmark: of ten transfers, one fails mid-transaction (more than the
    balance: the rows are locked, then refused, 409) and one forgets to commit (rolled back, 200)."""
    names = ["A", "B", "C"]
    kind = number % 10
    transfer: dict[str, Any] = {
        "reference": f"mix-{number}",
        "source": names[number % 3],
        "target": names[(number + 1) % 3],
        "amount": 10**9 if kind == 3 else 1,
        "forget_commit": kind == 7,
    }
    return transfer, 409 if kind == 3 else 200


async def _forget_cancelled_timers() -> None:
    """Let asyncio drop the cancelled timers it still holds (it purges them all once more than half of
    its timers are cancelled): each holds the context it was armed in. What stays alive after this
    is held by live objects and live timers only, whose number does not depend on the run count."""
    loop = asyncio.get_running_loop()
    for timer in [loop.call_later(3600, _never) for _ in range(1000)]:
        timer.cancel()
    await asyncio.sleep(0)
    for _ in range(3):
        gc.collect()
        await asyncio.sleep(0)


def _never() -> None:
    raise AssertionError("a cancelled timer ran")


def _alive_by_type() -> Counter[str]:
    gc.collect()
    return Counter(f"{type(obj).__module__}.{type(obj).__qualname__}" for obj in gc.get_objects())


async def test_runs_of_the_mix_leave_nothing_that_grows_with_their_number(bank: Bank, database: str) -> None:
    """With the real asyncpg pool (whose idle and statement-cache timers keep context snapshots of
    the runs that armed them), the objects alive after 40 and after 140 runs of the mix are the same,
    type by type."""
    statuses: Counter[int] = Counter()
    async with asgi_client(create_app(bank)) as client:
        await seed(client, A=10_000, B=10_000, C=10_000)

        async def runs(numbers: range) -> None:
            for number in numbers:
                transfer, expected = _mixed_transfer(number)
                response = await client.post("/transfer", json=transfer)
                assert response.status_code == expected, response.text
                statuses[response.status_code] += 1

        await runs(range(40))  # every kind of run, every statement prepared on the connection
        await _forget_cancelled_timers()
        before = _alive_by_type()
        await runs(range(40, 140))
        await _forget_cancelled_timers()
        after = _alive_by_type()
        after[f"{Counter.__module__}.{Counter.__qualname__}"] -= 1  # `before` is one of them
        held = [obj for obj in gc.get_objects() if isinstance(obj, LedgerToolset | Audit | ledger.Transaction)]
        assert held == []

    grown = {kind: after[kind] - before[kind] for kind in after if after[kind] > before[kind]}
    assert grown == {}
    assert statuses == {200: 126, 409: 14}
    assert sum((await balances(database)).values()) == 30_000
