"""One job = one run: run the entry on the worker's `Runtime` and store what the run left."""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from procrastinate.exceptions import JobAborted
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from .. import Approver, Attachment, AttachmentError, Runtime
from ..approvals import stable_approval_ids
from ..models.journal import Journal, Unwritten
from ..results import RunReport, RunResult, run_report
from .context import JobInfo, reset_current, set_current
from .journal import JobJournals, PostgresJournal
from .journal_writer import JournalRows
from .parking import Parking, RunParked
from .records import calls_json, output_json, usage_json
from .retry import WorkerShutdown
from .store import write_result

__all__ = ["CANCEL_REQUESTED", "SHUTDOWN", "STORE_PATIENCE", "perform", "stored_attachments"]

SHUTDOWN = "worker shutdown"
"""The cancel reason of a job stopped by its worker's shutdown (it is queued again)."""
CANCEL_REQUESTED = "cancel requested"
"""The cancel reason of a job stopped by `JobQueue.cancel`."""

logger = logging.getLogger("llm_do.jobs")


async def perform(
    runtime: Runtime,
    pool: AsyncConnectionPool[Any],
    job: JobInfo,
    input_data: Any,
    cancel_reason: Callable[[], str | None],
    attachments: Any = None,
    journals: JobJournals | None = None,
    approver: Approver | None = None,
    *,
    session: str | None = None,
    grants: Sequence[Sequence[str]] | None = None,
) -> None:
    """Run `job` as one run of `runtime`; store its output, or its error, before returning or raising.

    `attachments` are the job's stored attachments (see `stored_attachments`), checked against their
    digests and the runtime's limits before the run starts; a mismatch fails the job. With `journals`, the
    run's model responses are journaled, and answered from what earlier attempts journaled.

    The run's exception (or the cancellation that ended it) is re-raised unchanged, so procrastinate
    marks the job failed (retried if its task retries) or aborted. A run that parked (`approver`, a `Parking`,
    stored a question and raised `RunParked`) raises that `RunParked` and stores no result, however the run
    ended: a tool that caught the exception does not make the job succeed with its question open. A run whose
    approver found the job cancelled (`JobAborted`, raised instead of parking) is stored as cancelled and raises
    that `JobAborted` (procrastinate marks the job aborted).

    `session`: the run continues that session's conversation (a live run of it parked as this job): its history is
    read from the runtime's history store, and the run's turn saved there when it ends, as any run of the session;
    `grants` are its "approve for session" answers given in the live run (each a session key), which hold again.
    """
    started = datetime.now(UTC)
    token = set_current(job)  # Runtime.run copies this context into the run
    journal: Journal | None = None
    try:
        handed = _attachments_of(job, attachments, runtime) if attachments else ()
        if session is not None and grants:
            opened = await runtime.session(session)
            opened.grants.granted.update((toolset, tool, args) for toolset, tool, args in grants)
        # Each attempt asks the same questions with the same ids (a stored decision finds its question), which
        # no other job's, session's or run's question has.
        asking = stable_approval_ids(f"job {job.id}")
        installed: AbstractContextManager[object] = nullcontext()
        if journals is not None:
            journal = await journals.open(job.id, job.attempt)
            installed = journals.installed(runtime, job.entry, journal)
            if isinstance(approver, Parking):
                approver.journal = journal  # a resumed run that diverges before its question parks a round further
        with installed, asking:
            result = await runtime.run(
                job.entry,
                input_data,
                trace_parent=job.traceparent,
                attachments=handed,
                approver=approver,
                session=session,
            )
    except BaseException as error:
        cancelled = isinstance(error, asyncio.CancelledError)
        if not (cancelled or isinstance(error, Exception)):
            await _written(journal)
            raise  # KeyboardInterrupt, SystemExit: the process is going, nothing to store
        ended = None if cancelled else _ended(approver)  # a tool may have caught it, and raised something else
        if isinstance(ended, RunParked):
            logger.info("%s", ended)
            await _written(journal)  # the resumed run replays them
            if ended is error:
                raise
            raise ended from error
        reason = cancel_reason() if cancelled else (CANCEL_REQUESTED if ended is not None else None)
        stopped = cancelled or ended is not None
        text = f"cancelled ({reason})" if stopped else f"{type(error).__name__}: {error}"
        write = _stored(pool, job, started, "cancelled" if stopped else "error", None, run_report(error), text, journal)
        await (_shielded(write) if cancelled else write)
        if reason == SHUTDOWN:
            raise WorkerShutdown(f"job {job.id} was stopped by the shutdown of worker {job.worker}") from error
        if ended is not None and ended is not error:
            raise ended from error
        raise
    finally:
        reset_current(token)
        if session is not None:
            await _close_session(runtime, session)
    ended = _ended(approver)  # a tool caught what the approver raised, and the run went on
    if isinstance(ended, RunParked):
        logger.info("%s", ended)
        await _written(journal)
        raise ended
    try:
        if ended is None:
            await _stored(pool, job, started, "ok", output_json(result.output), result, None, journal)
        else:
            await _stored(pool, job, started, "cancelled", None, result, f"cancelled ({CANCEL_REQUESTED})", journal)
    except asyncio.CancelledError as error:  # stopped while waiting for the database: run it again
        if cancel_reason() == SHUTDOWN:
            raise WorkerShutdown(f"job {job.id} was stopped by the shutdown of worker {job.worker}") from error
        raise
    if ended is not None:
        raise ended


async def _close_session(runtime: Runtime, session_id: str) -> None:
    """The worker closes the session its job's run opened (its per-session objects go; its history stays in the
    store): the next job of the session may run on any worker."""
    opened = runtime.sessions.get(session_id)
    if opened is not None and not opened.busy:
        await opened.aclose()


def _ended(approver: Approver | None) -> RunParked | JobAborted | None:
    """What the job's approver ended this run with, if anything: it parked, or found the job cancelled."""
    return approver.ended if isinstance(approver, Parking) else None


def stored_attachments(attachments: Sequence[Attachment]) -> list[dict[str, Any]]:
    """Attachments as a job stores them: name, media type, digest, and the bytes as base64."""
    return [
        {**attachment.info.to_json(), "data": base64.b64encode(attachment.data).decode("ascii")}
        for attachment in attachments
    ]


def _attachments_of(job: JobInfo, stored: Any, runtime: Runtime) -> tuple[Attachment, ...]:
    """The job's attachments, each checked against the digest it was deferred with."""
    limits = runtime.config.attachments
    found: list[Attachment] = []
    try:
        for item in stored:
            attachment = Attachment.from_bytes(
                item["name"], base64.b64decode(item["data"], validate=True), item["media_type"], settings=limits
            )
            if attachment.sha256 != item["sha256"]:
                raise AttachmentError(
                    f"job {job.id}: attachment {attachment.name!r} does not match the digest it was deferred with"
                )
            found.append(attachment)
    except (TypeError, KeyError, binascii.Error) as error:
        raise AttachmentError(f"job {job.id}: its stored attachments are malformed ({error!r})") from None
    return tuple(found)


STORE_PATIENCE = 300.0
"""Seconds a finished run's result write keeps retrying while PostgreSQL is away, before the job fails."""


async def _stored(
    pool: AsyncConnectionPool[Any],
    job: JobInfo,
    started: datetime,
    outcome: str,
    output: Any,
    run: RunResult | RunReport | None,
    error: str | None,
    journal: Journal | None,
) -> None:
    """Store the run's result, with the responses its journal has not written yet (one round trip), retrying
    while the database is unreachable: a run that finished is not failed (or run again) because PostgreSQL
    restarted just then. The first attempt is finished even if the job is cancelled meanwhile: the journal's last
    responses are written, as a response written beside the run is."""
    deadline = asyncio.get_running_loop().time() + STORE_PATIENCE
    delay = 0.1
    last = _LastResponses(journal) if journal is not None else None
    first = True
    while True:
        try:
            write = _store(pool, job, started, outcome, output, run, error, journal, last)
            await (_shielded(write) if first and last is not None else write)
            return
        except (psycopg.OperationalError, PoolTimeout) as lost:
            if asyncio.get_running_loop().time() + delay > deadline:
                raise
            logger.warning("job %d: storing its result failed (%s); retrying in %.1fs", job.id, lost, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
        except psycopg.Error:
            if last is None or not last.rows:
                raise
            await _shielded(last.refused())  # written as the journal writes any; then the result alone
        first = False


@dataclass(slots=True)
class _LastResponses:
    """The responses a run's journal had not written when the run ended, written with the job's result."""

    journal: Journal
    unwritten: Unwritten | None = None
    rows: JournalRows | None = None

    async def taken(self) -> JournalRows | None:
        """The rows to write with the result (taken from the journal once, after the write under way)."""
        if self.unwritten is None:
            unwritten = await self.journal.unwritten()
            store = self.journal.store
            if isinstance(store, PostgresJournal):
                self.rows = store.rows(unwritten.entries, unwritten.stale) if unwritten else None
            elif unwritten:  # a store of its own: the journal writes them
                self.journal.restore(unwritten)
                await self.journal.settled()
            self.unwritten = unwritten
        return self.rows

    async def refused(self) -> None:
        """PostgreSQL refused the statement: the journal writes them (each alone if need be, so a response it
        refuses costs only itself and is counted unsaved), and the result goes without them."""
        if self.unwritten:
            self.journal.restore(self.unwritten)
        self.rows = None
        await self.journal.settled()


async def _store(
    pool: AsyncConnectionPool[Any],
    job: JobInfo,
    started: datetime,
    outcome: str,
    output: Any,
    run: RunResult | RunReport | None,
    error: str | None,
    journal: Journal | None,
    last: _LastResponses | None = None,
) -> None:
    rows = await last.taken() if last is not None else None
    usage, calls = (usage_json(run.usage), calls_json(run.calls)) if run is not None else ({}, [])
    await write_result(
        pool,
        job_id=job.id,
        entry=job.entry,
        outcome=outcome,
        output=output,
        usage=usage,
        calls=calls,
        error=error,
        journal=None if journal is None else journal.summary(),
        attempt=job.attempt,
        worker=job.worker,
        started_at=started,
        finished_at=datetime.now(UTC),
        journal_rows=rows,
    )


async def _written(journal: Journal | None) -> None:
    """Every response the run's journal kept is written: the job ends without a result to write them with."""
    if journal is not None:
        await _shielded(journal.settled())


async def _shielded(write: Awaitable[None]) -> None:
    """Finish the write even if the job is cancelled again meanwhile (the row must say how it ended)."""
    task = asyncio.ensure_future(write)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait((task,))
        raise
