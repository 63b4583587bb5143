"""`JobQueue`: which entries may run as jobs, and deferring, reading, listing and cancelling them.

Built on procrastinate (a PostgreSQL task queue): each declared entry is a procrastinate task named
`llm_do:<entry>`; a job's arguments are the run's input, an optional W3C `traceparent` and the
attachments handed to the run (name, media type, digest and bytes as base64, so that any worker can
run the job again).
"""

from __future__ import annotations

import asyncio
import builtins
import math
import os
import socket
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal

from procrastinate import App, JobContext, PsycopgConnector, RetryStrategy
from procrastinate.exceptions import ConnectorException
from procrastinate.tasks import Task
from psycopg import AsyncConnection, ProgrammingError, errors
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool
from pydantic import SecretStr
from pydantic_core import PydanticSerializationError, to_jsonable_python

from .. import Attachment, Runtime
from ..errors import ConfigurationError, listing, scrubbed
from ..files import check_call
from ..tracing import current_traceparent
from .context import JobInfo
from .execute import CANCEL_REQUESTED, SHUTDOWN, perform, stored_attachments
from .journal import JobJournals, create_journal_table
from .parking import (
    Parking,
    PendingApproval,
    cancel_job,
    create_approvals_table,
    load_decisions,
    pending_approvals,
    store_decision,
)
from .records import STATUSES, InvalidJobRequest, JobNotFound, JobRecord, checked_job_id
from .redact import hide_attachment_bytes
from .retry import JobRetry
from .rounds import last_round
from .settings import JobSettings
from .store import create_results_table, fetch_records

__all__ = ["JobEntry", "JobQueue", "RuntimeFactory"]

RuntimeFactory = Callable[[], AbstractAsyncContextManager[Runtime]]
"""Makes the worker's runtime: a `Runtime` itself (it is its own async context manager), or any async
context manager that yields one (to open global resources around it)."""

_SCHEMA_LOCK = 7_2616_3032  # advisory lock key: workers starting together apply the schema once
TASK_PREFIX = "llm_do:"


@dataclass(frozen=True, slots=True)
class JobEntry:
    """An entry that may run as a job, with its retry rule and whether its model responses are journaled.

    `retry`: 0 (the default) never retries a failed run; `n` retries it up to `n` times at once;
    a procrastinate `RetryStrategy` sets delays, backoff and which exceptions are retried.
    `journal`: True (the default) writes each model response of the job's run to PostgreSQL as it
    arrives, and a run of the job made again is answered from it while its requests are the same
    (see docs/jobs.md); False sends every request of every run to the model.
    """

    name: str
    retry: int | RetryStrategy = 0
    journal: bool = True


class JobQueue:
    """Agent runs as background jobs on procrastinate, in the PostgreSQL database at `database_url`.

    `entries` are the entries that may run as jobs (names, or `JobEntry` for a retry rule).
    `runtime` makes the runtime a worker opens once at start-up; processes that only defer, read and
    cancel jobs do not need it. `database_url` defaults to `LLM_DO_JOBS_DATABASE_URL`, then
    `LLM_DO_DATABASE_URL`. Use `async with queue:` (or `open()`/`close()`) around calls.

    `approvals`: `"runtime"` (the default) answers a job's approvals as the worker's runtime does (its mode
    and approver); `"park"` ends a run that needs a person's decision and parks the job (`awaiting_approval`)
    until `decide()` answers it (see docs/jobs.md, "Waiting for a person").
    """

    def __init__(
        self,
        database_url: str | SecretStr | None = None,
        *,
        entries: Iterable[str | JobEntry],
        runtime: RuntimeFactory | None = None,
        queue: str = "llm_do",
        pool_size: int = 4,
        approvals: Literal["runtime", "park"] = "runtime",
    ) -> None:
        if approvals not in ("runtime", "park"):
            raise ConfigurationError(f"JobQueue(approvals=...) must be 'runtime' or 'park', got {approvals!r}")
        self.approvals = approvals
        self._database_url = database_url  # read from the settings at open() when None
        self.runtime_factory = runtime
        self.queue_name = queue
        self.pool_size = pool_size
        self.app = App(connector=PsycopgConnector())
        hide_attachment_bytes("procrastinate.jobs")  # it logs the jobs deferred, arguments included
        self.entries: Mapping[str, JobEntry] = _entries(entries)
        unjournaled = sorted(spec.name for spec in self.entries.values() if not spec.journal)
        if approvals == "park" and unjournaled:
            raise ConfigurationError(
                f"JobQueue(approvals='park') needs the journal, but entry {', '.join(map(repr, unjournaled))} opts "
                "out (journal=False): a parked job resumes by replaying its model responses up to the question (a "
                "model asked again gives its tool calls new ids, so the decision would never apply); journal it, "
                "or put it in a queue that does not park"
            )
        self._tasks: dict[str, Task[Any, Any, Any]] = {}
        self._task_entries = {TASK_PREFIX + name: name for name in self.entries}
        self._pool: AsyncConnectionPool[Any] | None = None
        self._connector = ExitStack()  # the opening's own procrastinate connector, swapped in by open()
        self._runtime: Runtime | None = None
        self._journals: JobJournals | None = None
        self._parking_rounds = 3
        for spec in self.entries.values():
            self._tasks[spec.name] = self._register(spec)

    # -- opening ----------------------------------------------------------------

    @property
    def pool(self) -> AsyncConnectionPool[Any]:
        """The psycopg pool jobs and results go through (procrastinate shares it)."""
        if self._pool is None:
            raise RuntimeError("the JobQueue is not open: use `async with queue:` or `await queue.open()`")
        return self._pool

    @property
    def is_open(self) -> bool:
        return self._pool is not None

    async def open(
        self, *, pool_size: int | None = None, connect_timeout: float = 30.0, wait_timeout: float = 30.0
    ) -> None:
        """Open the connection pool (waits up to `connect_timeout` seconds for a first connection).

        `wait_timeout`: seconds a query waits for a connection (while PostgreSQL is away) before it fails.
        A closed queue can be opened again (with a new pool)."""
        if self._pool is not None:
            return
        url = _checked(_url(self._database_url))
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            url,
            min_size=1,
            max_size=pool_size or self.pool_size,
            open=False,
            timeout=wait_timeout,
            configure=_autocommit,  # one round trip per statement; transactions are explicit
            name="llm-do-jobs",
        )
        try:
            await pool.open(wait=True, timeout=connect_timeout)
        except Exception as error:
            await pool.close()
            raise ConnectionError(
                f"cannot reach the jobs database within {connect_timeout}s "
                f"({type(error).__name__}: {scrubbed(str(error), url)}); "
                "check LLM_DO_JOBS_DATABASE_URL (or LLM_DO_DATABASE_URL) and that PostgreSQL is up"
            ) from None
        # procrastinate's connector keeps a pool it was given after close_async(), and its open_async()
        # then keeps that closed pool: each opening gets a connector of its own, dropped by close().
        self._connector.enter_context(self.app.replace_connector(PsycopgConnector()))
        await self.app.open_async(pool)
        self._pool = pool

    async def close(self) -> None:
        """Close the pool; `open()` opens the queue again."""
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await self.app.close_async()
            finally:
                self._connector.close()
                await pool.close()

    async def __aenter__(self) -> JobQueue:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def apply_schema(self) -> None:
        """Create procrastinate's schema and llm-do's tables (results, journal) if they are missing (idempotent;
        safe when several processes start together). Workers call it at start-up; a process that defers
        jobs into a database no worker has started on yet calls it first."""
        async with self.pool.connection() as conn:
            await conn.execute("SELECT pg_advisory_lock(%s)", (_SCHEMA_LOCK,))
            try:
                found = await (await conn.execute("SELECT to_regclass('procrastinate_jobs')")).fetchone()
                if found is None or found[0] is None:
                    await self.app.schema_manager.apply_schema_async()
                await create_results_table(conn)
                await create_journal_table(conn)
                await create_approvals_table(conn)
                await conn.commit()
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (_SCHEMA_LOCK,))
                await conn.commit()

    # -- the API ----------------------------------------------------------------

    async def defer(
        self,
        entry: str,
        input_data: Any,
        *,
        traceparent: str | None = None,
        priority: int = 0,
        delay: float | None = None,
        queueing_lock: str | None = None,
        attachments: Sequence[Attachment] = (),
    ) -> int:
        """Queue one run of `entry` on `input_data` (JSON-compatible) and return the job's id.

        `attachments` are stored in the job (bytes included, as base64) and handed to its run, within the
        limits of `LLM_DO_ATTACHMENTS__*` here (8 MiB per job by default); the worker checks each digest.

        `traceparent` (a W3C trace context; default: the current span's, when tracing is on) travels
        with the job, and the worker's run continues that trace. `delay` starts it no
        sooner than that many seconds from now; `queueing_lock` refuses a second queued job with the
        same lock (procrastinate's `AlreadyEnqueued`).
        """
        task = self._task(entry)
        _check_options(entry, priority, delay, queueing_lock, traceparent)
        if traceparent is None:
            traceparent = current_traceparent()
        payload = job_input(input_data, f"a job of entry {entry!r}")
        handed = _attachments(entry, attachments)
        extra: dict[str, Any] = {}
        if handed:
            check_call(handed, JobSettings().attachments)
            extra["attachments"] = stored_attachments(handed)
        options: dict[str, Any] = {"priority": priority}
        if delay is not None:
            options["schedule_in"] = {"seconds": delay}
        if queueing_lock is not None:
            options["queueing_lock"] = queueing_lock
        with _schema_needed():
            return await task.configure(**options).defer_async(input=payload, traceparent=traceparent, **extra)

    async def get(self, job_id: int) -> JobRecord:
        """The job `job_id`: its status and, once a run finished, output, usage, calls and error."""
        job_id = checked_job_id(job_id)
        with _schema_needed():
            found = await fetch_records(self.pool, self.queue_name, self._task_entries, job_id=job_id, limit=1)
        if not found:
            raise JobNotFound(job_id)
        return found[0]

    async def list(
        self, status: str | Iterable[str] | None = None, *, entry: str | None = None, limit: int = 100
    ) -> list[JobRecord]:
        """Jobs newest first, filtered by status (one or several) and entry."""
        statuses = [status] if isinstance(status, str) else None if status is None else list(status)
        unknown = sorted(map(repr, set(statuses or ()) - STATUSES))
        if unknown:
            raise InvalidJobRequest(f"unknown job status {', '.join(unknown)}: use {', '.join(sorted(STATUSES))}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidJobRequest(f"JobQueue.list: limit must be an int of 0 or more, got {limit!r}")
        if entry is not None and entry not in self.entries:
            raise InvalidJobRequest(
                f"JobQueue.list: entry {entry!r} is not one of this queue's (declared: {listing(self.entries)})"
            )
        entries = None if entry is None else [entry]
        with _schema_needed():
            return await fetch_records(
                self.pool, self.queue_name, self._task_entries, statuses=statuses, entries=entries, limit=limit
            )

    async def cancel(self, job_id: int) -> bool:
        """Cancel a job: a queued job never starts; a running one has its run cancelled (its teardown
        runs) by the worker that runs it; a parked one ends `cancelled`, its questions denied. False when the
        job had already finished."""
        await self.get(job_id)  # JobNotFound for another queue's job or an unknown id
        return await cancel_job(self.pool, self.queue_name, job_id)

    async def decide(
        self,
        job_id: int,
        approval_id: str,
        choice: Literal["approve", "approve_for_session", "deny"],
        *,
        note: str | None = None,
    ) -> bool:
        """Answer the question parked job `job_id` waits on (`pending(job_id)`); `note` is shown to the model
        when the call is denied. The job is queued again once it waits on no other question (True then): a
        worker replays its run from the journal up to the question and goes on with this decision.
        `approve_for_session` (a job run in a session: a live run that parked) also approves every identical call
        for the rest of the session: the grant goes with the job, as those given in the live run do.

        Raises `DecisionRefused` for an approval that is not pending (unknown, or decided already), for a
        job that is not this queue's, and for `approve_for_session` of a job run in no session."""
        job_id = checked_job_id(job_id)
        if not isinstance(approval_id, str):
            raise InvalidJobRequest(
                f"decide: an approval id is the str JobQueue.pending gave (approval_id), got {approval_id!r}"
            )
        if "\x00" in approval_id:
            raise InvalidJobRequest(
                f"decide: approval id {approval_id!r} holds a NUL character, which no approval id does; use one "
                f"JobQueue.pending({job_id}) gave"
            )
        if choice not in ("approve", "approve_for_session", "deny"):
            raise InvalidJobRequest(
                f"decide: choice must be 'approve', 'approve_for_session' or 'deny', got {choice!r}"
            )
        if note is not None and not isinstance(note, str):
            raise InvalidJobRequest(f"decide: note must be a str or None, got {note!r}")
        with _schema_needed():
            return await store_decision(self.pool, self.queue_name, job_id, approval_id, choice, note)

    async def pending(self, job_id: int) -> builtins.list[PendingApproval]:
        """The questions job `job_id` waits on (none unless it is parked, or parking)."""
        await self.get(job_id)  # JobNotFound for another queue's job or an unknown id
        with _schema_needed():
            return await pending_approvals(self.pool, self.queue_name, job_id)

    async def wait(self, job_id: int, *, interval: float = 0.1) -> JobRecord:
        """Poll until the job reaches a final status (bound it with `asyncio.timeout`)."""
        while True:
            record = await self.get(job_id)
            if record.done:
                return record
            await asyncio.sleep(interval)

    # -- the worker side --------------------------------------------------------

    def attach(self, runtime: Runtime | None, *, parking_rounds: int = 3) -> None:
        """Give the jobs this process runs their runtime (a worker does this at start-up; None detaches), and, for a
        queue that parks, how many times in a row a resumed run may diverge before its question and park again."""
        self._runtime = runtime
        self._parking_rounds = parking_rounds
        self._journals = None if runtime is None else JobJournals(self.pool, self.queue_name)

    def _register(self, spec: JobEntry) -> Task[Any, Any, Any]:
        async def run_job(
            context: JobContext,
            input: Any = None,
            traceparent: str | None = None,
            attachments: Any = None,
            session: str | None = None,
            grants: Sequence[Sequence[str]] | None = None,
        ) -> None:
            await self._perform(spec, context, input, traceparent, attachments, session, grants)

        run_job.__name__ = run_job.__qualname__ = f"run_{spec.name}"
        task: Task[Any, Any, Any] = self.app.task(
            name=TASK_PREFIX + spec.name, queue=self.queue_name, retry=JobRetry(spec.retry), pass_context=True
        )(run_job)
        return task

    async def _perform(
        self,
        spec: JobEntry,
        context: JobContext,
        input_data: Any,
        traceparent: str | None,
        attachments: Any,
        session: str | None = None,
        grants: Sequence[Sequence[str]] | None = None,
    ) -> None:
        runtime, journals = self._runtime, self._journals
        if runtime is None or journals is None:
            raise RuntimeError("no runtime attached: run jobs with llm_do.jobs.run_worker (or `llm-do worker`)")
        job = context.job
        assert job.id is not None  # a fetched job always has one
        # procrastinate counts the runs that ended: this run is the next one.
        info = JobInfo(job.id, spec.name, job.attempts + 1, context.worker_name, traceparent)

        def reason() -> str | None:
            why = context.abort_reason()
            return None if why is None else (CANCEL_REQUESTED if why.value == "user_request" else SHUTDOWN)

        approver = None
        if self.approvals == "park":
            decided = await load_decisions(self.pool, self.queue_name, job.id)
            last = await last_round(self.pool, self.queue_name, job.id) if decided else 0
            approver = Parking(
                self.pool, self.queue_name, job.id, decided, last_round=last, rounds=self._parking_rounds
            )
        await perform(
            runtime,
            self.pool,
            info,
            input_data,
            reason,
            attachments,
            journals if spec.journal else None,
            approver,
            session=session,
            grants=grants,
        )

    def _task(self, entry: str) -> Task[Any, Any, Any]:
        try:
            return self._tasks[entry]
        except KeyError:
            declared = listing(self._tasks)
            raise ConfigurationError(
                f"entry {entry!r} may not run as a job: declare it in JobQueue(entries=[...]) (declared: {declared})"
            ) from None


_MISSING = (errors.UndefinedTable, errors.UndefinedObject, errors.UndefinedFunction, errors.UndefinedColumn)
"""What a query meets in a database whose schema is missing, or older than this llm-do's."""


@contextmanager
def _schema_needed() -> Iterator[None]:
    """Turn a query on a database without the jobs schema into an error that says what to do."""
    try:
        yield
    except (*_MISSING, ConnectorException) as error:
        cause = error.__cause__ if isinstance(error, ConnectorException) else error
        if not isinstance(cause, _MISSING):
            raise
        raise ConfigurationError(
            f"the jobs schema is missing from this database, or older than this llm-do's "
            f"({cause.diag.message_primary}): call `await queue.apply_schema()` once before deferring or reading "
            "jobs (a worker does it when it starts); after upgrading procrastinate, apply its migrations"
        ) from error


async def _autocommit(conn: AsyncConnection[Any]) -> None:
    await conn.set_autocommit(True)


def worker_name() -> str:
    """A name that says where a worker runs: host and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _url(given: str | SecretStr | None) -> str:
    if given is None:
        settings = JobSettings()
        given = settings.jobs_database_url or settings.database_url
    if given is None:
        raise ConfigurationError(
            "no jobs database: pass JobQueue(database_url=...) or set LLM_DO_JOBS_DATABASE_URL "
            "(or LLM_DO_DATABASE_URL) to a PostgreSQL URL like postgresql://user@localhost/app"
        )
    return given.get_secret_value() if isinstance(given, SecretStr) else given


def _checked(url: str) -> str:
    """`url`, once libpq can read it: libpq's message about one it cannot read quotes it, password included,
    and psycopg's pool would log that message at every attempt to connect."""
    try:
        conninfo_to_dict(url)
        return url
    except ProgrammingError as error:
        problem = scrubbed(str(error).strip(), url)
    raise ConfigurationError(  # raised here, not in `except`: the error quoting the URL is not its context
        f"the jobs database URL cannot be used: {problem}; fix JobQueue(database_url=...) or "
        "LLM_DO_JOBS_DATABASE_URL (or LLM_DO_DATABASE_URL): the form is "
        "postgresql://user:password@host:5432/dbname?option=value"
    )


def _entries(entries: Iterable[str | JobEntry]) -> dict[str, JobEntry]:
    found: dict[str, JobEntry] = {}
    for item in entries:
        spec = JobEntry(item) if isinstance(item, str) else item
        if not spec.name:
            raise ConfigurationError("a job entry needs a name")
        if spec.name in found:
            raise ConfigurationError(f"entry {spec.name!r} is declared twice in JobQueue(entries=[...])")
        found[spec.name] = spec
    if not found:
        raise ConfigurationError("JobQueue(entries=[...]) is empty: name the entries that may run as jobs")
    return found


def _check_options(entry: str, priority: object, delay: object, queueing_lock: object, traceparent: object) -> None:
    """`InvalidJobRequest` for a `defer` option PostgreSQL would refuse (or procrastinate, without saying why)."""
    where = f"defer({entry!r}, ...)"
    if isinstance(priority, bool) or not isinstance(priority, int) or not -(2**31) <= priority < 2**31:
        raise InvalidJobRequest(f"{where}: priority must be an int (a 32-bit one), got {priority!r}")
    if delay is not None and (
        isinstance(delay, bool) or not isinstance(delay, int | float) or not math.isfinite(delay)
    ):
        raise InvalidJobRequest(f"{where}: delay must be a finite number of seconds, got {delay!r}")
    for name, text in (("queueing_lock", queueing_lock), ("traceparent", traceparent)):
        if text is not None and (not isinstance(text, str) or "\x00" in text):
            raise InvalidJobRequest(f"{where}: {name} must be a str without NUL characters, got {text!r}")


def _attachments(entry: str, attachments: object) -> tuple[Attachment, ...]:
    """`defer`'s attachments as a tuple; `InvalidJobRequest` for anything but a list of `Attachment`s."""
    odd = attachments
    if not isinstance(attachments, str | Attachment) and isinstance(attachments, Iterable):
        handed = tuple(attachments)
        wrong = [item for item in handed if not isinstance(item, Attachment)]
        if not wrong:
            return handed
        odd = wrong[0]
    raise InvalidJobRequest(
        f"defer({entry!r}, ...): attachments must be a list of llm_do.Attachment objects, got {odd!r} "
        f"({type(odd).__name__}); build them with Attachment.read(root, path) or Attachment.from_bytes(name, data)"
    )


def job_input(input_data: Any, what: str) -> Any:
    """`input_data` as a job's arguments keep it (JSON, no NUL character); `TypeError` or `ValueError` saying what
    is wrong with the input of `what` ("a job of entry 'x'") otherwise."""
    try:
        payload = to_jsonable_python(input_data)
    except PydanticSerializationError as error:
        raise TypeError(f"the input of {what} must be JSON-compatible: {error}") from None
    if _holds_nul(payload):
        raise ValueError(
            f"the input of {what} holds a NUL character, which a job's arguments (PostgreSQL jsonb) cannot store; "
            "encode it (base64, or an escape your entry undoes)"
        )
    return payload


def _holds_nul(value: Any) -> bool:
    """Whether a JSON value (as `to_jsonable_python` makes it) has a NUL character in a string or a key."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(key) or _holds_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_holds_nul(item) for item in value)
    return False
