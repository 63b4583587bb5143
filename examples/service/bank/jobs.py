"""Transfers as background jobs: the queue the app defers to and the workers run.

Run workers with `llm-do worker bank.jobs:queue --app-dir examples/service --concurrency 10`
(`LLM_DO_DATABASE_URL` set; the queue lives in the same database unless `LLM_DO_JOBS_DATABASE_URL`
names another). Each worker opens one `Runtime` (and so one asyncpg pool) at start-up.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pydantic import SecretStr

from llm_do import CallScope, Runtime, entry
from llm_do.jobs import JobQueue

from . import ledger
from .wiring import Bank, teller

__all__ = ["bank_runtime", "make_queue", "queue", "transfer"]


@entry(name="transfer", toolsets=["teller"])
async def transfer(scope: CallScope, request: str) -> str:
    """One transfer as a job: the teller's run on the request (JSON text).

    A job can run more than once (its worker died after the commit, say). The ledger makes each
    reference at most once, so a rerun finds it made: that job is done, not failed.
    """
    try:
        return str(await scope.call_agent("teller", request))
    except ledger.AlreadyTransferred as made:
        return str(made)


@asynccontextmanager
async def bank_runtime(bank: Bank | None = None) -> AsyncIterator[Runtime]:
    """The bank's runtime, its pool opened first (outside any run) and shut down when it closes."""
    container = bank if bank is not None else Bank()
    try:
        started = container.init_resources()
        if started is not None:
            await started
        async with Runtime(container, entries=[teller, transfer]) as runtime:
            yield runtime
    finally:
        stopped = container.shutdown_resources()
        if stopped is not None:
            await stopped


def make_queue(database_url: str | SecretStr | None = None) -> JobQueue:
    """The bank's queue: the `transfer` entry runs as a job, made once per reference (`ledger.transfer`).

    `database_url` None: `LLM_DO_JOBS_DATABASE_URL`, else `LLM_DO_DATABASE_URL`, read when it opens."""
    return JobQueue(database_url, entries=["transfer"], runtime=bank_runtime)


queue = make_queue()
"""What `llm-do worker bank.jobs:queue` runs."""
