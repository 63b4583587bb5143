"""A web process as one of procrastinate's workers, holding the jobs of the live runs it streams (`LiveParking`).

Each live run streamed through a `LiveParking` is, from its first request, a job of the queue in status `doing`,
held by this process's row in `procrastinate_workers` (registered at the first run). While runs are live the
process sends heartbeats, as `llm-do worker` does (`LLM_DO_WORKER_HEARTBEAT`); when they stop (the process died:
SIGKILL, OOM, a lost machine), the workers' stalled-job recovery (`recover_stalled_jobs`, after
`LLM_DO_WORKER_STALLED_TIMEOUT`) queues the job again and a worker goes on with the run from its journal.

A job is the live run's while it is `doing` and was never queued again (`attempts = 0`): the run's end, its parking
and each heartbeat read that in the job's row, in one statement, and a run whose job a worker took (the process was
only slow) is told so (`lost`) and stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from psycopg_pool import AsyncConnectionPool

__all__ = ["HELD", "LiveHold"]

logger = logging.getLogger("llm_do.jobs")

HELD = "status = 'doing' AND attempts = 0"
"""A live run's job that no worker took: still running in the process that started it."""

_REGISTER = "SELECT worker_id FROM procrastinate_register_worker_v1()"
_UNREGISTER = "SELECT procrastinate_unregister_worker_v1(%s)"
_BEAT = f"""
WITH beat AS (UPDATE procrastinate_workers SET last_heartbeat = now() WHERE id = %(worker)s RETURNING id)
SELECT (SELECT count(*) FROM beat) AS alive,
       array(SELECT id FROM procrastinate_jobs WHERE id = ANY(%(jobs)s) AND {HELD}) AS held
"""
_CLAIM = f"UPDATE procrastinate_jobs SET worker_id = %(worker)s WHERE id = ANY(%(jobs)s) AND {HELD}"
"""The jobs of a process whose worker row was pruned (its heartbeats came late) and that no worker took yet."""


class LiveHold:
    """This process's worker row, and the heartbeats that keep the jobs of its live runs (see the module)."""

    def __init__(self, pool: AsyncConnectionPool[Any], heartbeat: float) -> None:
        self.pool = pool
        self.heartbeat = heartbeat
        self.worker_id: int | None = None
        self.runs: dict[int, Callable[[], None]] = {}
        """Each live run's job, and what stops the run if a worker took its job."""
        self._beating: asyncio.Task[None] | None = None
        self._registering = asyncio.Lock()

    async def register(self) -> int:
        """This process's worker id, registered anew (the first run, or the row was pruned)."""
        async with self._registering:
            async with self.pool.connection() as conn:
                found = await (await conn.execute(_REGISTER)).fetchone()
            assert found is not None
            self.worker_id = int(found[0])
            logger.info("this process holds its live runs' jobs as worker %d", self.worker_id)
            return self.worker_id

    def holding(self, job_id: int, lost: Callable[[], None]) -> None:
        """Job `job_id` is a live run's, held here; `lost()` is called if a worker takes it."""
        self.runs[job_id] = lost
        if self._beating is None or self._beating.done():
            self._beating = asyncio.get_running_loop().create_task(self._beat(), name="llm-do live runs' heartbeat")

    def released(self, job_id: int) -> None:
        self.runs.pop(job_id, None)

    async def _beat(self) -> None:
        """Heartbeats while live runs are held here (none needed without: a run's start refreshes it)."""
        while self.runs:
            await asyncio.sleep(self.heartbeat)
            if not self.runs:
                return
            try:
                await self._once()
            except Exception as error:  # the database is away: the next heartbeat tries again
                logger.warning("live runs' heartbeat failed: %s", error)

    async def _once(self) -> None:
        jobs = list(self.runs)
        async with self.pool.connection() as conn, conn.transaction():
            row = await (await conn.execute(_BEAT, {"worker": self.worker_id, "jobs": jobs})).fetchone()
            assert row is not None
            alive, held = bool(row[0]), {int(job) for job in row[1]}
            if not alive:  # pruned as stalled: the jobs no worker took yet are held again under a new row
                found = await (await conn.execute(_REGISTER)).fetchone()
                assert found is not None
                self.worker_id = int(found[0])
                await conn.execute(_CLAIM, {"worker": self.worker_id, "jobs": list(held)})
                logger.warning("heartbeats came late: this process holds its live runs as worker %d", self.worker_id)
        for job_id in jobs:
            if job_id not in held:
                lost = self.runs.pop(job_id, None)
                if lost is not None:
                    logger.warning("job %d: a worker took this live run (this process was silent too long)", job_id)
                    lost()

    async def aclose(self) -> None:
        """Stop the heartbeats and unregister this process's worker row (the jobs of runs still live then are
        queued again by the workers: call it once the runs have ended)."""
        beating, self._beating = self._beating, None
        if beating is not None:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating
        worker, self.worker_id = self.worker_id, None
        if worker is not None:
            async with self.pool.connection() as conn:
                await conn.execute(_UNREGISTER, (worker,))
