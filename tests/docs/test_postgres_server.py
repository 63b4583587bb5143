"""The suite's throwaway PostgreSQL server starts, answers on its socket, and is PostgreSQL 15 or newer;
when it cannot start, `make test` stops at once with one line saying what to do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import asyncpg

from ..postgres import CHOOSE, PostgresServer

ROOT = Path(__file__).parents[2]


async def test_the_throwaway_server_answers(postgres: PostgresServer) -> None:
    connection = await asyncpg.connect(**postgres.connect_kwargs())  # type: ignore[arg-type]
    try:
        version = await connection.fetchval("show server_version_num")
    finally:
        await connection.close()
    assert int(version) >= 150000


def test_the_preflight_names_the_server_it_starts() -> None:
    done = subprocess.run([sys.executable, "-m", "tests.postgres"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("postgres (PostgreSQL) ") and done.stdout.endswith(" starts\n"), done.stdout


def test_the_preflight_says_in_one_line_what_to_do_when_no_server_can_start(tmp_path: Path) -> None:
    environment = {**os.environ, CHOOSE: str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.postgres"], cwd=ROOT, env=environment, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert done.stderr == (
        f"PostgreSQL, which the tests need: {CHOOSE}={tmp_path} has no initdb: name the bin directory of a "
        "PostgreSQL installation, like /usr/lib/postgresql/15/bin\n"
    )
