"""The examples run offline, as users run them."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import asyncpg

from ..postgres import PostgresServer

ROOT = Path(__file__).parents[2]


def run_example(*path: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run an example script as a user would, from the repository root; fail if it fails."""
    return subprocess.run(
        [sys.executable, str(ROOT.joinpath("examples", *path))],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
        env=env,
    )


def test_ledger_demo_moves_money_in_a_real_sqlite_file() -> None:
    completed = run_example("ledger", "main.py")
    lines = completed.stdout.splitlines()
    assert lines[0] == "balances before: {'A': 100, 'B': 50}"
    txn = lines[2].removeprefix("clerk says:      Done: ").removesuffix(" committed.")
    assert txn.startswith("txn_") and len(txn) == len("txn_") + 8
    assert (
        lines[1]
        == f"approval asked:  clerk wants to run db.commit(txn={txn!r}): toolset 'db' policy: tool 'commit' is 'ask'"
    )
    assert lines[3] == "balances after:  {'A': 90, 'B': 60}"
    assert lines[4] == "call call_1 entry=clerk depth=0 outcome=ok"
    assert lines[5].startswith("usage: 4 requests, ")


def test_sql_clerk_demo_shows_handles_an_approval_and_a_rollback() -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("LLM_DO_")}
    completed = run_example("sql_clerk", "sql_clerk.py", env=env)
    lines = completed.stdout.splitlines()
    assert lines[0] == "balances before: {'A': 100, 'B': 0}"
    handles = re.findall(r"the model held transaction (txn_[0-9a-f]{8});", completed.stdout)
    assert len(handles) == 2 and handles[0] != handles[1]
    first, second = handles
    asked = [line.strip() for line in lines if "approval asked" in line]
    assert asked == [
        f"approval asked: clerk wants to run sql.execute(txn={first!r}, sql='UPDATE accounts SET balance = "
        f"balance + $1 WHERE name = $2', params=[-10, 'A']): toolset 'sql' policy: tool 'execute' is 'ask'",
        f"approval asked: clerk wants to run sql.execute(txn={first!r}, sql='UPDATE accounts SET balance = "
        f"balance + $1 WHERE name = $2', params=[10, 'B']): toolset 'sql' policy: tool 'execute' is 'ask'",
        f"approval asked: clerk wants to run sql.commit(txn={first!r}): toolset 'sql' policy: tool 'commit' is 'ask'",
        f"approval asked: clerk wants to run sql.execute(txn={second!r}, sql='UPDATE accounts SET balance = "
        f"balance + $1 WHERE name = $2', params=[-10, 'A']): toolset 'sql' policy: tool 'execute' is 'ask'",
        f"approval asked: clerk wants to run sql.execute(txn={second!r}, sql='UPDATE accounts SET balance = "
        f"balance + $1 WHERE name = $2', params=[10, 'B']): toolset 'sql' policy: tool 'execute' is 'ask'",
    ]
    assert f"it answered: done: {first} committed" in completed.stdout
    assert "it answered: done: forgot to commit" in completed.stdout
    after = [line.strip() for line in lines if line.strip().startswith("balances now")]
    assert after == ["balances now: {'A': 90, 'B': 10}"] * 2  # the forgotten transfer was rolled back


async def _create_database(postgres: PostgresServer) -> str:
    name = postgres.new_database_name()
    conn = await asyncpg.connect(**postgres.connect_kwargs())  # type: ignore[arg-type]
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return postgres.dsn(name)


def test_service_demo_runs_offline_against_postgres(postgres: PostgresServer) -> None:
    database = asyncio.run(_create_database(postgres))
    completed = run_example("service", "demo.py", env={**os.environ, "LLM_DO_DATABASE_URL": database})
    assert database not in completed.stdout + completed.stderr  # the URL is a secret
    output = re.sub(r"txn_[0-9a-f]{8}", "txn_X", completed.stdout)
    assert output.splitlines() == [
        "balances before: {'A': 100, 'B': 50}",
        "pay-1: 200 moved 10 from A to B: txn_X committed",
        "  audit: begin txn_X",
        "  audit: transfer 10 from A to B ref=pay-1 in txn_X",
        "  audit: commit txn_X",
        "pay-2: 200 moved 5 from A to B (not committed yet); I did not commit txn_X",
        "  audit: begin txn_X",
        "  audit: transfer 5 from A to B ref=pay-2 in txn_X",
        "  audit: rollback txn_X (never committed)",
        "pay-3: 404 no account named 'Z'; open it first (POST /accounts)",
        "  audit: begin txn_X",
        "  audit: transfer 1 from A to Z ref=pay-3 in txn_X refused: no account named 'Z'; "
        "open it first (POST /accounts)",
        "  audit: rollback txn_X (never committed)",
        "balances after:  {'A': 90, 'B': 60}",
    ]


def test_the_users_app_passes_its_own_tests() -> None:
    """dependency-injector's FastAPI example with an assistant added: its tests run as its authors run them."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("LLM_DO_")}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "webapp/tests.py"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT / "examples" / "users_app",
        env=env,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"\b8 passed\b", done.stdout), done.stdout[-3000:]
