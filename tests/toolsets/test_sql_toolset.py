"""The built-in `sql` toolset on a real SQLite file and on a throwaway PostgreSQL server: transactions
per call, rollback of forgotten ones, readable SQL errors, result caps, read-only transactions, bound
parameters, approval defaults, concurrency, and a pool that is returned to and closed with the runtime."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from containers import BuiltinToolsets
from llm_do import AgentEntry, CallScope, ConfigurationError, Runtime, RuntimeConfig, UnknownHandle, entry
from llm_do.testing import ToolCall, Turn, returned, tool_call, track_leaks
from llm_do.toolsets import Database, SqlToolset, database_from_url

from ..postgres import PostgresServer

SECRET = "Sup3r-s3cret-pw"
MakeApp = Callable[..., BuiltinToolsets]
ACCOUNTS = "CREATE TABLE accounts (name TEXT PRIMARY KEY, balance INTEGER NOT NULL)"


# -- the two backends ---------------------------------------------------------------------------


@dataclass
class Backend:
    """One database the toolset is pointed at, and a side door to set it up and check it."""

    kind: str
    url: str
    server: PostgresServer
    database: str = ""
    path: Path | None = None

    async def run(self, *statements: str) -> None:
        if self.path is not None:
            with sqlite3.connect(self.path) as conn:
                for statement in statements:
                    conn.execute(statement)
            conn.close()
            return
        conn = await asyncpg.connect(**self.server.connect_kwargs(self.database))  # type: ignore[arg-type]
        try:
            for statement in statements:
                await conn.execute(statement)
        finally:
            await conn.close()

    async def rows(self, sql: str) -> list[tuple[Any, ...]]:
        if self.path is not None:
            conn = sqlite3.connect(self.path)
            try:
                return [tuple(row) for row in conn.execute(sql).fetchall()]
            finally:
                conn.close()
        conn = await asyncpg.connect(**self.server.connect_kwargs(self.database))  # type: ignore[arg-type]
        try:
            return [tuple(record.values()) for record in await conn.fetch(sql)]
        finally:
            await conn.close()

    async def sessions(self) -> list[str]:
        """States of the toolset's PostgreSQL sessions (application_name llm-do) on this database."""
        assert self.kind == "postgresql"
        rows = await self.rows(
            "SELECT state FROM pg_stat_activity "
            f"WHERE application_name = 'llm-do' AND datname = '{self.database}' AND pid <> pg_backend_pid()"
        )
        return sorted(str(state) for (state,) in rows)


async def _create_database(server: PostgresServer, name: str) -> None:
    conn = await asyncpg.connect(**server.connect_kwargs())  # type: ignore[arg-type]
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def pg_database(postgres: PostgresServer) -> str:
    """A fresh PostgreSQL database for this module."""
    name = postgres.new_database_name()
    asyncio.run(_create_database(postgres, name))
    return name


@pytest.fixture(params=["sqlite", "postgresql"])
async def backend(
    request: pytest.FixtureRequest, tmp_path: Path, postgres: PostgresServer, pg_database: str
) -> Backend:
    if request.param == "sqlite":
        path = tmp_path / "app.db"
        found = Backend("sqlite", f"sqlite:///{path}", postgres, path=path)
    else:
        found = Backend("postgresql", postgres.dsn(pg_database), postgres, database=pg_database)
        await found.run("DROP SCHEMA IF EXISTS public CASCADE", "CREATE SCHEMA public")
    await found.run(ACCOUNTS, "INSERT INTO accounts VALUES ('A', 100), ('B', 50)")
    return found


@pytest.fixture
async def pg(tmp_path: Path, postgres: PostgresServer, pg_database: str) -> Backend:
    found = Backend("postgresql", postgres.dsn(pg_database), postgres, database=pg_database)
    await found.run("DROP SCHEMA IF EXISTS public CASCADE", "CREATE SCHEMA public")
    await found.run(ACCOUNTS, "INSERT INTO accounts VALUES ('A', 100), ('B', 50)")
    return found


@pytest.fixture
def make_app(monkeypatch: pytest.MonkeyPatch) -> Callable[..., BuiltinToolsets]:
    """A container configured like production: from LLM_DO_* variables."""

    def make(url: str, **settings: object) -> BuiltinToolsets:
        monkeypatch.setenv("LLM_DO_DATABASE_URL", url)
        for name, value in settings.items():
            monkeypatch.setenv(f"LLM_DO_{name.upper()}", str(value))
        return BuiltinToolsets()

    return make


# -- scripted agents ----------------------------------------------------------------------------

Step = str | ToolCall | Sequence[ToolCall] | Callable[[Turn], Any]


def per_run(*steps: Step) -> FunctionModel:
    """A model whose i-th answer in each conversation is steps[i] (so concurrent runs each follow the script)."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = Turn(sum(isinstance(m, ModelResponse) for m in messages), list(messages), info)
        step: Any = steps[turn.index]
        while callable(step):
            step = step(turn)
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        calls = [step] if isinstance(step, ToolCall) else list(step)
        parts = [ToolCallPart(c.tool, {k: _resolve(v, turn) for k, v in c.args.items()}) for c in calls]
        return ModelResponse(parts=parts)

    return FunctionModel(respond)


def _resolve(value: Any, turn: Turn) -> Any:
    return turn.returned(value.tool) if type(value).__name__ == "Returned" else value


INSERT = "INSERT INTO accounts VALUES ($1, $2)"
POOR = "SELECT name, balance FROM accounts WHERE balance < $1"


def clerk(*steps: Step) -> AgentEntry:
    return AgentEntry(Agent(per_run(*steps)), name="clerk", toolsets=["sql"])


def results(messages: Sequence[ModelMessage]) -> list[tuple[str, Any]]:
    """(tool name, what the model read) for every tool result of a conversation, in order."""
    return [
        (part.tool_name, part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def approving(app: BuiltinToolsets) -> RuntimeConfig:
    return RuntimeConfig.from_container(app, approval_mode="approve_all")


async def pool_of(app: BuiltinToolsets) -> Database:
    database = await app.sql_database()
    assert isinstance(database, Database)
    return database


def direct(body: Callable[[CallScope], Any], name: str = "direct") -> Any:
    """An entry that calls the sql tools from Python (`scope.call_tool`)."""

    @entry(name=name, toolsets=["sql"])
    async def run(scope: CallScope, _: object) -> Any:
        return await body(scope)

    return run


# -- transactions ---------------------------------------------------------------------------------


async def test_committed_writes_are_seen_by_later_runs(backend: Backend, make_app: MakeApp) -> None:
    app = make_app(backend.url)
    writer = clerk(
        tool_call("begin"),
        tool_call("execute", txn=returned("begin"), sql="INSERT INTO accounts VALUES ($1, $2)", params=["C", 7]),
        tool_call("commit", txn=returned("begin")),
        "saved",
    )
    async with Runtime(app, entries=[writer], config=approving(app)) as runtime:
        wrote = await runtime.run("clerk", "add C")
    reader = clerk(
        tool_call("begin", read_only=True),
        [  # two parallel statements on one transaction take turns
            tool_call("query", txn=returned("begin"), sql=POOR, params=[50]),
            tool_call("query", txn=returned("begin"), sql="SELECT count(*) AS n FROM accounts"),
        ],
        tool_call("rollback", txn=returned("begin")),
        "read",
    )
    async with Runtime(make_app(backend.url), entries=[reader]) as runtime:
        read = await runtime.run("clerk", "read")

    (_, txn), *rest = results(wrote.messages)
    assert rest == [("execute", {"rows_affected": 1}), ("commit", f"{txn} committed")]
    assert [content for _, content in results(read.messages)][1:3] == [
        {"columns": ["name", "balance"], "rows": [{"name": "C", "balance": 7}]},
        {"columns": ["n"], "rows": [{"n": 3}]},
    ]
    assert await backend.rows("SELECT balance FROM accounts WHERE name = 'C'") == [(7,)]


async def test_a_forgotten_transaction_is_rolled_back_and_its_connection_returned(
    backend: Backend, make_app: MakeApp
) -> None:
    app = make_app(backend.url)
    forgetful = clerk(
        tool_call("begin"),
        tool_call("execute", txn=returned("begin"), sql="UPDATE accounts SET balance = 0"),
        "done (never committed)",
    )
    async with Runtime(app, entries=[forgetful], config=approving(app)) as runtime:
        result = await runtime.run("clerk", "zero everything")
        database = await pool_of(app)
        stats = database.stats()
        sessions = await backend.sessions() if backend.kind == "postgresql" else []

    assert results(result.messages)[1] == ("execute", {"rows_affected": 2})
    assert await backend.rows("SELECT name, balance FROM accounts ORDER BY name") == [("A", 100), ("B", 50)]
    assert (stats.in_use, stats.idle, stats.open) == (0, 1, 1)
    assert sessions in ([], ["idle"])  # returned to the pool, not left idle in transaction


async def test_two_calls_never_share_a_transaction_or_a_handle(backend: Backend, make_app: MakeApp) -> None:
    wrote, read = asyncio.Event(), asyncio.Event()
    handles: list[str] = []

    async def write(scope: CallScope) -> str:
        txn = await scope.call_tool("begin")
        await scope.call_tool("execute", {"txn": txn, "sql": INSERT, "params": ["C", 1]})
        handles.append(txn)
        wrote.set()
        await read.wait()
        return str(await scope.call_tool("commit", {"txn": txn}))

    async def look(scope: CallScope) -> Any:
        await wrote.wait()
        try:
            txn = await scope.call_tool("begin", {"read_only": True})
            seen = await scope.call_tool("query", {"txn": txn, "sql": "SELECT count(*) AS n FROM accounts"})
            with pytest.raises(UnknownHandle, match=f"Unknown handle '{handles[0]}': it is not open here"):
                await scope.call_tool("query", {"txn": handles[0], "sql": "SELECT 1"})
            return seen["rows"]
        finally:
            read.set()

    writer, reader = direct(write), direct(look, "reader")
    app = make_app(backend.url)
    async with Runtime(app, entries=[writer, reader], config=approving(app)) as runtime:
        committed, seen = await asyncio.gather(runtime.run("direct", None), runtime.run("reader", None))
    assert committed.output == f"{handles[0]} committed"
    assert seen.output == [{"n": 2}]  # the writer's row was not committed yet
    assert await backend.rows("SELECT count(*) FROM accounts") == [(3,)]


async def test_sql_errors_reach_the_model_and_the_run_goes_on(backend: Backend, make_app: MakeApp) -> None:
    script = clerk(
        tool_call("begin"),
        tool_call("query", txn=returned("begin"), sql="SELEC name FROM accounts"),
        tool_call("query", txn=returned("begin"), sql="SELECT name FROM missing_table"),
        tool_call("rollback", txn=returned("begin")),
        "I will fix my SQL",
    )
    async with Runtime(make_app(backend.url), entries=[script]) as runtime:
        result = await runtime.run("clerk", "list names")

    assert result.output == "I will fix my SQL"
    (_, txn), (_, syntax), (_, missing), (_, rolled_back) = results(result.messages)
    assert syntax.startswith("query failed: ") and "syntax error" in syntax
    assert "statement: SELEC name FROM accounts" in syntax
    assert rolled_back == f"{txn} rolled back"
    if backend.kind == "sqlite":
        assert syntax.endswith(f"{txn} is still open; the failed statement changed nothing.")
        assert "no such table: missing_table" in missing
    else:
        assert f"{txn} is aborted: the database ignores every further statement in it. Call rollback" in syntax
        assert "current transaction is aborted" in missing


async def test_an_aborted_postgresql_transaction_commits_nothing(pg: Backend, make_app: MakeApp) -> None:
    app = make_app(pg.url)
    script = clerk(
        tool_call("begin"),
        tool_call("execute", txn=returned("begin"), sql="INSERT INTO accounts VALUES ($1, $2)", params=["C", 1]),
        tool_call("execute", txn=returned("begin"), sql="INSERT INTO accounts VALUES ($1, $2)", params=["A", 1]),
        tool_call("commit", txn=returned("begin")),
        tool_call("rollback", txn=returned("begin")),
        "gave up",
    )
    async with Runtime(app, entries=[script], config=approving(app)) as runtime:
        result = await runtime.run("clerk", "add C and A")
        stats = (await pool_of(app)).stats()

    (_, txn), (_, inserted), (_, duplicate), (_, commit), (_, rollback) = results(result.messages)
    assert inserted == {"rows_affected": 1}
    assert duplicate.splitlines()[:3] == [
        'execute failed: duplicate key value violates unique constraint "accounts_pkey"',
        "DETAIL: Key (name)=(A) already exists.",
        "statement: INSERT INTO accounts VALUES ($1, $2)",
    ]
    assert f"{txn} is aborted" in duplicate
    assert commit == (
        "commit failed: PostgreSQL rolled the transaction back instead of committing it, because a statement "
        f"in it had failed. Nothing was committed.\n{txn} is closed; begin a new transaction and redo the work."
    )
    assert rollback.startswith(f"Unknown handle '{txn}'")  # commit closed it
    assert await pg.rows("SELECT count(*) FROM accounts") == [(2,)]
    assert stats.in_use == 0


async def test_transaction_control_in_sql_is_refused(backend: Backend, make_app: MakeApp) -> None:
    async def sneak(scope: CallScope) -> list[str]:
        earlier = await scope.call_tool("begin")  # the one connection has run COMMIT and ROLLBACK itself
        await scope.call_tool("commit", {"txn": earlier})
        earlier = await scope.call_tool("begin")
        await scope.call_tool("rollback", {"txn": earlier})
        txn = await scope.call_tool("begin")
        await scope.call_tool("execute", {"txn": txn, "sql": "UPDATE accounts SET balance = 0"})
        refused = []
        for sql in ("COMMIT", " /* hidden */ -- here\n commit", "END", "ROLLBACK", "BEGIN"):
            with pytest.raises(ToolFailed) as raised:
                await scope.call_tool("query", {"txn": txn, "sql": sql})
            refused.append(raised.value.message)
        await scope.call_tool("execute", {"txn": txn, "sql": "SAVEPOINT s"})  # savepoints are fine
        await scope.call_tool("execute", {"txn": txn, "sql": "ROLLBACK TO s"})
        return refused

    app = make_app(backend.url, sql_pool_size=1)
    async with Runtime(app, entries=[direct(sneak)], config=approving(app)) as runtime:
        refused = (await runtime.run("direct", None)).output
    assert len(refused) == 5
    assert all("transaction control (BEGIN, COMMIT, ROLLBACK, ...) is not run as SQL here" in m for m in refused)
    assert await backend.rows("SELECT sum(balance) FROM accounts") == [(150,)]  # the forgotten update was undone


async def test_read_only_transactions_refuse_writes(backend: Backend, make_app: MakeApp) -> None:
    escape = "PRAGMA query_only=OFF" if backend.kind == "sqlite" else "SET TRANSACTION READ WRITE"
    insert = "INSERT INTO accounts VALUES ('C', 1)"

    async def try_writes(scope: CallScope) -> list[str]:
        earlier = await scope.call_tool("begin")  # the one connection has run the same statements itself
        await scope.call_tool("execute", {"txn": earlier, "sql": insert})
        await scope.call_tool("rollback", {"txn": earlier})
        messages = []
        for sql in (insert, escape):
            txn = await scope.call_tool("begin", {"read_only": True})
            with pytest.raises(ToolFailed) as raised:
                await scope.call_tool("execute", {"txn": txn, "sql": sql})
            messages.append(raised.value.message.splitlines()[0])
            with pytest.raises(ToolFailed):
                await scope.call_tool("execute", {"txn": txn, "sql": insert})
            await scope.call_tool("rollback", {"txn": txn})
        return messages

    app = make_app(backend.url, sql_pool_size=1)
    async with Runtime(app, entries=[direct(try_writes)], config=approving(app)) as runtime:
        refused_insert, escaped = (await runtime.run("direct", None)).output
    if backend.kind == "sqlite":
        assert refused_insert == (
            "execute failed: this transaction is read-only: begin a transaction with read_only=false to write"
        )
        assert escaped.startswith("execute failed: PRAGMA query_only is not allowed")
    else:
        assert refused_insert == "execute failed: cannot execute INSERT in a read-only transaction"
        assert escaped == "execute failed: transaction read-write mode must be set before any query"
    assert await backend.rows("SELECT count(*) FROM accounts") == [(2,)]


# -- results, errors, parameters ------------------------------------------------------------------


async def test_query_results_are_capped_by_rows_and_bytes(backend: Backend, make_app: MakeApp) -> None:
    await backend.run(
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)",
        "INSERT INTO notes VALUES " + ", ".join(f"({i}, '{'x' * 100}')" for i in range(1, 11)),
        f"INSERT INTO notes VALUES (99, '{'y' * 2000}')",
    )

    async def read(scope: CallScope) -> list[dict[str, Any]]:
        txn = await scope.call_tool("begin", {"read_only": True})
        sqls = [
            "SELECT id FROM notes WHERE id < 99 ORDER BY id",
            "SELECT id FROM notes WHERE id < 99 ORDER BY id LIMIT 3",
            "SELECT id, body FROM notes WHERE id < 99 ORDER BY id",
            "SELECT body FROM notes WHERE id = 99",
        ]
        return [await scope.call_tool("query", {"txn": txn, "sql": sql}) for sql in sqls]

    app = make_app(backend.url, sql_max_rows=3, sql_max_bytes=300)
    async with Runtime(app, entries=[direct(read)]) as runtime:
        by_rows, exact, by_bytes, too_big = (await runtime.run("direct", None)).output

    assert by_rows["rows"] == [{"id": 1}, {"id": 2}, {"id": 3}]
    assert by_rows["truncated"].startswith("only the first 3 rows are shown (the limit); the statement returned more.")
    assert exact == {"columns": ["id"], "rows": [{"id": 1}, {"id": 2}, {"id": 3}]}  # no note: nothing more
    assert [row["id"] for row in by_bytes["rows"]] == [1, 2]  # a third row of ~120 bytes passes 300
    assert len(json.dumps(by_bytes["rows"]).encode()) <= 300
    assert by_bytes["truncated"].startswith("only the first 2 row(s) are shown: the next row would pass the 300-byte")
    assert too_big["rows"] == [] and too_big["truncated"].startswith("only the first 0 row(s) are shown")


async def test_parameters_are_bound_never_formatted(backend: Backend, make_app: MakeApp) -> None:
    hostile = "x'); DROP TABLE accounts; --"

    async def store(scope: CallScope) -> list[Any]:
        txn = await scope.call_tool("begin")
        await scope.call_tool("execute", {"txn": txn, "sql": INSERT, "params": [hostile, 5]})
        found = await scope.call_tool(
            "query",
            {
                "txn": txn,
                "sql": "SELECT name, '$1' AS literal, CAST($2 AS TEXT) AS again FROM accounts WHERE name = $1",
                "params": [hostile, "$1"],
            },
        )
        await scope.call_tool("commit", {"txn": txn})
        return [found, await scope.call_tool("tables")]

    app = make_app(backend.url)
    async with Runtime(app, entries=[direct(store)], config=approving(app)) as runtime:
        found, tables = (await runtime.run("direct", None)).output
    assert found["rows"] == [{"name": hostile, "literal": "$1", "again": "$1"}]
    assert tables == ["accounts"]
    assert await backend.rows("SELECT count(*) FROM accounts") == [(3,)]


async def test_placeholder_mistakes_are_explained(backend: Backend, make_app: MakeApp) -> None:
    async def mistakes(scope: CallScope) -> list[str]:
        txn = await scope.call_tool("begin", {"read_only": True})
        messages = []
        for sql in ("SELECT name FROM accounts WHERE balance > $2", "SELECT name FROM accounts WHERE balance > ?"):
            with pytest.raises(ToolFailed) as raised:
                await scope.call_tool("query", {"txn": txn, "sql": sql, "params": [10]})
            messages.append(raised.value.message.splitlines()[0])
            await scope.call_tool("rollback", {"txn": txn})
            txn = await scope.call_tool("begin", {"read_only": True})
        return messages

    async with Runtime(make_app(backend.url), entries=[direct(mistakes)]) as runtime:
        missing, question_mark = (await runtime.run("direct", None)).output
    if backend.kind == "sqlite":
        assert missing == "query failed: the statement uses $2, but 1 param(s) were given (params[0] binds $1)"
        assert question_mark == (
            "query failed: the statement uses ? placeholders: write $1, $2, ... instead (params[0] binds $1)"
        )
    else:
        assert missing == "query failed: could not determine data type of parameter $1"
        assert question_mark.startswith("query failed: syntax error at end of input")


async def test_values_no_database_can_take_are_refused_readably(backend: Backend, make_app: MakeApp) -> None:
    """Found by fuzzing: an integer beyond 64 bits, text with a lone surrogate (JSON can carry `\\ud800`)
    and a NUL in SQL text (on PostgreSQL it broke the connection)."""

    async def attempts(scope: CallScope) -> list[str]:
        txn = await scope.call_tool("begin", {})
        messages = []
        for sql, params in [
            ("SELECT $1::text AS v", [2**70]),
            ("SELECT $1::text AS v", ["a\ud800"]),
            ("SELECT 'a\ud800' AS v", []),
            ("SELECT 'a\x00b' AS v", []),
        ]:
            with pytest.raises(ToolFailed) as raised:
                await scope.call_tool("query", {"txn": txn, "sql": sql, "params": params})
            messages.append(raised.value.message)
        with pytest.raises(ToolFailed) as raised:
            await scope.call_tool("describe", {"table": "acc\udcffounts"})
        messages.append(raised.value.message)
        rows = await scope.call_tool("query", {"txn": txn, "sql": "SELECT count(*) AS n FROM accounts"})
        messages.append(repr(rows["rows"]))  # the transaction goes on
        return messages

    async with Runtime(make_app(backend.url), entries=[direct(attempts)]) as runtime:
        huge, param, text, nul, table, after = (await runtime.run("direct", None)).output
    if backend.kind == "sqlite":
        assert huge.startswith(
            "query failed: $1 is 1180591620717411303424, beyond SQLite's 64-bit integers "
            "(-9223372036854775808 to 9223372036854775807): pass it as text or as a float"
        )
    else:
        assert huge.startswith("query failed: ")  # PostgreSQL's own message
    surrogate = "it contains a lone surrogate (shown escaped), which is not text and cannot reach the database"
    assert param == f"query refused: params[0] ($1) is 'a\\ud800'; {surrogate}"
    assert text == f"query refused: the statement has '\\ud800' at character 10; {surrogate}"
    assert nul == (
        "query refused: the statement has a NUL character ('\\x00') at character 10, which no database "
        "accepts in SQL text; pass such data as a parameter"
    )
    assert table == f"describe: there is no table or view named 'acc\\udcffounts': {surrogate}"
    assert after == "[{'n': 2}]"


async def test_values_come_back_as_json(pg: Backend, make_app: MakeApp) -> None:
    sql = (
        "SELECT 1.50::numeric AS price, DATE '2024-02-29' AS day, '\\x00ff'::bytea AS raw, "
        "'00000000-0000-0000-0000-000000000001'::uuid AS id, ARRAY[1, 2] AS list, 'NaN'::float8 AS nan, "
        "'{\"a\": 1}'::jsonb AS doc, 1 AS n, 2 AS n, $1::date + 1 AS next_day, $2::numeric * 2 AS twice"
    )

    async def read(scope: CallScope) -> Any:
        txn = await scope.call_tool("begin", {"read_only": True})
        return await scope.call_tool("query", {"txn": txn, "sql": sql, "params": ["2024-02-28", "1.25"]})

    async with Runtime(make_app(pg.url), entries=[direct(read)]) as runtime:
        output = (await runtime.run("direct", None)).output
    assert output["rows"] == [
        {
            "price": "1.50",
            "day": "2024-02-29",
            "raw": "base64:AP8=",
            "id": "00000000-0000-0000-0000-000000000001",
            "list": [1, 2],
            "nan": "nan",
            "doc": '{"a": 1}',
            "n": 1,
            "n_2": 2,
            "next_day": "2024-02-29",  # strings in, strings out
            "twice": "2.50",
        }
    ]
    json.dumps(output)


async def test_a_statement_past_the_timeout_is_cancelled(backend: Backend, make_app: MakeApp) -> None:
    endless = (
        "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"
        if backend.kind == "sqlite"
        else "SELECT pg_sleep(60)"
    )
    script = clerk(
        tool_call("begin", read_only=True),
        tool_call("query", txn=returned("begin"), sql=endless),
        tool_call("rollback", txn=returned("begin")),
        "too slow",
    )
    app = make_app(backend.url, sql_statement_timeout=0.3)
    async with Runtime(app, entries=[script]) as runtime:
        result = await runtime.run("clerk", "count forever")
        stats = (await pool_of(app)).stats()
    timed_out = results(result.messages)[1][1].splitlines()[0]
    prefix = "query failed: "
    if backend.kind == "sqlite":
        assert timed_out == prefix + "the statement was cancelled: it ran longer than the statement timeout (0.3 s)"
    else:
        assert timed_out == prefix + "canceling statement due to statement timeout (the statement timeout is 0.3 s)"
    assert result.output == "too slow" and stats.in_use == 0


async def test_a_write_that_times_out_loses_the_whole_transaction(backend: Backend, make_app: MakeApp) -> None:
    endless = (
        "INSERT INTO accounts SELECT 'x' || i, i FROM "
        "(WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT i FROM r) AS s"
    )
    script = clerk(
        tool_call("begin"),
        tool_call("execute", txn=returned("begin"), sql=INSERT, params=["C", 1]),
        tool_call("execute", txn=returned("begin"), sql=endless),
        tool_call("execute", txn=returned("begin"), sql=INSERT, params=["D", 1]),
        tool_call("commit", txn=returned("begin")),
        "gave up",
    )
    app = make_app(backend.url, sql_statement_timeout=0.3)
    async with Runtime(app, entries=[script], config=approving(app)) as runtime:
        result = await runtime.run("clerk", "add C and D")
    (_, txn), (_, added), (_, timed_out), (_, after), (_, commit) = results(result.messages)
    assert added == {"rows_affected": 1}
    if backend.kind == "sqlite":  # SQLite rolls the whole transaction back: later statements must not autocommit
        assert timed_out.endswith(
            f"The database rolled back {txn}: nothing in it was saved. "
            f"Call rollback with txn='{txn}' to close the handle, then begin again."
        )
        assert after.startswith(f"execute refused: the database already rolled back {txn}")
        assert commit.startswith("commit failed: nothing was committed, because the database had already rolled back")
    else:
        assert f"{txn} is aborted" in timed_out
        assert after.startswith("execute failed: current transaction is aborted")
        assert commit.startswith("commit failed: PostgreSQL rolled the transaction back instead of committing it")
    assert await backend.rows("SELECT count(*) FROM accounts") == [(2,)]


async def test_tables_and_describe_show_the_schema(backend: Backend, make_app: MakeApp) -> None:
    await backend.run(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, account TEXT NOT NULL REFERENCES accounts(name), "
        "note TEXT DEFAULT 'none')",
        'CREATE VIEW "Rich Accounts" AS SELECT name FROM accounts WHERE balance > 75',
    )
    script = clerk(
        tool_call("tables"),
        tool_call("describe", table="orders"),
        tool_call("describe", table='"Rich Accounts"'),
        tool_call("describe", table="ordrs"),
        tool_call("describe", table="no such! name"),
        "described",
    )
    async with Runtime(make_app(backend.url), entries=[script]) as runtime:
        result = await runtime.run("clerk", "what is there?")
    (_, tables), (_, orders), (_, view), (_, unknown), (_, unparsable) = results(result.messages)
    assert tables == ['"Rich Accounts"', "accounts", "orders"]
    integer = "INTEGER" if backend.kind == "sqlite" else "integer"
    text = "TEXT" if backend.kind == "sqlite" else "text"
    assert [(c["name"], c["type"], c["nullable"], c["primary_key"]) for c in orders] == [
        ("id", integer, backend.kind == "sqlite", True),  # SQLite allows NULL in a non-rowid INTEGER PRIMARY KEY
        ("account", text, False, False),
        ("note", text, True, False),
    ]
    assert orders[2]["default"] == "'none'" if backend.kind == "sqlite" else "'none'::text"
    assert [c["name"] for c in view] == ["name"]
    assert unknown == "describe: there is no table or view named 'ordrs'. Tables: \"Rich Accounts\", accounts, orders"
    assert unparsable.startswith("describe: there is no table or view named 'no such! name'.")


# -- approvals --------------------------------------------------------------------------------------


async def test_by_default_execute_and_commit_ask_and_reject_all_refuses_them(
    backend: Backend, make_app: MakeApp
) -> None:
    assert SqlToolset.default_policy is not None
    assert dict(SqlToolset.default_policy.tools) == {"execute": "ask", "commit": "ask"}
    script = clerk(
        tool_call("tables"),
        tool_call("describe", table="accounts"),
        tool_call("begin"),
        tool_call("query", txn=returned("begin"), sql="SELECT count(*) AS n FROM accounts"),
        tool_call("execute", txn=returned("begin"), sql="DELETE FROM accounts"),
        tool_call("commit", txn=returned("begin")),
        tool_call("rollback", txn=returned("begin")),
        "refused",
    )
    app = make_app(backend.url)
    config = RuntimeConfig.from_container(app, approval_mode="reject_all")
    async with Runtime(app, entries=[script], config=config) as runtime:
        result = await runtime.run("clerk", "delete everything")
    read = dict(results(result.messages))
    assert read["query"] == {"columns": ["n"], "rows": [{"n": 2}]}
    for name in ("execute", "commit"):
        assert read[name].startswith(
            f"The call to '{name}' was not run: it needs approval (toolset 'sql' policy: tool '{name}' is 'ask') "
            "and approval_mode is 'reject_all'."
        )
    assert read["rollback"].endswith("rolled back")
    assert await backend.rows("SELECT count(*) FROM accounts") == [(2,)]


# -- concurrency, the pool, secrets -----------------------------------------------------------------


def transfer_steps() -> tuple[Step, ...]:
    """Move `amount` from one account to another, debiting and crediting in name order; roll back on failure."""

    def order(turn: Turn) -> tuple[str, str, int]:
        source, target, amount = turn.prompt.split()
        return source, target, int(amount)

    def update(position: int) -> Callable[[Turn], Any]:
        def step(turn: Turn) -> Any:
            if any(isinstance(content, str) and "failed" in content for content in turn.returns):
                return tool_call("rollback", txn=turn.returned("begin"))
            source, target, amount = order(turn)
            changes = sorted([(source, -amount), (target, amount)])
            name, delta = changes[position]
            sql = "UPDATE accounts SET balance = balance + $1 WHERE name = $2"
            return tool_call("execute", txn=turn.returned("begin"), sql=sql, params=[delta, name])

        return step

    def commit(turn: Turn) -> Any:
        if any(isinstance(content, str) and "failed" in content for content in turn.returns):
            return tool_call("rollback", txn=turn.returned("begin"))
        return tool_call("commit", txn=turn.returned("begin"))

    def report(turn: Turn) -> str:
        return str(turn.returns[0]).split()[-1] if turn.returns else "nothing"

    return (tool_call("begin"), update(0), update(1), commit, report)


def _tool_results(messages: Sequence[ModelMessage]) -> list[str]:
    """What each tool call of a run returned or failed with, in order (to show why a run went wrong)."""
    return [
        f"{part.tool_name} ({part.outcome}): {part.model_response_str()}"
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


async def test_fifty_concurrent_transfers_conserve_the_total(backend: Backend, make_app: MakeApp) -> None:
    names = ["A", "B", "C", "D", "E"]
    rows = ", ".join(f"('{name}', 1000)" for name in names)
    await backend.run("DELETE FROM accounts", f"INSERT INTO accounts VALUES {rows}")
    transfers = [(names[i % 5], names[(i * 3 + 1) % 5], i + 1) for i in range(50)]
    transfers = [(a, b if b != a else names[(names.index(a) + 1) % 5], n) for a, b, n in transfers]
    app = make_app(backend.url, sql_pool_size=4)
    with track_leaks() as leaks:
        async with Runtime(app, entries=[clerk(*transfer_steps())], config=approving(app)) as runtime:
            done = await asyncio.gather(*(runtime.run("clerk", f"{a} {b} {n}") for a, b, n in transfers))
            database = await pool_of(app)
            stats = database.stats()
            sessions = await backend.sessions() if backend.kind == "postgresql" else []
            leaks.assert_no_leaks()  # while the pool's connections are open: they hold nothing of the runs
        closed = database.stats()

    not_committed = [_tool_results(result.messages) for result in done if result.output != "committed"]
    assert not not_committed, (
        f"{len(not_committed)} of 50 did not commit; the first one's tool results: {not_committed[0]}"
    )
    balances = dict(await backend.rows("SELECT name, balance FROM accounts"))
    assert sum(balances.values()) == 5000
    expected = dict.fromkeys(names, 1000)
    for source, target, amount in transfers:
        expected[source] -= amount
        expected[target] += amount
    assert balances == expected
    assert stats.in_use == 0 and stats.idle == stats.open <= 4
    assert all(state == "idle" for state in sessions)  # none left idle in transaction
    assert (closed.closed, closed.open, closed.in_use) == (True, 0, 0)


async def test_the_pool_closes_with_the_runtime(backend: Backend, make_app: MakeApp) -> None:
    app = make_app(backend.url)
    script = clerk(tool_call("begin"), tool_call("rollback", txn=returned("begin")), "ok")
    runtime = Runtime(app, entries=[script])
    await runtime.run("clerk", "touch")
    database = await pool_of(app)
    assert database.stats().open == 1
    await runtime.aclose()

    assert database.stats() == type(database.stats())(size=5, open=0, in_use=0, idle=0, closed=True)
    assert not app.sql_database.initialized
    if backend.kind == "sqlite":
        assert not [t for t in threading.enumerate() if t.name.startswith("llm-do-sqlite-")]
    else:
        assert await _eventually_empty(backend.sessions)


async def _eventually_empty(read: Callable[[], Any]) -> bool:
    """PostgreSQL drops a closed session from pg_stat_activity as its backend exits: wait for that."""
    for _ in range(100):
        if not await read():
            return True
        await asyncio.sleep(0.05)
    return False


async def test_a_cancelled_run_gives_its_connection_back(backend: Backend, make_app: MakeApp) -> None:
    started = asyncio.Event()
    endless = (
        "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"
        if backend.kind == "sqlite"
        else "SELECT pg_sleep(60)"
    )

    async def slow(scope: CallScope) -> Any:
        txn = await scope.call_tool("begin")
        started.set()
        return await scope.call_tool("query", {"txn": txn, "sql": endless})

    async def quick(scope: CallScope) -> Any:
        txn = await scope.call_tool("begin")
        return await scope.call_tool("query", {"txn": txn, "sql": "SELECT count(*) AS n FROM accounts"})

    fast = direct(quick, "quick")
    app = make_app(backend.url, sql_pool_size=1)
    async with Runtime(app, entries=[direct(slow), fast]) as runtime:
        running = asyncio.ensure_future(runtime.run("direct", None))
        await started.wait()
        await asyncio.sleep(0.1)  # let the statement start (if it has not, begin is what gets cancelled)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        assert (await pool_of(app)).stats().in_use == 0
        again = await runtime.run("quick", None)  # the one connection is free and usable
    assert again.output["rows"] == [{"n": 2}]


async def test_the_database_url_is_never_shown(
    pg: Backend, make_app: MakeApp, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    socket = f"host={pg.server.socket_dir}&port={pg.server.port}"
    good = f"postgresql://postgres:{SECRET}@/{pg.database}?{socket}"
    shown: list[str] = []

    app = make_app(good)  # trust authentication ignores the password: this one works
    script = clerk(tool_call("begin"), tool_call("rollback", txn=returned("begin")), "ok")
    async with Runtime(app, entries=[script]) as runtime:
        result = await runtime.run("clerk", "go")
        database = await pool_of(app)
        shown += [repr(database), str(database), repr(app.config.database_url()), repr(SqlToolset(database))]
    assert result.output == "ok"

    for url in (
        f"postgresql://postgres:{SECRET}@/no_such_database?{socket}",  # the server refuses
        f"postgresql://postgres:{SECRET}@localhost:1/{pg.database}",  # nothing listens
        f"postgresql://postgres:{SECRET}@/{pg.database}?host=/nonexistent&port=5",  # no socket
    ):
        broken = make_app(url)
        async with Runtime(broken, entries=[clerk(tool_call("begin"), "no luck")]) as runtime:
            failed = await runtime.run("clerk", "go")
        message = results(failed.messages)[0][1]
        assert message.startswith("begin failed: could not") and "postgres" in message.lower()
        shown.append(message)

    for url in (
        f"mysql://root:{SECRET}@db/app",
        f"sqlite://root:{SECRET}@host/app.db",
        SECRET,
        f"postgresql://postgres:{SECRET}@localhost:port/{pg.database}",  # not a port
        f"postgresql://postgres:{SECRET}@/{pg.database}?host=/tmp&port={SECRET}",
    ):
        with pytest.raises(ConfigurationError) as raised:  # from the settings, or when the pool is made
            async with Runtime(make_app(url), entries=[clerk(tool_call("begin"), "no")]) as runtime:
                await runtime.run("clerk", "go")
        shown.append(str(raised.value))
        assert "LLM_DO_DATABASE_URL" in str(raised.value)

    shown.append(caplog.text)
    assert not [text for text in shown if SECRET in text or "Sup3r" in text]


def test_bad_sql_settings_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DO_SQL_MAX_ROWS", "0")
    monkeypatch.setenv("LLM_DO_SQL_STATEMENT_TIMEOUT", "soon")
    with pytest.raises(ConfigurationError) as raised:
        BuiltinToolsets()
    assert str(raised.value).splitlines()[1:3] == [
        "  LLM_DO_SQL_STATEMENT_TIMEOUT='soon': expected a number of seconds > 0, like LLM_DO_SQL_STATEMENT_TIMEOUT=30",
        "  LLM_DO_SQL_MAX_ROWS='0': expected a whole number >= 1, like LLM_DO_SQL_MAX_ROWS=100",
    ]


# -- docs -------------------------------------------------------------------------------------------


def test_the_postgresql_example_in_the_docs_prints_what_the_page_shows(pg: Backend, tmp_path: Path) -> None:
    page = (Path(__file__).parents[2] / "docs" / "toolsets.md").read_text()
    section = page.split("### An example on PostgreSQL", 1)[1]
    code = re.search(r"```py\n(.*?)```", section, re.DOTALL)
    output = re.search(r"Output:\n\n```text\n(.*?)```", section, re.DOTALL)
    assert code is not None and output is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_DO_")} | {"LLM_DO_DATABASE_URL": pg.url}
    done = subprocess.run(
        [sys.executable, "-c", code.group(1)], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == output.group(1)
    assert asyncio.run(pg.rows("SELECT name, balance FROM accounts ORDER BY name")) == [("A", 70), ("B", 80)]


async def test_connections_opened_while_a_file_switches_to_wal_mode_wait_for_it(tmp_path: Path) -> None:
    """A database file made by other tools is in rollback-journal mode; the pool switches it to WAL
    as its first connections open. Connections opened meanwhile got SQLITE_BUSY at once from SQLite
    (its busy handler is not called there), about one open in 250: the pool waits for the switch."""
    opened = 0
    for number in range(150):
        path = tmp_path / f"fresh{number}.db"
        with sqlite3.connect(path) as conn:  # rollback-journal mode, as sqlite3 makes it
            conn.execute("CREATE TABLE counter (n INTEGER NOT NULL)")
        conn.close()
        database = database_from_url(f"sqlite:///{path}", pool_size=16, statement_timeout=5.0)
        try:
            connections = await asyncio.gather(*(database.acquire() for _ in range(16)))  # 16 opened at once
            opened += len(connections)
            for connection in connections:
                await database.release(connection)
        finally:
            await database.aclose()
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        conn.close()
    assert opened == 150 * 16
