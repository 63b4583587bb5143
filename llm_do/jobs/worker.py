"""A worker process: one `Runtime` opened at start-up, procrastinate's worker running each job as one
run, jobs of dead workers run again, and reconnection after PostgreSQL goes away."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from procrastinate import sql as procrastinate_sql
from psycopg import OperationalError, errors

from ..process.signals import handling
from .journal import delete_old_journals
from .parking import RunParked, expire_pending
from .queue import JobQueue, RuntimeFactory, worker_name
from .redact import hide_attachment_bytes
from .settings import JobSettings
from .wakeup import wake_workers

__all__ = ["WorkerOptions", "expire_approvals", "recover_stalled_jobs", "remove_old_journals", "run_worker"]

logger = logging.getLogger("llm_do.jobs")


class _ParkedIsNoError(logging.Filter):
    """procrastinate logs a job that ended by raising as an error, with its traceback: a parked job's run ended
    as asked (`RunParked`, logged by llm-do), so its line is kept, at INFO and without the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], RunParked):
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.msg = f"{record.msg} (parked, awaiting approval)"
            record.exc_info = record.exc_text = None
        return True


_PARKED_IS_NO_ERROR = _ParkedIsNoError()

T = TypeVar("T")

_STILL_RUNNING = "SELECT 1 FROM procrastinate_jobs WHERE id = %s AND status = 'doing' FOR UPDATE"
"""A stalled job is still running once its row is locked: a live run's process that was only slow may have ended
or parked it meanwhile (procrastinate's retry would queue a parked job again)."""

_RECOVERY_LOCK = 7_2616_3033  # advisory lock key, with the queue's: one worker per queue re-queues stalled jobs


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """How a worker runs; the defaults come from `JobSettings` (`LLM_DO_WORKER_*`)."""

    concurrency: int = 10
    """Jobs run at once, each one run of the worker's single `Runtime`."""
    heartbeat: float = 5.0
    """Seconds between heartbeats."""
    stalled_timeout: float = 30.0
    """A worker silent this long is dead: its running jobs are queued again (checked every heartbeat)."""
    shutdown_timeout: float = 30.0
    """On stop, seconds running jobs may take to finish before they are cancelled (and their teardown runs)."""
    poll_interval: float = 1.0
    """Seconds between polls for new jobs and cancellations (notifications usually come first)."""
    reconnect_delay: float = 5.0
    """Longest wait between reconnection attempts after PostgreSQL went away."""
    database_timeout: float = 30.0
    """Seconds to wait for a database connection before PostgreSQL counts as gone (then: reconnect)."""
    name: str | None = None
    """The worker's name in logs and results (default: host:pid)."""
    journal_retention: float = 7 * 24 * 3600.0
    """Seconds a finished job's journal is kept; the worker removes older ones as it goes (`remove_old_journals`)."""
    approval_expiry: float = 7 * 24 * 3600.0
    """Seconds a parked job's question waits before the worker denies it (`expire_approvals`, every heartbeat)."""
    parking_rounds: int = 3
    """Times in a row a parked job's resumed run may diverge from its journal before its question and park again;
    the next time, the job fails (`ParkingDiverged`)."""

    @classmethod
    def from_settings(cls, settings: JobSettings | None = None, **overrides: Any) -> WorkerOptions:
        values = settings if settings is not None else JobSettings()
        options = cls(
            concurrency=values.worker_concurrency,
            heartbeat=values.worker_heartbeat,
            stalled_timeout=values.worker_stalled_timeout,
            shutdown_timeout=values.worker_shutdown_timeout,
            database_timeout=values.worker_database_timeout,
            journal_retention=values.jobs_journal_retention,
            approval_expiry=values.jobs_approval_expiry,
            parking_rounds=values.jobs_parking_rounds,
        )
        return replace(options, **{key: value for key, value in overrides.items() if value is not None})


async def run_worker(
    queue: JobQueue,
    options: WorkerOptions | None = None,
    *,
    runtime: RuntimeFactory | None = None,
    stop: asyncio.Event | None = None,
    install_signal_handlers: bool = True,
) -> None:
    """Run jobs of `queue` until `stop` is set, SIGTERM/SIGINT/SIGHUP arrives, or the task is cancelled.

    Opens the queue (if it is not open) and applies the schema, then opens one runtime with
    `runtime` (default: the queue's factory) for the worker's life. Running jobs get
    `options.shutdown_timeout` seconds to finish when the worker stops. If PostgreSQL goes away, the
    worker waits for it and starts again; jobs it could not finish are run again once they stall.
    """
    options = options if options is not None else WorkerOptions.from_settings()
    factory = runtime if runtime is not None else queue.runtime_factory
    if factory is None:
        raise RuntimeError("the worker needs a runtime: pass run_worker(runtime=...) or JobQueue(runtime=...)")
    stop = stop if stop is not None else asyncio.Event()
    logging.getLogger("procrastinate.worker").addFilter(_PARKED_IS_NO_ERROR)  # once: the same filter
    name = options.name or worker_name()
    hide_attachment_bytes("procrastinate.worker", f"procrastinate.worker.{name}")  # it logs each job's arguments
    opened_here = not queue.is_open
    if opened_here:
        await queue.open(pool_size=options.concurrency + 4, wait_timeout=options.database_timeout)
    try:
        await queue.apply_schema()
        async with factory() as opened:
            queue.attach(opened, parking_rounds=options.parking_rounds)
            recovery = asyncio.create_task(_recover_forever(queue, options), name="llm-do stalled jobs")
            with _signals(stop) if install_signal_handlers else contextlib.nullcontext():
                try:
                    logger.info("worker %s started (concurrency %d)", name, options.concurrency)
                    await _supervise(queue, options, name, stop)
                finally:
                    recovery.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await recovery
                    queue.attach(None)
    finally:
        if opened_here:
            await queue.close()
    logger.info("worker %s stopped", name)


async def _supervise(queue: JobQueue, options: WorkerOptions, name: str, stop: asyncio.Event) -> None:
    """Run procrastinate's worker; if it ends without being asked (lost database), wait and start again."""
    while not stop.is_set():
        worker = asyncio.create_task(
            queue.app.run_worker_async(
                queues=[queue.queue_name],
                name=name,
                concurrency=options.concurrency,
                wait=True,
                install_signal_handlers=False,
                update_heartbeat_interval=options.heartbeat,
                stalled_worker_timeout=options.stalled_timeout,
                shutdown_graceful_timeout=options.shutdown_timeout,
                fetch_job_polling_interval=options.poll_interval,
                abort_job_polling_interval=options.poll_interval,
            ),
            name="procrastinate worker",
        )
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait((worker, stopping), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not worker.done():
                worker.cancel()  # procrastinate then stops gracefully: running jobs get shutdown_timeout
                await asyncio.wait((worker,))
        if stop.is_set():
            with contextlib.suppress(Exception, asyncio.CancelledError):
                worker.result()
            return
        error = worker.exception() if not worker.cancelled() else None
        logger.warning("worker %s lost its database (%s); reconnecting", name, error or "worker stopped")
        await _reconnected(queue, options, stop)


async def _reconnected(queue: JobQueue, options: WorkerOptions, stop: asyncio.Event) -> None:
    delay = 0.1
    while not stop.is_set():
        try:
            async with queue.pool.connection(timeout=max(delay, 1.0)) as conn:
                await conn.execute("SELECT 1")
            logger.info("database reachable again; the worker starts again")
            return
        except Exception as error:
            logger.debug("database still unreachable: %s", error)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)
        delay = min(delay * 2, options.reconnect_delay)


async def _recover_forever(queue: JobQueue, options: WorkerOptions) -> None:
    """The worker's housekeeping: stalled jobs and expired approvals every heartbeat, old journals every
    `_journal_interval`. Each step is tried on its own: one that fails (the database is away, a query is
    refused) is logged and tried again next time, and does not keep the others from running."""
    loop = asyncio.get_running_loop()
    every = _journal_interval(options)
    cleaned = loop.time()
    while True:
        await asyncio.sleep(options.heartbeat)
        found = await _step("recovering stalled jobs", recover_stalled_jobs(queue, options.stalled_timeout))
        if found:
            jobs = ", ".join(map(str, found))
            logger.warning("queued again %d job(s) of dead workers (cancelled ones aborted): %s", len(found), jobs)
        if queue.approvals == "park":
            expired = await _step("expiring approvals", expire_approvals(queue, options.approval_expiry))
            for job_id, approval_id in expired or ():
                logger.warning("job %d: approval %s expired undecided; denied, the job goes on", job_id, approval_id)
        if loop.time() - cleaned >= every:
            cleaned = loop.time()
            removed = await _step("removing old journals", remove_old_journals(queue, options.journal_retention))
            if removed:
                logger.info("removed %d journaled response(s) of jobs finished long enough ago", removed)


async def _step(what: str, work: Awaitable[T]) -> T | None:
    """One housekeeping step's result; None if it failed, and it is tried again at the next heartbeat. A lost
    database is a debug line (the supervisor reconnects the worker); any other failure a warning."""
    try:
        return await work
    except (OperationalError, OSError) as error:
        logger.debug("housekeeping: %s failed: %s", what, error)
    except Exception as error:
        logger.warning("housekeeping: %s failed: %s", what, error)
    return None


def _journal_interval(options: WorkerOptions) -> float:
    """How often a worker removes old journals: a tenth of the retention, between one heartbeat and a minute."""
    return min(max(options.journal_retention / 10, options.heartbeat), 60.0)


async def recover_stalled_jobs(queue: JobQueue, stalled_timeout: float) -> list[int]:
    """Queue again the running jobs of `queue` whose workers were silent for `stalled_timeout` seconds;
    their ids. A job whose cancellation was asked for is `aborted` instead (procrastinate would mark it
    `failed`). Other queues' jobs are left to their own workers. A job whose queueing lock another queued job
    took meanwhile (procrastinate queues one job per lock) stays until a later call finds the lock free.

    One worker of the queue at a time does it (an advisory lock), so a job is never queued twice.
    """
    async with queue.pool.connection() as conn, conn.transaction():
        locked = await (
            await conn.execute("SELECT pg_try_advisory_xact_lock(%s, hashtext(%s))", (_RECOVERY_LOCK, queue.queue_name))
        ).fetchone()
        if locked is None or not locked[0]:
            return []
        cursor = await conn.execute(
            procrastinate_sql.queries["select_stalled_jobs_by_heartbeat"],
            {"queue": queue.queue_name, "task_name": None, "seconds_since_heartbeat": stalled_timeout},
        )
        ids = [int(row[0]) for row in await cursor.fetchall()]
        cancelled = await conn.execute(
            "SELECT id FROM procrastinate_jobs WHERE id = ANY(%s) AND abort_requested", (ids,)
        )
        aborted = {int(row[0]) for row in await cancelled.fetchall()}
        found: list[int] = []
        for job_id in ids:
            if job_id in aborted:
                await conn.execute(
                    procrastinate_sql.queries["finish_job"],
                    {"job_id": job_id, "status": "aborted", "delete_job": False},
                )
                found.append(job_id)
                continue
            try:
                async with conn.transaction():  # a savepoint: one job's refusal leaves the others' recovery
                    still = await conn.execute(_STILL_RUNNING, (job_id,))
                    if await still.fetchone() is None:  # it ended meanwhile (a live run's end, or its parking)
                        continue
                    await conn.execute(
                        procrastinate_sql.queries["retry_job"],
                        {
                            "job_id": job_id,
                            "retry_at": datetime.now(UTC),
                            "new_priority": None,
                            "new_queue_name": None,
                            "new_lock": None,
                        },
                    )
                    await wake_workers(conn, queue.queue_name, job_id)
            except errors.UniqueViolation:
                logger.warning(
                    "job %d of a dead worker waits to be queued again: another queued job holds its queueing lock",
                    job_id,
                )
                continue
            found.append(job_id)
    return found


async def expire_approvals(queue: JobQueue, expiry: float) -> list[tuple[int, str]]:
    """Deny the questions `queue`'s parked jobs have waited on for more than `expiry` seconds, and queue those
    jobs again (their runs read the denial); the (job id, approval id) of each. Workers of a parking queue do
    it every heartbeat."""
    return await expire_pending(queue.pool, queue.queue_name, expiry)


async def remove_old_journals(queue: JobQueue, retention: float) -> int:
    """Remove the journals of `queue`'s jobs that reached a final status more than `retention` seconds ago
    (and of jobs deleted since); the number of journaled responses removed. Workers do it as they go, every
    tenth of `WorkerOptions.journal_retention` (at least every heartbeat, at most every minute)."""
    return await delete_old_journals(queue.pool, queue.queue_name, retention)


def _signals(stop: asyncio.Event) -> contextlib.AbstractContextManager[list[int]]:
    return handling((signal.SIGTERM, signal.SIGINT, signal.SIGHUP), lambda _signum: stop.set())
