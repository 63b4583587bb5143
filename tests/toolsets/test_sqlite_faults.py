"""The `sql` toolset when its SQLite file fails under a run: locked by another process, or removed. The model
reads a tool error that says what happened, the run goes on, and nothing hangs."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic_ai import Agent

from containers import BuiltinToolsets
from llm_do import AgentEntry, Runtime, RuntimeConfig
from llm_do.testing import Turn, answering, tool_call

ACCOUNTS = "CREATE TABLE accounts (name TEXT PRIMARY KEY, balance INTEGER NOT NULL)"


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute(ACCOUNTS)
        conn.execute("INSERT INTO accounts VALUES ('A', 100)")
    conn.close()
    return path


def app_on(path: Path, monkeypatch: pytest.MonkeyPatch) -> BuiltinToolsets:
    monkeypatch.setenv("LLM_DO_DATABASE_URL", f"sqlite:///{path}")
    monkeypatch.setenv("LLM_DO_SQL_STATEMENT_TIMEOUT", "0.5")
    return BuiltinToolsets()


@pytest.fixture
def locker(database: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the file's write lock, until it is killed."""
    script = (
        "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
        "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); sys.stdin.read()"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script, str(database)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline() == "locked\n"
    yield process
    process.kill()
    process.wait()


async def test_a_file_another_process_keeps_locked_is_a_tool_error_and_works_once_it_lets_go(
    database: Path, locker: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    app = app_on(database, monkeypatch)
    script = answering(lambda turn: tool_call("begin") if turn.step == 0 else f"said: {turn.returns[0]}")
    clerk = AgentEntry(Agent(script), name="clerk", toolsets=["sql"])
    async with Runtime(
        app, entries=[clerk], config=RuntimeConfig.from_container(app, approval_mode="approve_all")
    ) as runtime:
        locked = await runtime.run("clerk", "go")
        locker.kill()
        locker.wait()
        free = await runtime.run("clerk", "again")
    assert "locked" in locked.output and "try again later" in locked.output
    assert free.output.startswith("said: txn_")


def replace_file(database: Path) -> None:
    """Remove the database (and its WAL files) and put a new, empty one in its place: a restore, say."""
    for path in database.parent.glob(f"{database.name}*"):
        path.unlink()
    with sqlite3.connect(database) as conn:
        conn.execute(ACCOUNTS)
    conn.close()


async def test_a_file_replaced_under_an_open_transaction_is_a_tool_error_and_the_run_goes_on_with_the_new_file(
    database: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite in WAL mode writes on into a removed file without a word: a commit there would be lost."""
    app = app_on(database, monkeypatch)
    insert = "INSERT INTO accounts VALUES ('B', 1)"
    said: list[str] = []

    def model(turn: Turn) -> object:
        step = turn.step % 3  # begin, execute, commit; then again
        if step == 0 and turn.step:
            said.append(str(turn.returns[0]))
        if turn.step == 6:
            return "done"
        if step == 0:
            return tool_call("begin")
        if turn.step == 1:
            replace_file(database)
        if step == 1:
            return tool_call("execute", txn=turn.returned("begin"), sql=insert)
        return tool_call("commit", txn=turn.returned("begin"))

    clerk = AgentEntry(Agent(answering(model)), name="clerk", toolsets=["sql"])
    config = RuntimeConfig.from_container(app, approval_mode="approve_all")
    async with Runtime(app, entries=[clerk], config=config) as runtime:
        result = await runtime.run("clerk", "add B")
    assert result.output == "done"
    lost, committed = said
    assert lost.startswith("commit failed: the database file was removed or replaced"), lost
    assert "Nothing was committed" in lost
    assert committed.endswith(" committed")
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT name, balance FROM accounts").fetchall() == [("B", 1)]
    conn.close()


async def test_a_file_replaced_between_runs_is_the_one_the_next_run_writes_to(
    database: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool's idle connection still has the removed file open: the next transaction is the new file's."""
    app = app_on(database, monkeypatch)

    def model(turn: Turn) -> object:
        if turn.step == 0:
            return tool_call("begin")
        if turn.step == 1:
            return tool_call(
                "execute", txn=turn.returned("begin"), sql="INSERT INTO accounts VALUES ($1, 1)", params=[turn.prompt]
            )
        if turn.step == 2:
            return tool_call("commit", txn=turn.returned("begin"))
        return str(turn.returns[0])

    clerk = AgentEntry(Agent(answering(model)), name="clerk", toolsets=["sql"])
    config = RuntimeConfig.from_container(app, approval_mode="approve_all")
    async with Runtime(app, entries=[clerk], config=config) as runtime:
        assert (await runtime.run("clerk", "B")).output.endswith(" committed")
        replace_file(database)
        assert (await runtime.run("clerk", "C")).output.endswith(" committed")
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT name FROM accounts").fetchall() == [("C",)]
    conn.close()


async def test_a_file_removed_between_runs_is_a_tool_error_and_no_empty_file_takes_its_place(
    database: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool had the file open: a new, empty database made at its path would answer 'no such table' as if the
    data had never been there. The model reads that the file is gone; once it is back, the next run uses it."""
    app = app_on(database, monkeypatch)
    backup = database.with_name("backup.db")

    def model(turn: Turn) -> object:
        if turn.step == 0:
            return tool_call("begin", read_only=True)
        if turn.step == 1 and not str(turn.returns[0]).startswith("txn_"):
            return str(turn.returns[0])
        if turn.step == 1:
            return tool_call("query", txn=turn.returned("begin"), sql="SELECT name FROM accounts")
        return str(turn.returns[0])

    clerk = AgentEntry(Agent(answering(model)), name="clerk", toolsets=["sql"])
    config = RuntimeConfig.from_container(app, approval_mode="approve_all")
    async with Runtime(app, entries=[clerk], config=config) as runtime:
        assert "'A'" in (await runtime.run("clerk", "read")).output
        os.rename(database, backup)
        gone = (await runtime.run("clerk", "read")).output
        assert database.name not in os.listdir(database.parent)
        os.rename(backup, database)
        back = (await runtime.run("clerk", "read")).output
    assert gone.startswith("begin failed: ") and "the database file is gone" in gone, gone
    assert "'A'" in back
