"""Faults of PostgreSQL under the `sql` toolset, caused for real: the server stopped or restarted under
open transactions, backends killed with pg_terminate_backend, the network reset or silent (a TCP proxy
on 127.0.0.1), the pool exhausted, a statement past its timeout. Each reaches the scripted model as a
readable tool result naming the handle and the fault; the run goes on; nothing is logged as an error;
every pool slot comes back; nothing is left idle in a transaction."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
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
from llm_do import AgentEntry, ConfigurationError, Runtime, RuntimeConfig
from llm_do.toolsets import Database, PoolStats

from ..postgres import PostgresServer, temporary_postgres

LOST = "the database connection was lost: "
TABLE = "CREATE TABLE IF NOT EXISTS items (name TEXT)"
INSERT = "INSERT INTO items VALUES ($1)"
MakeApp = Callable[..., BuiltinToolsets]


# -- a server of our own, which the tests stop, start and restart --------------------------------


@pytest.fixture(scope="module")
def own() -> Iterator[PostgresServer]:
    """A throwaway server for this module alone: stopping it disturbs no other test."""
    with temporary_postgres() as server:
        # A backend running a statement notices its client went away within 0.2 s (else only when it answers).
        asyncio.run(_sql(server, "ALTER SYSTEM SET client_connection_check_interval = 200", "SELECT pg_reload_conf()"))
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


async def _backends(server: PostgresServer) -> list[str]:
    """The toolset's sessions the server still has."""
    rows = await _sql(server, "SELECT pid FROM pg_stat_activity WHERE application_name = 'llm-do'")
    return [str(pid) for (pid,) in rows]


async def _in_transaction(server: PostgresServer) -> list[str]:
    """States of toolset sessions still in a transaction, idle or running a statement (there must be none)."""
    rows = await _sql(
        server, "SELECT state FROM pg_stat_activity WHERE application_name = 'llm-do' AND xact_start IS NOT NULL"
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


def check_round(
    name: str, messages: Sequence[ModelMessage], logs: pytest.LogCaptureFixture, *, commit_sent: bool = False
) -> None:
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
        assert forgot[0].startswith(
            f"sql: forgotten transaction {txn} was lost with its connection, which rolls it back: {LOST}"
        )
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
        if commit_sent:  # the connection went silent with COMMIT sent: whether it committed is unknown
            assert f"the database may or may not have committed {txn}. {txn} is closed;" in failure
        else:
            assert f"Nothing was committed: the database rolled {txn} back when the connection was lost." in failure
    assert [part.tool_name for part in failed_parts(messages)] == [tool for tool, _ in seen[2:]]


async def run_rounds(
    app: BuiltinToolsets,
    server: PostgresServer,
    rounds: int,
    breaks: Callable[[], Awaitable[None]],
    repairs: Callable[[], Awaitable[None]],
    logs: pytest.LogCaptureFixture,
    *,
    commit_sent: bool = False,
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
                check_round(name, result.messages, logs, commit_sent=commit_sent)
            assert database.stats().in_use == 0
            await repairs()
            await every_slot_works(database)
            assert await _eventually_none(lambda: _in_transaction(server)) == []
    no_errors(logs)


async def test_stopping_the_server_under_open_transactions_is_a_tool_error_in_every_run(
    server: PostgresServer, make_app: MakeApp, logs: pytest.LogCaptureFixture
) -> None:
    """30 runs, 10 at a time in three rounds: each round the server stops (fast) while all 10 hold a
    transaction, two with a statement in flight, two with three parallel tool calls on one handle."""
    app = make_app(server.dsn(), sql_pool_size=10)

    async def stop() -> None:
        await asyncio.to_thread(server.stop, "fast")

    async def start() -> None:
        await asyncio.to_thread(server.start)

    await run_rounds(app, server, 3, stop, start, logs)
    assert await _sql(server, "SELECT count(*) FROM items") == [(0,)]  # nothing was committed


async def test_backends_killed_with_pg_terminate_backend(
    server: PostgresServer, make_app: MakeApp, logs: pytest.LogCaptureFixture
) -> None:
    app = make_app(server.dsn(), sql_pool_size=10)

    async def kill() -> None:
        killed = await _sql(
            server, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'llm-do'"
        )
        assert len(killed) == 10
        # pg_terminate_backend only signals. Wait until the backends have ended (and so their ends
        # have reached the pool's connections): a COMMIT written to a backend still on its way out
        # has an outcome nobody can know, and the commit's tool error rightly says so.
        assert await _eventually_none(lambda: _backends(server)) == []

    async def nothing() -> None:
        pass

    await run_rounds(app, server, 2, kill, nothing, logs)


async def test_the_server_ends_an_idle_transaction(
    server: PostgresServer, make_app: MakeApp, logs: pytest.LogCaptureFixture
) -> None:
    """idle_in_transaction_session_timeout: the server ends a session left idle in a transaction."""

    async def dawdle(messages: list[ModelMessage]) -> ModelResponse:
        await asyncio.sleep(1)
        return call("query", txn=HANDLE, sql="SELECT count(*) AS n FROM items")(messages)

    script = agent(call("begin"), dawdle, call("begin"), call("query", txn=HANDLE, sql="SELECT 1 AS one"), text("ok"))
    app = make_app(f"{server.dsn()}&idle_in_transaction_session_timeout=200", sql_pool_size=1)
    async with Runtime(app, entries=[script], config=approving(app)) as runtime:
        result = await runtime.run("clerk", "dawdle")
        database = await pool_of(app)
        assert database.stats().in_use == 0
        await every_slot_works(database)
    (_, first), (_, failure), (_, second), (_, rows) = tool_results(result.messages)
    assert failure.startswith(f"query failed: {LOST}") and f"{first} is closed: the database rolled it back" in failure
    assert second != first and rows == {"columns": ["one"], "rows": [{"one": 1}]}
    no_errors(logs)


# -- the network: a TCP proxy on 127.0.0.1 to the server's unix socket ----------------------------


class Proxy:
    """Forwards 127.0.0.1:port to the server's socket; `cut()` resets every connection, `silence()`
    drops everything sent either way (closing still goes through), `resume()` forwards again."""

    def __init__(self, server: PostgresServer) -> None:
        self.server = server
        self.port = 0
        self.flowing = True
        self.links: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self.listener: asyncio.Server | None = None

    async def start(self) -> None:
        self.listener = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self.listener.sockets[0].getsockname()[1])

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://{self.server.user}@127.0.0.1:{self.port}/{database}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_unix_connection(str(self.server.socket_path))
        self.links.append((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                if self.flowing:
                    writer.write(data)
                    await writer.drain()
        finally:
            writer.close()

    def cut(self) -> None:
        """Reset every connection: the client reads ECONNRESET, the server sees its client gone."""
        for client, upstream in self.links:
            client_socket = client.get_extra_info("socket")
            if client_socket is not None:
                with contextlib.suppress(OSError):
                    client_socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.transport.abort()
            upstream.transport.abort()
        self.links.clear()

    async def close(self) -> None:
        self.cut()
        if self.listener is not None:
            self.listener.close()
            await self.listener.wait_closed()


@pytest.fixture
async def proxy(server: PostgresServer) -> AsyncIterator[Proxy]:
    found = Proxy(server)
    await found.start()
    yield found
    await found.close()


async def test_a_network_reset_under_open_transactions(
    server: PostgresServer, proxy: Proxy, make_app: MakeApp, logs: pytest.LogCaptureFixture
) -> None:
    app = make_app(proxy.dsn(), sql_pool_size=10)

    async def cut() -> None:
        proxy.cut()

    async def nothing() -> None:
        pass

    await run_rounds(app, server, 2, cut, nothing, logs)


async def test_a_silent_network_under_open_transactions(
    server: PostgresServer, proxy: Proxy, make_app: MakeApp, logs: pytest.LogCaptureFixture
) -> None:
    """Nothing comes back, not even a reset: after twice the statement timeout plus a second the
    connection is given up (a COMMIT sent into the silence may or may not have committed)."""
    app = make_app(proxy.dsn(), sql_pool_size=10, sql_statement_timeout=0.5)

    async def silence() -> None:
        proxy.flowing = False

    async def resume() -> None:
        proxy.flowing = True

    await run_rounds(app, server, 1, silence, resume, logs, commit_sent=True)
    silent = [r.getMessage() for r in logs.records if "the server did not answer within 2 s" in r.getMessage()]
    assert len(silent) == 10  # every run's transaction: 8 under a tool call, 2 forgotten


# -- the run goes on: begin again after a restart; begin while the server is down ----------------


async def test_after_a_restart_the_model_begins_again_and_commits(
    server: PostgresServer, make_app: MakeApp, logs: pytest.LogCaptureFixture
) -> None:
    restarted = asyncio.Event()

    async def restart(messages: list[ModelMessage]) -> ModelResponse:
        await asyncio.to_thread(server.restart, "fast")
        restarted.set()
        return call("execute", txn=HANDLE, sql=INSERT, params=["lost"])(messages)

    script = agent(
        call("begin"),
        call("execute", txn=HANDLE, sql=INSERT, params=["lost"]),
        restart,
        call("begin"),
        call("execute", txn=HANDLE, sql=INSERT, params=["kept"]),
        call("commit", txn=HANDLE),
        text("saved on the second try"),
    )
    app = make_app(server.dsn(), sql_pool_size=2)
    async with Runtime(app, entries=[script], config=approving(app)) as runtime:
        result = await runtime.run("clerk", "save")
        database = await pool_of(app)
        assert database.stats().in_use == 0
        await every_slot_works(database)
    assert restarted.is_set() and result.output == "saved on the second try"
    (_, first), (_, _), (_, failure), (_, second), (_, inserted), (_, committed) = tool_results(result.messages)
    assert failure == shown_in_the_docs().replace("txn_1a2b3c4d", first)
    assert second != first and inserted == {"rows_affected": 1} and committed == f"{second} committed"
    assert await _sql(server, "SELECT name FROM items") == [("kept",)]
    no_errors(logs)


def shown_in_the_docs() -> str:
    """The failed tool result docs/toolsets.md shows under "When the database goes away"."""
    page = (Path(__file__).parents[2] / "docs" / "toolsets.md").read_text()
    found = re.search(r"```text\n(.*?)\n```", page.split("### When the database goes away", 1)[1], re.DOTALL)
    assert found is not None
    return found.group(1)


async def test_begin_while_the_server_is_down_says_so_and_works_once_it_is_back(
    server: PostgresServer, make_app: MakeApp, logs: pytest.LogCaptureFixture
) -> None:
    script = agent(call("begin"), call("tables"), text("later"))
    app = make_app(server.dsn(), sql_pool_size=2)
    async with Runtime(app, entries=[script], config=approving(app)) as runtime:
        await runtime.run("clerk", "warm the pool up")  # an idle connection in the pool when the server stops
        await asyncio.to_thread(server.stop, "fast")
        down = await runtime.run("clerk", "try")
        await asyncio.to_thread(server.start)
        up = await runtime.run("clerk", "try again")
        assert (await pool_of(app)).stats().in_use == 0
    (_, begin), (_, tables) = tool_results(down.messages)
    assert down.output == "later"
    assert begin.startswith("begin failed: could not connect to PostgreSQL: ") and "No such file" in begin
    assert tables.startswith("reading the schema failed: could not connect to PostgreSQL: ")
    assert [part.tool_name for part in failed_parts(down.messages)] == ["begin", "tables"]
    (_, txn), (_, names) = tool_results(up.messages)
    assert txn.startswith("txn_") and names == ["items"]
    no_errors(logs)


async def test_an_exhausted_pool_is_a_tool_error_and_the_slot_comes_back(
    server: PostgresServer, make_app: MakeApp, logs: pytest.LogCaptureFixture
) -> None:
    holding, done = asyncio.Event(), asyncio.Event()

    async def hold(messages: list[ModelMessage]) -> ModelResponse:
        holding.set()
        await done.wait()
        return call("rollback", txn=HANDLE)(messages)

    holder = agent(call("begin"), hold, text("held"), name="holder")
    waiter = agent(call("begin"), text("gave up"), name="waiter")
    app = make_app(server.dsn(), sql_pool_size=1, sql_statement_timeout=0.5)
    async with Runtime(app, entries=[holder, waiter], config=approving(app)) as runtime:
        held = asyncio.ensure_future(runtime.run("holder", "hold"))
        await holding.wait()
        refused = await runtime.run("waiter", "begin")
        done.set()
        assert (await held).output == "held"
        database = await pool_of(app)
        assert database.stats().in_use == 0
        await every_slot_works(database)
        again = await runtime.run("waiter", "begin")  # the slot is free again
    assert tool_results(refused.messages) == [
        (
            "begin",
            "begin failed: no database connection became free within 0.5 s: all 1 are in use by open "
            "transactions. Commit or roll back the ones you no longer need, then try again.",
        )
    ]
    assert tool_results(again.messages)[0][1].startswith("txn_")
    no_errors(logs)


async def test_a_statement_past_the_timeout_keeps_the_connection(
    server: PostgresServer, make_app: MakeApp, logs: pytest.LogCaptureFixture
) -> None:
    """The server cancels it: the transaction is aborted, not lost, and rolling it back works."""
    script = agent(
        call("begin"),
        call("query", txn=HANDLE, sql="SELECT pg_sleep(10)"),
        call("rollback", txn=HANDLE),
        text("too slow"),
    )
    app = make_app(server.dsn(), sql_pool_size=1, sql_statement_timeout=0.3)
    async with Runtime(app, entries=[script], config=approving(app)) as runtime:
        result = await runtime.run("clerk", "sleep")
        assert (await pool_of(app)).stats() == PoolStats(size=1, open=1, in_use=0, idle=1, closed=False)
    (_, txn), (_, timed_out), (_, rolled_back) = tool_results(result.messages)
    assert timed_out.startswith(
        "query failed: canceling statement due to statement timeout (the statement timeout is 0.3 s)"
    )
    assert f"{txn} is aborted" in timed_out and rolled_back == f"{txn} rolled back"
    assert [r for r in logs.records if r.name == "llm_do"] == []


# -- settings ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app:s3cret-pw@db.internal:port/app",
        "postgresql://app:s3cret-pw@db.internal:99999/app",
        "postgresql://app:s3cret-pw@a:5432,b:x/app",
        "postgresql://app:s3cret-pw@/app?host=/run/postgresql&port=s3cret-pw",
    ],
)
async def test_a_bad_port_in_the_database_url_names_the_setting_and_never_the_password(
    url: str, make_app: MakeApp
) -> None:
    app = make_app(url)
    with pytest.raises(ConfigurationError) as raised:
        async with Runtime(app, entries=[agent(call("begin"), text("no"))]) as runtime:
            await runtime.run("clerk", "go")
    message = str(raised.value)
    assert message.startswith("LLM_DO_DATABASE_URL has a port that is not a number from 1 to 65535; write it like ")
    assert "s3cret" not in message


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        (
            "sslmode=bogus",
            "`sslmode` parameter must be one of: disable, allow, prefer, require, verify-ca, verify-full",
        ),
        ("target_session_attrs=s3cret-pw", "target_session_attrs is expected to be one of"),
    ],
)
async def test_an_option_asyncpg_refuses_names_the_setting_and_never_the_password(
    server: PostgresServer, query: str, problem: str, make_app: MakeApp
) -> None:
    url = f"postgresql://postgres:s3cret-pw@/postgres?host={server.socket_dir}&port={server.port}&{query}"
    app = make_app(url)
    with pytest.raises(ConfigurationError) as raised:
        async with Runtime(app, entries=[agent(call("begin"), text("no"))]) as runtime:
            await runtime.run("clerk", "go")
    message = str(raised.value)
    assert message.startswith(f"LLM_DO_DATABASE_URL cannot be used: {problem}")
    assert message.endswith("Fix it; the form is postgresql://user:password@host:5432/dbname?option=value")
    assert "s3cret" not in message


async def test_a_forgotten_transaction_on_a_silent_network_is_dropped_within_the_cleanup_budget(
    server: PostgresServer, proxy: Proxy, make_app: MakeApp, logs: pytest.LogCaptureFixture
) -> None:
    """Default settings (a 30 s statement timeout, a 10 s cleanup budget): the rollback at call end gets
    no answer, and the connection is dropped after 5 s, inside the budget, so teardown logs no error."""
    silence = asyncio.Event()

    async def go_silent(messages: list[ModelMessage]) -> ModelResponse:
        proxy.flowing = False
        silence.set()
        return text("left it open")

    script = agent(call("begin"), call("execute", txn=HANDLE, sql=INSERT, params=["x"]), go_silent)
    app = make_app(proxy.dsn(), sql_pool_size=2)
    async with Runtime(app, entries=[script], config=approving(app)) as runtime:
        result = await runtime.run("clerk", "forget")
        database = await pool_of(app)
        assert database.stats().in_use == 0
        proxy.flowing = True
        await every_slot_works(database)
    assert silence.is_set() and result.output == "left it open"
    [warning] = [r for r in logs.records if r.name == "llm_do"]
    assert warning.levelname == "WARNING"
    assert warning.getMessage().endswith(f"{LOST}the server did not answer within 5 s")
    no_errors(logs)
    assert await _eventually_none(lambda: _in_transaction(server)) == []
    assert await _sql(server, "SELECT count(*) FROM items") == [(0,)]
