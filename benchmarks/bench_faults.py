"""Faults survived: the bank service (examples/service) under load while things break under it.

A throwaway PostgreSQL server (tests/postgres.py, unix socket only) and, for each scenario, a fresh
database and a fresh app served by an in-process uvicorn server on 127.0.0.1, driven over HTTP
with httpx (`--requests` transfers, `--concurrency` in flight, the scripted teller model):

- restart: PostgreSQL restarted in fast mode (`pg_ctl stop -m fast`, then `pg_ctl start`) once a
  third of the requests are answered;
- terminate: `pg_terminate_backend` on `--terminations` of the service's connections (its
  `application_name`), spread over the load by the requests answered;
- disconnect: `--disconnects` clients close their connection at a random point of their request;
- shell-kill: `--kills` calls of the built-in shell toolset whose program is SIGKILLed from outside
  mid-call (no database; an agent run per call through `Runtime.run`).

For each: successes (200, the audit shows the commit), clear errors (a JSON body with an `error`
the caller can act on: 404, 409, 503), other failures (anything else: a 500, a broken
connection, a timeout), whether money is conserved, whether the committed transfers (rows of
`transfers`) are exactly the successful ones (for disconnects: exactly the runs that committed,
from the server's side), the time from the server being back to the first success, connections
left idle in transaction, and orphaned processes. Bounded by request counts and timeouts.

    python benchmarks/bench_faults.py [--requests 2000] [--concurrency 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import uvicorn
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from starlette.types import ASGIApp, Message, Receive, Scope, Send

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT, ROOT / "examples" / "service"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bank.app import create_app  # noqa: E402
from bank.wiring import APPLICATION, Bank  # noqa: E402

from llm_do import AgentEntry, Runtime, RuntimeConfig  # noqa: E402
from llm_do.toolsets import ShellToolset  # noqa: E402
from tests.postgres import PostgresServer, temporary_postgres  # noqa: E402

__all__ = ["Outcome", "disconnects", "restart", "shell_kills", "terminations"]

ACCOUNTS = [f"acct{number:02d}" for number in range(20)]
START_BALANCE = 1_000_000
CLEAR_ERRORS = (404, 409, 503)
"""Statuses whose JSON `error` tells the caller what happened and what to do."""
RECOVERY_LIMIT = 5.0


@dataclass
class Outcome:
    """One scenario's row of the table."""

    scenario: str
    requests: int
    successes: int = 0
    retried: int = 0
    """Successes whose teller met a database fault and began again (part of `successes`)."""
    clear_errors: int = 0
    other_failures: int = 0
    disconnected: int = 0
    cancelled: int = 0
    """Runs the server cancelled because their client had left (answered 499 to nobody)."""
    money_conserved: bool | None = None
    committed_equals_successes: bool | None = None
    recovery: float | None = None
    """Seconds from the server being back (or the fault) to the first success after it."""
    idle_in_transaction: int | None = None
    orphans: int | None = None
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    """What each other failure was (the first few, for the report)."""

    @property
    def holds(self) -> bool:
        """Every guarantee the scenario checks held."""
        checks = [self.other_failures == 0, self.money_conserved, self.committed_equals_successes]
        checks += [self.idle_in_transaction in (None, 0), self.orphans in (None, 0)]
        if self.scenario == "restart":
            checks.append(self.recovery is not None and self.recovery <= RECOVERY_LIMIT)
        return all(check is not False for check in checks)


@dataclass
class Answer:
    """What the client got for one transfer."""

    reference: str
    status: int | None = None
    body: dict[str, Any] | None = None
    error: str | None = None
    finished: float = 0.0
    disconnected: bool = False

    @property
    def success(self) -> bool:
        return self.status == 200 and self.body is not None and _committed(self.body.get("audit"))

    @property
    def clear_error(self) -> bool:
        if self.status not in CLEAR_ERRORS or self.body is None:
            return False
        return isinstance(self.body.get("error"), str) and isinstance(self.body.get("audit"), list)


def _committed(audit: object) -> bool:
    return isinstance(audit, list) and any(isinstance(line, str) and line.startswith("commit txn_") for line in audit)


class ServerSide:
    """ASGI middleware: what the server answered to each transfer (by reference), read or not.

    A client that disconnected never reads its answer; the server's answer (its audit) says whether
    the run committed before it was cancelled.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.answers: dict[str, tuple[int, dict[str, Any]]] = {}
        self.in_flight = 0
        self.idle = asyncio.Event()
        self.idle.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/transfer":
            await self.app(scope, receive, send)
            return
        request = bytearray()
        response = bytearray()
        status = 0

        async def receiving() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                request.extend(message.get("body", b""))
            return message

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                response.extend(message.get("body", b""))
            await send(message)  # uvicorn drops it quietly if the client is gone

        self.in_flight += 1
        self.idle.clear()
        try:
            await self.app(scope, receiving, sending)
        finally:
            self.in_flight -= 1
            if not self.in_flight:
                self.idle.set()
            try:
                reference = json.loads(request)["reference"]
                self.answers[reference] = (status, json.loads(response))
            except (ValueError, KeyError, TypeError):
                pass


@asynccontextmanager
async def served(app: ASGIApp) -> AsyncIterator[str]:
    """Serve `app` with uvicorn on a free loopback port in this event loop; yield its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", timeout_graceful_shutdown=30)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("uvicorn stopped during start-up")
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start within 30 s")
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


async def _query(dsn: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn, server_settings={"application_name": "bench-faults-admin"})
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


@asynccontextmanager
async def bank_service(postgres: PostgresServer, pool_size: int) -> AsyncIterator[tuple[str, str, ServerSide]]:
    """A fresh database with the accounts, and the bank app on it behind uvicorn: (dsn, url, recorder)."""
    name = postgres.new_database_name()
    await _query(postgres.dsn(), f'CREATE DATABASE "{name}"')
    dsn = postgres.dsn(name)
    saved = {key: os.environ.get(key) for key in ("LLM_DO_DATABASE_URL", "LLM_DO_POOL_SIZE")}
    os.environ.update(LLM_DO_DATABASE_URL=dsn, LLM_DO_POOL_SIZE=str(pool_size))
    try:
        recorder = ServerSide(create_app(Bank()))
        async with served(recorder) as url:
            conn = await asyncpg.connect(dsn)
            try:
                await conn.executemany(
                    "INSERT INTO accounts (name, balance) VALUES ($1, $2)", [(a, START_BALANCE) for a in ACCOUNTS]
                )
            finally:
                await conn.close()
            yield dsn, url, recorder
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        await _query(postgres.dsn(), f'DROP DATABASE "{name}" WITH (FORCE)')


def transfers(requests: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    made = []
    for number in range(requests):
        source, target = rng.sample(ACCOUNTS, 2)
        made.append({"reference": f"ref-{seed}-{number:05d}", "source": source, "target": target, "amount": 1})
    return made


async def load(
    url: str,
    bodies: list[dict[str, Any]],
    concurrency: int,
    *,
    leave_after: dict[str, float] | None = None,
    answered: Callable[[int], None] | None = None,
) -> list[Answer]:
    """Send the transfers, `concurrency` at a time.

    A reference in `leave_after` disconnects after that fraction of the median time the requests
    answered so far took (1 s until 20 have been answered): at a random point of its request.
    """
    answers = [Answer(body["reference"]) for body in bodies]
    pending = iter(zip(bodies, answers, strict=True))
    done = 0
    took: list[float] = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60.0) as client:

        async def worker() -> None:
            nonlocal done
            for body, answer in pending:
                fraction = None if leave_after is None else leave_after.get(answer.reference)
                leave = None
                if fraction is not None:
                    leave = fraction * (statistics.median(took[-200:]) if len(took) >= 20 else 1.0)
                started = time.monotonic()
                try:
                    response = await asyncio.wait_for(client.post("/transfer", json=body), leave)
                except TimeoutError:  # the client gave up: its connection is closed mid-request
                    answer.disconnected = True
                except httpx.HTTPError as error:
                    answer.error = f"{type(error).__name__}: {error}"
                else:
                    answer.status = response.status_code
                    took.append(time.monotonic() - started)
                    try:
                        answer.body = response.json()
                    except ValueError:
                        answer.error = f"not JSON: {response.text[:200]!r}"
                answer.finished = time.monotonic()
                done += 1
                if answered is not None:
                    answered(done)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return answers


async def _settle(recorder: ServerSide, within: float = 60.0) -> None:
    """Wait until the server has answered every request it received (cancelled runs tear down first)."""
    try:
        await asyncio.wait_for(recorder.idle.wait(), within)
    except TimeoutError:
        raise RuntimeError(f"{recorder.in_flight} requests still running {within} s after the load") from None


async def _check(outcome: Outcome, dsn: str, answers: list[Answer], recorder: ServerSide) -> None:
    """Fill the counts and the database's side of the guarantees."""
    await _settle(recorder)
    for answer in answers:
        if answer.disconnected:
            outcome.disconnected += 1
        elif answer.success:
            outcome.successes += 1
            assert answer.body is not None
            outcome.retried += any(" failed: the database " in line for line in answer.body["audit"])
        elif answer.clear_error:
            outcome.clear_errors += 1
        else:
            outcome.other_failures += 1
            if len(outcome.failures) < 5:
                outcome.failures.append(f"{answer.reference}: {answer.status} {answer.error or answer.body}")
    rows = await _query(dsn, "SELECT sum(balance) AS total FROM accounts")
    outcome.money_conserved = rows[0]["total"] == START_BALANCE * len(ACCOUNTS)
    committed = {row["reference"] for row in await _query(dsn, "SELECT reference FROM transfers")}
    expected = {answer.reference for answer in answers if answer.success}
    for answer in answers:
        if answer.disconnected:  # the client never read it: the server's answer says what the run did
            _, body = recorder.answers.get(answer.reference, (0, {}))
            if _committed(body.get("audit")):
                expected.add(answer.reference)
    outcome.committed_equals_successes = committed == expected
    if committed != expected:
        outcome.notes.append(
            f"committed but not answered as such: {sorted(committed - expected)[:5]}; "
            f"answered but not committed: {sorted(expected - committed)[:5]}"
        )
    rows = await _query(
        dsn,
        "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database()"
        " AND state LIKE 'idle in transaction%'",
    )
    outcome.idle_in_transaction = int(rows[0]["n"])


async def restart(postgres: PostgresServer, requests: int, concurrency: int, pool_size: int = 20) -> Outcome:
    """(a) PostgreSQL restarted in fast mode once a third of the requests are answered."""
    outcome = Outcome("restart", requests)
    async with bank_service(postgres, pool_size) as (dsn, url, recorder):
        third = asyncio.Event()
        back: list[float] = []

        def answered(count: int) -> None:
            if count >= requests // 3:
                third.set()

        async def restarter() -> None:
            await third.wait()
            started = time.monotonic()
            await asyncio.to_thread(postgres.restart, "fast")
            back.append(time.monotonic())
            outcome.notes.append(f"the restart (pg_ctl stop -m fast, then start) took {back[0] - started:.2f} s")

        fault = asyncio.create_task(restarter())
        answers = await load(url, transfers(requests, 1), concurrency, answered=answered)
        await fault
        after = [answer.finished for answer in answers if answer.success and answer.finished > back[0]]
        outcome.recovery = min(after) - back[0] if after else None
        if not after:
            outcome.notes.append("no success after the server was back")
        await _check(outcome, dsn, answers, recorder)
    return outcome


async def terminations(
    postgres: PostgresServer, requests: int, concurrency: int, count: int = 20, pool_size: int = 20
) -> Outcome:
    """(b) `pg_terminate_backend` on `count` of the service's connections, spread over the load from a tenth of it
    on by the requests answered (not by time: a fast machine's load sees them all too)."""
    outcome = Outcome("terminate", requests)
    rng = random.Random(2)
    first = requests // 10
    marks = [first + (requests - first) * index // (count + 1) for index in range(count)]
    async with bank_service(postgres, pool_size) as (dsn, url, recorder):
        started = asyncio.Event()
        ended: list[float] = []
        progress = [0]

        def answered(done: int) -> None:
            progress[0] = done
            if done >= first:
                started.set()

        async def terminator() -> int:
            await started.wait()
            admin = await asyncpg.connect(dsn, server_settings={"application_name": "bench-faults-admin"})
            killed = 0
            try:
                while killed < count and not ended:
                    await asyncio.sleep(rng.uniform(0.005, 0.02))  # a random moment, once the load reached its mark
                    if progress[0] < marks[killed]:
                        continue
                    pids = await admin.fetch(
                        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                        " AND application_name = $1 AND state <> 'idle'",
                        APPLICATION,
                    )
                    if pids:
                        pid = rng.choice(pids)["pid"]
                        killed += bool(await admin.fetchval("SELECT pg_terminate_backend($1)", pid))
            finally:
                await admin.close()
            return killed

        fault = asyncio.create_task(terminator())
        answers = await load(url, transfers(requests, 2), concurrency, answered=answered)
        ended.append(time.monotonic())
        killed = await fault
        outcome.notes.append(f"{killed} backends terminated (busy ones: active or in a transaction)")
        if killed < count:
            outcome.notes.append(f"the load ended before {count} terminations")
        await _check(outcome, dsn, answers, recorder)
    return outcome


async def disconnects(
    postgres: PostgresServer, requests: int, concurrency: int, count: int = 200, pool_size: int = 20
) -> Outcome:
    """(c) `count` clients close their connection at a random point of their request."""
    outcome = Outcome("disconnect", requests)
    rng = random.Random(3)
    bodies = transfers(requests, 3)
    leaving = rng.sample(range(requests), count)
    async with bank_service(postgres, pool_size) as (dsn, url, recorder):
        leave_after = {bodies[index]["reference"]: rng.uniform(0.01, 1.0) for index in leaving}
        answers = await load(url, bodies, concurrency, leave_after=leave_after)
        await _check(outcome, dsn, answers, recorder)
        cancelled = [ref for ref in leave_after if recorder.answers.get(ref, (0, {}))[0] == 499]
        outcome.cancelled = len(cancelled)
        gone = [answer for answer in answers if answer.disconnected]
        committed_first = sum(_committed(recorder.answers.get(a.reference, (0, {}))[1].get("audit")) for a in gone)
        unseen = sum(a.reference not in recorder.answers for a in gone)
        outcome.notes.append(
            f"{len(gone)} of {count} clients left before their answer: {len(cancelled)} runs cancelled by the "
            f"server, {committed_first} had committed before the client left, {unseen} requests never reached "
            "the app"
        )
        open_txn = [
            ref
            for ref in cancelled
            if not any(
                line.startswith(("rollback txn_", "commit txn_")) for line in recorder.answers[ref][1].get("audit", [])
            )
            and any(line.startswith("begin txn_") for line in recorder.answers[ref][1].get("audit", []))
        ]
        if open_txn:
            outcome.notes.append(f"cancelled runs whose audit ends with a transaction open: {open_txn[:5]}")
            outcome.committed_equals_successes = False
    return outcome


def _killing_teller(command: list[str]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [
            part
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        ]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("run", {"command": command})])
        return ModelResponse(parts=[TextPart(f"{returns[-1].outcome}: {returns[-1].model_response_str()}")])

    return FunctionModel(respond, model_name="scripted-shell")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    status = Path(f"/proc/{pid}/status")
    try:
        return "\nState:\tZ" not in status.read_text()  # a zombie is dead, only not reaped yet
    except OSError:
        return False


async def _read_pid(path: Path, within: float = 20.0) -> int:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            return int(await asyncio.to_thread(path.read_text))
        except (OSError, ValueError):
            await asyncio.sleep(0.01)
    raise RuntimeError(f"{path} was not written within {within} s")


async def shell_kills(count: int) -> Outcome:
    """(d) `count` shell tool calls whose program is SIGKILLed from outside mid-call.

    The program (`sh`) starts a grandchild (`sleep`) and waits; both write their pid. A readable tool
    error is a failed tool result that says the program was killed; an orphan is a process of the
    call (the program or the grandchild) still alive after the run.
    """
    outcome = Outcome("shell-kill", count)
    outcome.orphans = 0
    with tempfile.TemporaryDirectory(prefix="bench-faults-shell-") as root:

        def toolset() -> ShellToolset:
            return ShellToolset(root, ["sh"], timeout=60)

        config = RuntimeConfig(approval_mode="approve_all")
        for number in range(count):
            child, grandchild = Path(root, f"child-{number}.pid"), Path(root, f"grandchild-{number}.pid")
            script = f"sleep 300 & echo $! > {grandchild.name}.tmp && mv {grandchild.name}.tmp {grandchild.name}; "
            script += f"echo $$ > {child.name}.tmp && mv {child.name}.tmp {child.name}; wait"
            agent = AgentEntry(Agent(_killing_teller(["sh", "-c", script])), name="operator", toolsets=["shell"])
            async with Runtime(None, entries=[agent], toolsets={"shell": toolset}, config=config) as runtime:
                run = asyncio.create_task(runtime.run("operator", "run it"))
                try:
                    pid = await _read_pid(child)
                    kid = await _read_pid(grandchild)
                    os.kill(pid, signal.SIGKILL)
                    result = await asyncio.wait_for(run, 60)
                except BaseException as error:
                    run.cancel()
                    outcome.other_failures += 1
                    outcome.failures.append(f"call {number}: {type(error).__name__}: {error}")
                    continue
            text = str(result.output)
            if text.startswith("failed: ") and ("SIGKILL" in text or "killed" in text):
                outcome.clear_errors += 1
            else:
                outcome.other_failures += 1
                outcome.failures.append(f"call {number}: {text[:200]}")
            outcome.orphans += sum(_alive(process) for process in (pid, kid))
    return outcome


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "**NO**"
    if isinstance(value, float):
        return f"{value * 1000:.0f} ms"
    return str(value)


def table(outcomes: list[Outcome]) -> str:
    head = (
        "| scenario | requests | successes | of which retried | clear errors | other failures | disconnected "
        "| money conserved "
        "| committed == successes | recovery | idle in transaction after | orphans |"
    )
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|"]
    for o in outcomes:
        cells = [o.scenario, o.requests, o.successes, o.retried, o.clear_errors, o.other_failures, o.disconnected]
        cells += [o.money_conserved, o.committed_equals_successes, o.recovery, o.idle_in_transaction, o.orphans]
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return "\n".join(lines)


async def bench(postgres: PostgresServer, args: argparse.Namespace) -> list[Outcome]:
    scenarios: dict[str, Callable[[], Awaitable[Outcome]]] = {
        "restart": lambda: restart(postgres, args.requests, args.concurrency, args.pool_size),
        "terminate": lambda: terminations(postgres, args.requests, args.concurrency, args.terminations, args.pool_size),
        "disconnect": lambda: disconnects(postgres, args.requests, args.concurrency, args.disconnects, args.pool_size),
        "shell-kill": lambda: shell_kills(args.kills),
    }
    outcomes = []
    for name in args.only or list(scenarios):
        started = time.monotonic()
        outcome = await scenarios[name]()
        outcomes.append(outcome)
        print(
            f"{name}: {time.monotonic() - started:.1f} s; {'holds' if outcome.holds else 'DOES NOT HOLD'}", flush=True
        )
        for line in outcome.notes + outcome.failures:
            print(f"  {line}", flush=True)
    return outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="transfers per database scenario")
    parser.add_argument("--concurrency", type=int, default=50, help="requests in flight")
    parser.add_argument("--pool-size", type=int, default=20, help="the service's LLM_DO_POOL_SIZE")
    parser.add_argument("--terminations", type=int, default=20)
    parser.add_argument("--disconnects", type=int, default=200)
    parser.add_argument("--kills", type=int, default=50, help="shell calls killed from outside")
    parser.add_argument("--only", nargs="*", choices=["restart", "terminate", "disconnect", "shell-kill"])
    args = parser.parse_args()
    with temporary_postgres() as postgres:
        outcomes = asyncio.run(bench(postgres, args))
    print()
    print(table(outcomes))
    if not all(outcome.holds for outcome in outcomes):
        sys.exit(1)


if __name__ == "__main__":
    main()
