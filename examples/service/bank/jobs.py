"""Transfers as background jobs: the queue the app defers to and the workers run.

Run workers with `llm-do worker bank.jobs:queue --app-dir examples/service --concurrency 10`
(`LLM_DO_DATABASE_URL` set; the queue lives in the same database unless `LLM_DO_JOBS_DATABASE_URL`
names another). Each worker opens one `Runtime` (and so one asyncpg pool) at start-up.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pydantic import SecretStr

from llm_do import Runtime
from llm_do.jobs import JobQueue

from .wiring import Bank, teller

__all__ = ["bank_runtime", "make_queue", "queue"]


@asynccontextmanager
async def bank_runtime(bank: Bank | None = None) -> AsyncIterator[Runtime]:
    """The bank's runtime, its pool opened first (outside any run) and shut down when it closes."""
    container = bank if bank is not None else Bank()
    try:
        started = container.init_resources()
        if started is not None:
            await started
        async with Runtime(container, entries=[teller]) as runtime:
            yield runtime
    finally:
        stopped = container.shutdown_resources()
        if stopped is not None:
            await stopped


def make_queue(database_url: str | SecretStr | None = None) -> JobQueue:
    """The bank's queue: only the teller runs as a job, exactly-once by its reference (`ledger.transfer`).

    `database_url` None: `LLM_DO_JOBS_DATABASE_URL`, else `LLM_DO_DATABASE_URL`, read when it opens."""
    return JobQueue(database_url, entries=["teller"], runtime=bank_runtime)


queue = make_queue()
"""What `llm-do worker bank.jobs:queue` runs."""
