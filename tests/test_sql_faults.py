"""Faults of PostgreSQL under the `sql` toolset, caused for real: the server stopped or restarted under
open transactions, backends killed with pg_terminate_backend, the network reset or silent (a TCP proxy
on 127.0.0.1), the pool exhausted, a statement past its timeout. Each reaches the scripted model as a
readable tool result naming the handle and the fault; the run goes on; nothing is logged as an error;
every pool slot comes back; nothing is left idle in a transaction."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any

import asyncpg
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from containers import BuiltinToolsets
from llm_do import AgentEntry, Runtime, RuntimeConfig
from llm_do.toolsets import Database

from .postgres import PostgresServer, temporary_postgres

LOST = "the database connection was lost: "
TABLE = "CREATE TABLE IF NOT EXISTS items (name TEXT)"
INSERT = "INSERT INTO items VALUES ($1)"
MakeApp = Callable[..., BuiltinToolsets]


# -- a server of our own, which the tests stop, start and restart --------------------------------


@pytest.fixture(scope="module")
def own() -> Iterator[PostgresServer]:
    """A throwaway server for this module alone: stopping it disturbs no other test."""
    with temporary_postgres() as server:
        yield server


@pytest.fixture
async def server(own: PostgresServer) -> AsyncIterator[PostgresServer]:
    """The module's server, running, with an empty `items` table; running again after the test."""
    await _sql(own, "DROP TABLE IF EXISTS items", TABLE)
    yield own
    if not own.socket_path.exists():
        own.start()


async def _sql(server: PostgresServer, *statements: str, dsn: str | None = None) -> list[tuple[Any, ...]]:
    conn = await (asyncpg.connect(dsn) if dsn else asyncpg.connect(**server.connect_kwargs()))  # type: ignore[arg-type]
    try:
        rows: list[tuple[Any, ...]] = []
        for statement in statements:
            rows = [tuple(record.values()) for record in await conn.fetch(statement)]
        return rows
    finally:
        await conn.close()


async def _in_transaction(server: PostgresServer) -> list[str]:
    """States of toolset sessions still holding a transaction (there must be none)."""
    rows = await _sql(
        server,
        "SELECT state FROM pg_stat_activity WHERE application_name = 'llm-do' AND state LIKE 'idle in transaction%'",
    )
    return [str(state) for (state,) in rows]


async def _eventually_none(read: Callable[[], Awaitable[list[str]]]) -> list[str]:
    """A backend leaves pg_stat_activity a moment after its client goes: wait for that (up to 5 s)."""
    found: list[str] = []
    for _ in range(100):
        found = await read()
        if not found:
            break
        await asyncio.sleep(0.05)
    return found


@pytest.fixture
def make_app(monkeypatch: pytest.MonkeyPatch) -> MakeApp:
    def make(url: str, **settings: object) -> BuiltinToolsets:
        monkeypatch.setenv("LLM_DO_DATABASE_URL", url)
        for name, value in settings.items():
            monkeypatch.setenv(f"LLM_DO_{name.upper()}", str(value))
        return BuiltinToolsets()

    return make


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING)
    return caplog


def no_errors(logs: pytest.LogCaptureFixture) -> None:
    """Nothing logged at ERROR (by llm_do, asyncio or asyncpg), and no warning carries a traceback."""
    assert [r.getMessage() for r in logs.records if r.levelno >= logging.ERROR] == []
    assert [r.getMessage() for r in logs.records if r.exc_info] == []


async def pool_of(app: BuiltinToolsets) -> Database:
    database = await app.sql_database()
    assert isinstance(database, Database)
    return database


async def every_slot_works(database: Database) -> None:
    """Every one of the pool's connections can be had at once and used: no slot was lost."""
    connections = [await database.acquire() for _ in range(database.pool_size)]
    try:
        for connection in connections:
            await connection.begin(read_only=True)
            await connection.rollback()
    finally:
        for connection in connections:
            await database.release(connection)
    stats = database.stats()
    assert stats.in_use == 0 and stats.open <= database.pool_size


# -- a scripted model whose steps may wait for the test -------------------------------------------

Step = ModelResponse | Callable[[list[ModelMessage]], Awaitable[ModelResponse] | ModelResponse]


def call(tool: str, **args: Any) -> Callable[[list[ModelMessage]], ModelResponse]:
    """One tool call; `txn=HANDLE` stands for the handle the run's latest begin returned."""
    return calls((tool, args))


def calls(*pairs: tuple[str, dict[str, Any]]) -> Callable[[list[ModelMessage]], ModelResponse]:
    def make(messages: list[ModelMessage]) -> ModelResponse:
        parts = [
            ToolCallPart(tool, {k: handle(messages) if v is HANDLE else v for k, v in args.items()})
            for tool, args in pairs
        ]
        return ModelResponse(parts=parts)

    return make


HANDLE: Any = object()


def after(event: asyncio.Event, step: Step, arrived: Callable[[], None] = lambda: None) -> Step:
    """`step`, once `event` is set (calling `arrived` first, so the test knows the run got here)."""

    async def wait(messages: list[ModelMessage]) -> ModelResponse:
        arrived()
        await event.wait()
        return await _resolve(step, messages)

    return wait


async def _resolve(step: Step, messages: list[ModelMessage]) -> ModelResponse:
    if isinstance(step, ModelResponse):
        return step
    made = step(messages)
    return await made if isinstance(made, Awaitable) else made


def text(content: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(content)])


def agent(*steps: Step, name: str = "clerk") -> AgentEntry:
    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        index = sum(isinstance(message, ModelResponse) for message in messages)
        return await _resolve(steps[index], messages)

    return AgentEntry(Agent(FunctionModel(respond)), name=name, toolsets=["sql"])


def handle(messages: Sequence[ModelMessage]) -> str:
    begun = [content for tool, content in tool_results(messages) if tool == "begin" and content.startswith("txn_")]
    return begun[-1]


def tool_results(messages: Sequence[ModelMessage]) -> list[tuple[str, Any]]:
    """(tool, what the model read) for each tool result, in order; a retry prompt would show as 'RETRY'."""
    found: list[tuple[str, Any]] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    found.append((part.tool_name, part.content))
                elif isinstance(part, RetryPromptPart):
                    found.append((str(part.tool_name), "RETRY"))
    return found


def approving(app: BuiltinToolsets) -> RuntimeConfig:
    return RuntimeConfig.from_container(app, approval_mode="approve_all")


def failed_parts(messages: Sequence[ModelMessage]) -> list[ToolReturnPart]:
    return [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart) and part.outcome == "failed"
    ]


# -- the server stopped under open transactions ---------------------------------------------------


class Round:
    """Runs that each get to a point and wait there while the test breaks something, then go on.

    `reset()` starts the next round with the same entries (and the same pool)."""

    def __init__(self, runs: int) -> None:
        self.runs = runs
        self.reset()

    def reset(self) -> None:
        self.arrived = 0
        self.all_there = asyncio.Event()
        self.broken = asyncio.Event()

    def arrive(self) -> None:
        self.arrived += 1
        if self.arrived == self.runs:
            self.all_there.set()

    def then(self, step: Step) -> Step:
        async def wait(messages: list[ModelMessage]) -> ModelResponse:
            self.arrive()
            await self.broken.wait()
            return await _resolve(step, messages)

        return wait

    async def breaking(self, breaks: Callable[[], Awaitable[None]]) -> None:
        """Once every run is there (and statements just sent are in flight), break, then let them go on."""
        await self.all_there.wait()
        await asyncio.sleep(0.3)
        await breaks()
        self.broken.set()


KINDS = ("idle", "busy", "forget", "parallel", "commit")


def stop_round_entries(round_: Round) -> list[AgentEntry]:
    """Five kinds of run holding a transaction when the connection goes."""
    begin, insert = call("begin"), call("execute", txn=HANDLE, sql=INSERT, params=["x"])

    def busy(messages: list[ModelMessage]) -> ModelResponse:  # a statement in flight when the fault comes
        round_.arrive()
        return call("query", txn=HANDLE, sql="SELECT pg_sleep(20)")(messages)

    three = [("query", {"txn": HANDLE, "sql": "SELECT count(*) FROM items"})] * 3
    second = call("execute", txn=HANDLE, sql=INSERT, params=["y"])
    return [
        agent(begin, insert, round_.then(second), text("done"), name="idle"),
        agent(begin, insert, busy, text("done"), name="busy"),
        agent(begin, insert, round_.then(text("done")), name="forget"),
        agent(begin, insert, round_.then(calls(*three)), text("done"), name="parallel"),
        agent(begin, insert, round_.then(call("commit", txn=HANDLE)), text("done"), name="commit"),
    ]


def check_round(name: str, messages: Sequence[ModelMessage], logs: pytest.LogCaptureFixture) -> None:
    """What the model of each kind of run read after its connection went away."""
    seen = tool_results(messages)
    txn = handle(messages)
    assert seen[:2] == [("begin", txn), ("execute", {"rows_affected": 1})], seen
    later = [content for _, content in seen[2:]]
    closed = f"{txn} is closed: the database rolled it back when the connection was lost, so nothing in it was saved."
    if name in ("idle", "busy"):
        [failure] = later
        assert failure.startswith(f"{'execute' if name == 'idle' else 'query'} failed: {LOST}"), failure
        assert closed in failure and failure.endswith("Begin a new transaction and redo the work.")
    elif name == "forget":
        assert later == []
        forgot = [r.getMessage() for r in logs.records if txn in r.getMessage()]
        assert len(forgot) == 1, forgot
        assert forgot[0].startswith(f"sql: forgotten transaction {txn} was already gone: {LOST}")
        assert [r.levelname for r in logs.records if txn in r.getMessage()] == ["WARNING"]
    elif name == "parallel":
        assert len(later) == 3
        first, *rest = later
        assert first.startswith(f"query failed: {LOST}") and closed in first, first
        refused = f"query refused: {txn} is closed, because its database connection was lost ("
        assert all(t.startswith(refused) and t.endswith("Begin a new transaction and redo the work.") for t in rest)
    else:
        [failure] = later
        assert failure.startswith(f"commit failed: {LOST}"), failure
        assert f"Nothing was committed: the database rolled {txn} back when the connection was lost." in failure
    assert [part.tool_name for part in failed_parts(messages)] == [tool for tool, _ in seen[2:]]


async def run_rounds(
    app: BuiltinToolsets,
    rounds: int,
    breaks: Callable[[], Awaitable[None]],
    repairs: Callable[[], Awaitable[None]],
    logs: pytest.LogCaptureFixture,
) -> None:
    """`rounds` rounds of two runs of each kind at once; each round `breaks` the connections, then `repairs`."""
    round_ = Round(2 * len(KINDS))
    async with Runtime(app, entries=stop_round_entries(round_), config=approving(app)) as runtime:
        database = await pool_of(app)
        for _ in range(rounds):
            round_.reset()
            names = [*KINDS, *KINDS]
            runs = asyncio.gather(*(runtime.run(name, "go") for name in names))
            await round_.breaking(breaks)
            results = await asyncio.wait_for(runs, 60)  # every run finishes
            for name, result in zip(names, results, strict=True):
                assert result.output == "done"
                check_round(name, result.messages, logs)
            assert database.stats().in_use == 0
            await repairs()
            await every_slot_works(database)
            assert await _eventually_none(lambda: _in_transaction_of(database)) == []
    no_errors(logs)


async def _in_transaction_of(database: Database) -> list[str]:
    server = _SERVERS[id(database)]
    return await _in_transaction(server)


_SERVERS: dict[int, PostgresServer] = {}


async def test_stopping_the_server_under_open_transactions_is_a_tool_error_in_every_run(
    server: PostgresServer, make_app: MakeApp, logs: pytest.LogCaptureFixture
) -> None:
    """30 runs, 10 at a time in three rounds: each round the server stops (fast) while all 10 hold a
    transaction, two with a statement in flight, two with three parallel tool calls on one handle."""
    app = make_app(server.dsn(), sql_pool_size=10)
    _SERVERS[id(await pool_of(app))] = server

    async def stop() -> None:
        await asyncio.to_thread(server.stop, "fast")

    async def start() -> None:
        await asyncio.to_thread(server.start)

    await run_rounds(app, 3, stop, start, logs)
    assert await _sql(server, "SELECT count(*) FROM items") == [(0,)]  # nothing was committed
