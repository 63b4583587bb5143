"""Real worker processes, fresh databases and reads of them, and waiting for a job, for the jobs and service tests."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncpg

from .postgres import PostgresServer

if TYPE_CHECKING:  # not imported: tests/conftest.py imports this module, and the quick tier runs without the jobs extra
    from llm_do.jobs import JobQueue, JobRecord

ROOT = Path(__file__).parent.parent

FAST_WORKER = {
    "LLM_DO_WORKER_HEARTBEAT": "0.2",
    "LLM_DO_WORKER_STALLED_TIMEOUT": "1.5",
    "LLM_DO_WORKER_SHUTDOWN_TIMEOUT": "5",
    "LLM_DO_WORKER_DATABASE_TIMEOUT": "1",
}
"""Heartbeats every 0.2 s; a worker silent for 1.5 s is dead and its jobs run again."""


@asynccontextmanager
async def fresh_database(postgres: PostgresServer) -> AsyncIterator[str]:
    """A new empty database on `postgres`; dropped afterwards (its connections ended first)."""
    name = postgres.new_database_name()
    admin = await asyncpg.connect(postgres.dsn())
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield postgres.dsn(name)
    finally:
        admin = await asyncpg.connect(postgres.dsn())
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


async def query(dsn: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    """The rows of one statement, on a connection of its own."""
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


async def finished(queue: JobQueue, job_id: int, within: float = 60.0) -> JobRecord:
    """The job's record once it has finished; fails after `within` seconds."""
    async with asyncio.timeout(within):
        return await queue.wait(job_id, interval=0.05)


async def eventually(check: Callable[[], Awaitable[bool]], what: str, within: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"still not true after {within}s: {what}")
        await asyncio.sleep(0.05)


def _no_signal_ignored() -> None:
    """In the child: SIGINT and SIGHUP not ignored, however the suite was started (`nohup`, `&` in a script)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


class Worker:
    """`llm-do worker TARGET` in a subprocess, its output in a log file."""

    def __init__(
        self,
        target: str,
        dsn: str,
        log: Path,
        *,
        concurrency: int = 4,
        env: dict[str, str] | None = None,
        args: tuple[str, ...] = (),
    ) -> None:
        self.log = log
        environment = {**os.environ, "LLM_DO_JOBS_DATABASE_URL": dsn, **FAST_WORKER, **(env or {})}
        environment["PYTHONPATH"] = os.pathsep.join([str(ROOT), environment.get("PYTHONPATH", "")])
        command = [sys.executable, "-m", "llm_do.cli", "worker", target, "--concurrency", str(concurrency), "-v", *args]
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=environment, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_no_signal_ignored
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM, then wait for it to exit (SIGKILL if it does not within `timeout`)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
                raise AssertionError(f"worker {self.pid} ignored SIGTERM; its log:\n{self.output()}") from None
        return self.process.returncode


async def registered_workers(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        if await conn.fetchval("SELECT to_regclass('procrastinate_workers')") is None:
            return 0
        return int(await conn.fetchval("SELECT count(*) FROM procrastinate_workers"))
    finally:
        await conn.close()


async def wait_for_workers(dsn: str, count: int, workers: list[Worker]) -> None:
    async def ready() -> bool:
        for worker in workers:
            if worker.process.poll() is not None:
                raise AssertionError(f"worker {worker.pid} exited with {worker.process.returncode}:\n{worker.output()}")
        return await registered_workers(dsn) >= count

    await eventually(ready, f"{count} worker(s) registered")
