"""Jobs parked until a person decides: pending approvals and their decisions in `llm_do_approvals`.

A job of a queue made with `JobQueue(approvals="park")` that reaches a call needing approval stores the
question here and ends its run (`RunParked`): its teardown runs, and its worker slot and connections are
free. procrastinate sees the job `failed`; a pending row makes it `awaiting_approval` to llm-do. A
decision (`JobQueue.decide`, or expiry by the workers' housekeeping) is stored here and queues the job
again (procrastinate's `retry_job`, and a notification that wakes the queue's workers at once): the run replays
from the journal up to the question, and this module's approver answers it with the stored decision without
asking.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from procrastinate import sql as procrastinate_sql
from procrastinate.exceptions import JobAborted
from psycopg import AsyncConnection, errors
from psycopg.rows import dict_row
from psycopg.types.json import Json, Jsonb
from psycopg_pool import AsyncConnectionPool
from pydantic_core import to_jsonable_python

from .. import Approval, ApprovalRequest, AttachmentInfo
from ..approvals import RunSuspended, SessionKey, session_key
from ..errors import DecisionRefused
from ..models.journal import Journal
from ..scopes import dropped
from .pgtext import add_missing_column, storable_text, store_json_as_text
from .rounds import ParkingDiverged, diverged, next_round
from .wakeup import wake_workers

__all__ = [
    "APPROVALS_TABLE",
    "AWAITING",
    "PARK_SQL",
    "DecisionRefused",
    "Parking",
    "PendingApproval",
    "RunParked",
    "cancel_job",
    "create_approvals_table",
    "expire_pending",
    "granted_key",
    "load_decisions",
    "pending_approvals",
    "question_row",
    "record_decision",
    "store_decision",
]

APPROVALS_TABLE = "llm_do_approvals"
PARKING_PATIENCE = 5.0
"""Seconds `cancel` waits for a run that has stored its question to end, before it asks procrastinate to abort
it instead (a worker that died just then: its job is queued again as stalled, and the abort ends it)."""
AWAITING = "awaiting_approval"

_CREATE = """
CREATE TABLE IF NOT EXISTS llm_do_approvals (
    queue text NOT NULL,
    job_id bigint NOT NULL,
    approval_id text NOT NULL,
    call_path text NOT NULL,
    call_id text,
    tool_call_id text,
    toolset text NOT NULL,
    tool text NOT NULL,
    args json NOT NULL,
    attachments json NOT NULL DEFAULT '[]',
    reason text NOT NULL,
    description text NOT NULL,
    park_round integer NOT NULL DEFAULT 0,
    asked_at timestamptz NOT NULL DEFAULT now(),
    choice text CHECK (choice IN ('approve', 'deny')),
    note text,
    decided_at timestamptz,
    PRIMARY KEY (queue, job_id, approval_id)
)
"""

PARK_SQL = """
INSERT INTO llm_do_approvals (queue, job_id, approval_id, call_path, call_id, tool_call_id, toolset, tool, args,
                              attachments, reason, description, park_round)
VALUES (%(queue)s, %(job_id)s, %(approval_id)s, %(call_path)s, %(call_id)s, %(tool_call_id)s, %(toolset)s, %(tool)s,
        %(args)s, %(attachments)s, %(reason)s, %(description)s, %(park_round)s)
ON CONFLICT (queue, job_id, approval_id) DO UPDATE SET
    call_path = EXCLUDED.call_path, call_id = EXCLUDED.call_id, tool_call_id = EXCLUDED.tool_call_id,
    toolset = EXCLUDED.toolset, tool = EXCLUDED.tool, args = EXCLUDED.args,
    attachments = EXCLUDED.attachments, reason = EXCLUDED.reason, description = EXCLUDED.description, asked_at = now(),
    park_round = EXCLUDED.park_round, choice = NULL, note = NULL, decided_at = NULL
"""

_ABORT_REQUESTED = "SELECT abort_requested FROM procrastinate_jobs WHERE id = %s FOR SHARE"
"""Shared: the questions of parallel calls are stored at once; a cancel or a decision (FOR UPDATE) waits."""

_DECIDED = """
SELECT approval_id, toolset, tool, args, attachments, choice, note FROM llm_do_approvals
 WHERE queue = %s AND job_id = %s AND choice IS NOT NULL
"""

_PENDING = """
SELECT approval_id, call_path, call_id, tool_call_id, toolset, tool, args, attachments, reason, description, asked_at
  FROM llm_do_approvals
 WHERE queue = %s AND job_id = %s AND choice IS NULL ORDER BY asked_at, approval_id
"""

_EXPIRED = """
SELECT a.job_id, a.approval_id FROM llm_do_approvals a JOIN procrastinate_jobs j ON j.id = a.job_id
 WHERE a.queue = %s AND a.choice IS NULL AND j.status = 'failed'
   AND a.asked_at < now() - make_interval(secs => %s)
 ORDER BY a.asked_at
"""

AWAITING_SQL = (
    "CASE WHEN j.status = 'failed' AND EXISTS (SELECT 1 FROM llm_do_approvals a WHERE a.queue = j.queue_name "
    "AND a.job_id = j.id AND a.choice IS NULL) THEN 'awaiting_approval' ELSE j.status::text END"
)
"""A job's status as llm-do reads it (procrastinate's, or `awaiting_approval`); `j` is procrastinate's row."""


class RunParked(RunSuspended):
    """The run reached a call that needs a person's decision, and its queue parks such jobs.

    Raised by the job's approver after the question was stored; the run's other parallel calls go on to their end
    or to their own question (`RunSuspended`), then the run ends (its teardown runs) and the job waits, holding no
    worker, until `JobQueue.decide` answers it."""

    def __init__(self, job_id: int, request: ApprovalRequest) -> None:
        self.job_id = job_id
        self.request = request
        super().__init__(
            f"job {job_id} is parked: {request.description} (approval {request.approval_id}); decide it with "
            "JobQueue.decide(job_id, approval_id, 'approve' | 'deny')"
        )


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A question a parked job waits on."""

    job_id: int
    approval_id: str
    chain: tuple[str, ...]
    """Entry names from the job's top-level call down to the one that asks (`ApprovalRequest.chain`)."""
    toolset: str
    tool: str
    args: Mapping[str, Any]
    reason: str
    description: str
    asked_at: datetime
    attachments: tuple[AttachmentInfo, ...] = ()
    """The files the call hands over, as the approver is shown them: name, media type, size and digest. A
    decision applies to these contents only: a run that reaches the question with other bytes asks again."""
    call_id: str | None = None
    """The id of the llm-do call that asks, in the run that parked (`ApprovalRequest.call_id`, `CallRecord.id`);
    None for a question parked by an llm-do that did not store it."""
    tool_call_id: str | None = None
    """pydantic-ai's id of the tool call (`ApprovalRequest.tool_call_id`), which the journal replays; None for
    `CallScope.call_agent` from Python, and for a question parked by an llm-do that did not store it."""

    @property
    def call_path(self) -> str:
        """Deprecated: `"/".join(chain)`. Use `chain`, the name a live run's `ApprovalRequest` gives it."""
        warnings.warn(
            "PendingApproval.call_path is deprecated; use PendingApproval.chain (a tuple of entry names, as "
            "ApprovalRequest.chain), '/'.join(chain) for the old string",
            DeprecationWarning,
            stacklevel=2,
        )
        return "/".join(self.chain)


@dataclass(frozen=True, slots=True)
class _Decision:
    toolset: str
    tool: str
    args: Any
    attachments: Any
    approval: Approval


class Parking:
    """The approver of one run of a parking queue's job: applies stored decisions, parks on the others.

    A question is stored in a transaction that holds the job's row, as `cancel_job` does: a cancel that came
    first (its cancellation requested, which the worker may not have acted on yet) stores no question and raises
    procrastinate's `JobAborted`, since the end of a parked run would clear that request. `ended` is what the run
    must end with, whatever its tools caught: the `JobAborted` if there was one, else the first `RunParked`.

    A resumed run that went live before its question because a request differed from the journal (`journal`, set by
    the job's run) parks one round further than the job's latest question (`last_round`); past `rounds`, it raises
    `ParkingDiverged` instead of parking (see `rounds`)."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        queue: str,
        job_id: int,
        decided: Mapping[str, _Decision],
        *,
        last_round: int = 0,
        rounds: int = 3,
    ) -> None:
        self.pool = pool
        self.queue = queue
        self.job_id = job_id
        self.decided = decided
        self.last_round = last_round
        self.rounds = rounds
        self.journal: Journal | None = None
        """The run's journal, whose points of going live tell a run that diverged before its question."""
        self._parked: RunParked | None = None
        self._aborted: JobAborted | None = None

    @property
    def ended(self) -> RunParked | JobAborted | None:
        return self._aborted or self._parked

    async def __call__(self, request: ApprovalRequest) -> Approval:
        args, attachments = _args(request), _attachments(request)
        found = self.decided.get(request.approval_id)
        asked = (request.toolset, request.tool, args, attachments)
        if found is not None and (found.toolset, found.tool, found.args, found.attachments) == asked:
            return found.approval
        values = question_row(self.queue, self.job_id, request, self._round())
        storing = asyncio.ensure_future(self._store(values))
        try:
            cancelled = await asyncio.shield(storing)
        except asyncio.CancelledError:  # a parallel call parked first and ended the run: this question is stored too
            storing.add_done_callback(dropped)
            raise
        if cancelled:
            self._aborted = JobAborted(
                f"job {self.job_id} was cancelled before it could park on {request.description} "
                f"(approval {request.approval_id})"
            )
            raise self._aborted
        parked = RunParked(self.job_id, request)
        if self._parked is None:
            self._parked = parked
        raise parked

    def _round(self) -> int:
        """This run's round; `ParkingDiverged` when it is past the rounds allowed."""
        points = diverged(self.journal.live_from if self.journal is not None else ())
        found = next_round(self.last_round, bool(self.decided), points)
        if found > self.rounds:
            raise ParkingDiverged(self.job_id, found, points)
        return found

    async def _store(self, values: Mapping[str, Any]) -> bool:
        """Store the question unless the job's cancellation was requested; whether it was."""
        async with self.pool.connection() as conn, conn.transaction():
            job = await (await conn.execute(_ABORT_REQUESTED, (self.job_id,))).fetchone()
            cancelled = job is not None and bool(job[0])
            if not cancelled:
                await conn.execute(PARK_SQL, values)
        return cancelled


async def record_decision(
    conn: AsyncConnection[Any], queue: str, job_id: int, approval_id: str, choice: str, note: str | None
) -> None:
    """Write the decision on question `approval_id` of job `job_id` (its note as a text column can hold it)."""
    await conn.execute(
        "UPDATE llm_do_approvals SET choice = %s, note = %s, decided_at = now() "
        "WHERE queue = %s AND job_id = %s AND approval_id = %s",
        (choice, None if note is None else storable_text(note), queue, job_id, approval_id),
    )


def question_row(queue: str, job_id: int, request: ApprovalRequest, park_round: int) -> dict[str, Any]:
    """The values of `PARK_SQL` that store `request` as a question job `job_id` of `queue` waits on."""
    return {
        "queue": queue,
        "job_id": job_id,
        "approval_id": request.approval_id,
        "call_path": "/".join(request.chain),
        "call_id": request.call_id,
        "tool_call_id": request.tool_call_id,
        "toolset": request.toolset,
        "tool": request.tool,
        "args": Json(_args(request)),
        "attachments": Json(_attachments(request)),
        "reason": storable_text(request.reason),
        "description": storable_text(request.description),
        "park_round": park_round,
    }


def _args(request: ApprovalRequest) -> Any:
    return to_jsonable_python(dict(request.args), fallback=repr)


def _attachments(request: ApprovalRequest) -> list[dict[str, Any]]:
    return [info.to_json() for info in request.attachments]


async def create_approvals_table(conn: AsyncConnection[Any]) -> None:
    await conn.execute(_CREATE)
    await add_missing_column(conn, APPROVALS_TABLE, "attachments", "json NOT NULL DEFAULT '[]'")  # made before files
    for column in ("call_id", "tool_call_id"):  # made before questions named their call
        await add_missing_column(conn, APPROVALS_TABLE, column, "text")
    await add_missing_column(conn, APPROVALS_TABLE, "park_round", "integer NOT NULL DEFAULT 0")  # before rounds
    await store_json_as_text(conn, APPROVALS_TABLE, "args")


async def load_decisions(pool: AsyncConnectionPool[Any], queue: str, job_id: int) -> dict[str, _Decision]:
    """The decisions stored for job `job_id`, by approval id."""
    async with pool.connection() as conn:
        rows = await (await conn.execute(_DECIDED, (queue, job_id))).fetchall()
    return {
        approval_id: _Decision(toolset, tool, args, attachments, Approval(choice, note))
        for approval_id, toolset, tool, args, attachments, choice, note in rows
    }


async def pending_approvals(pool: AsyncConnectionPool[Any], queue: str, job_id: int) -> list[PendingApproval]:
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(_PENDING, (queue, job_id))
        rows = await cursor.fetchall()
    found: list[PendingApproval] = []
    for row in rows:
        attachments = tuple(AttachmentInfo(**info) for info in row.pop("attachments"))
        chain = tuple(row.pop("call_path").split("/"))  # entry names hold no `/`
        found.append(PendingApproval(job_id=job_id, **row, chain=chain, attachments=attachments))
    return found


async def store_decision(
    pool: AsyncConnectionPool[Any],
    queue: str,
    job_id: int,
    approval_id: str,
    choice: Literal["approve", "approve_for_session", "deny"],
    note: str | None,
) -> bool:
    """Store the decision and, once the job waits on no other question, queue it again (one transaction);
    whether it was queued. Raises `DecisionRefused` when the approval is not pending for a parked job.

    `approve_for_session` approves the call, and every identical one for the rest of the job's session: the grant
    joins the job's (its resumed run's session holds it, as it holds those given in the live run), and the job's
    other questions about an identical call are approved with it. A job run in no session has none to approve for:
    `DecisionRefused`."""
    async with pool.connection() as conn, conn.transaction():
        status = await _locked_job(conn, queue, job_id)
        if status is None:
            raise DecisionRefused(f"job {job_id} is no job of queue {queue!r}: nothing to decide there")
        row = await (
            await conn.execute(
                "SELECT choice, toolset, tool, args, attachments FROM llm_do_approvals "
                "WHERE queue = %s AND job_id = %s AND approval_id = %s FOR UPDATE",
                (queue, job_id, approval_id),
            )
        ).fetchone()
        if row is None:
            raise DecisionRefused(
                f"job {job_id} has no approval {approval_id!r}: list what it waits on with JobQueue.pending({job_id})"
            )
        if row[0] is not None:
            raise DecisionRefused(f"approval {approval_id!r} of job {job_id} was already decided ({row[0]!r})")
        if choice == "approve_for_session":
            await _check_in_a_session(conn, job_id)  # whatever the job's state: it is so from its start
        if status != "failed":
            raise DecisionRefused(
                f"job {job_id} is {status!r}, not parked yet: its run is still ending; decide again in a moment"
            )
        if choice == "approve_for_session":
            await _grant(conn, queue, job_id, granted_key(row[1], row[2], row[3], row[4]), note)
        else:
            await record_decision(conn, queue, job_id, approval_id, choice, note)
        if await _waiting(conn, queue, job_id):
            return False
        await _requeue(conn, job_id)
        await wake_workers(conn, queue, job_id)  # at once, not at their next poll
        return True


async def _check_in_a_session(conn: AsyncConnection[Any], job_id: int) -> None:
    """Refuse `approve_for_session` of job `job_id` when it runs in no session: there is none to approve for."""
    found = await conn.execute("SELECT args->>'session' FROM procrastinate_jobs WHERE id = %s", (job_id,))
    job = await found.fetchone()
    if job is None or job[0] is None:
        raise DecisionRefused(
            f"job {job_id} runs in no session, so nothing can be approved for the rest of one: answer 'approve' (or "
            "defer the job with a session)"
        )


def granted_key(toolset: str, tool: str, args: Any, attachments: Any) -> SessionKey:
    """The session key of a stored question (its arguments and files as stored), as a live run's grant has it."""
    files = [AttachmentInfo(**info) for info in (_loaded(attachments) or [])]
    return session_key(toolset, tool, _loaded(args) or {}, files)


def _loaded(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


async def _grant(conn: AsyncConnection[Any], queue: str, job_id: int, key: SessionKey, note: str | None) -> None:
    """Approve, for the rest of the session of job `job_id`, the calls of session key `key`: the grant joins the job's
    (for its resumed run), and its questions about such a call are approved (its row locked by the caller)."""
    await conn.execute(
        "UPDATE procrastinate_jobs SET args = jsonb_set(args, '{grants}', "
        "coalesce(args->'grants', '[]'::jsonb) || %s::jsonb) WHERE id = %s",
        (Jsonb([list(key)]), job_id),
    )
    rows = await (
        await conn.execute(
            "SELECT approval_id, toolset, tool, args, attachments FROM llm_do_approvals "
            "WHERE queue = %s AND job_id = %s AND choice IS NULL",
            (queue, job_id),
        )
    ).fetchall()
    for approval_id, toolset, tool, args, attachments in rows:
        if granted_key(toolset, tool, args, attachments) == key:
            await record_decision(conn, queue, job_id, approval_id, "approve", note)


async def cancel_job(pool: AsyncConnectionPool[Any], queue: str, job_id: int) -> bool:
    """Cancel job `job_id` of `queue` in a transaction that holds its row, so that a decision meanwhile cannot
    make the cancel miss: a queued job ends `cancelled`, a running one has its cancellation requested
    (procrastinate's), a parked one ends `cancelled` with its questions denied (`the job was cancelled`). A job
    whose run has parked but is still ending is cancelled once it has ended (up to `PARKING_PATIENCE` seconds):
    procrastinate forgets a cancellation asked of a run that ends by raising. False when the job had already
    ended (or is no job of `queue`)."""
    deadline = asyncio.get_running_loop().time() + PARKING_PATIENCE
    while True:
        async with pool.connection() as conn, conn.transaction():
            status = await _locked_job(conn, queue, job_id)
            if status is None:
                return False  # never another queue's job
            parking = status in ("doing", "failed") and await _waiting(conn, queue, job_id)
            if status == "failed" and parking:
                await _cancel_parked(conn, queue, job_id)
                return True
            if status != "doing" or not parking or asyncio.get_running_loop().time() > deadline:
                found = await (
                    await conn.execute(
                        procrastinate_sql.queries["cancel_job"], {"job_id": job_id, "abort": True, "delete_job": False}
                    )
                ).fetchone()
                if found is None or found[0] is None:
                    return False
                await _deny_pending(conn, queue, job_id)  # a question a dead worker's run stored
                return True
        await asyncio.sleep(0.02)  # the run stored its question and is ending: cancel the parked job


async def _cancel_parked(conn: AsyncConnection[Any], queue: str, job_id: int) -> None:
    """Deny the questions of parked job `job_id` and end it `cancelled` (its row locked by the caller)."""
    await _deny_pending(conn, queue, job_id)
    # procrastinate cancels only queued jobs: failed -> todo -> cancelled, without the queueing lock another
    # queued job may hold meanwhile
    await conn.execute("UPDATE procrastinate_jobs SET queueing_lock = NULL WHERE id = %s", (job_id,))
    await _requeue(conn, job_id)
    await conn.execute(procrastinate_sql.queries["cancel_job"], {"job_id": job_id, "abort": False, "delete_job": False})


async def _deny_pending(conn: AsyncConnection[Any], queue: str, job_id: int) -> None:
    await conn.execute(
        "UPDATE llm_do_approvals SET choice = 'deny', note = 'the job was cancelled', decided_at = now() "
        "WHERE queue = %s AND job_id = %s AND choice IS NULL",
        (queue, job_id),
    )


async def _locked_job(conn: AsyncConnection[Any], queue: str, job_id: int) -> str | None:
    """The status of job `job_id`, its row locked until the transaction ends; None unless it is `queue`'s."""
    job = await (
        await conn.execute(
            "SELECT status::text, queue_name FROM procrastinate_jobs WHERE id = %s FOR UPDATE", (job_id,)
        )
    ).fetchone()
    return None if job is None or job[1] != queue else str(job[0])


async def _waiting(conn: AsyncConnection[Any], queue: str, job_id: int) -> bool:
    found = await (
        await conn.execute(
            "SELECT 1 FROM llm_do_approvals WHERE queue = %s AND job_id = %s AND choice IS NULL LIMIT 1",
            (queue, job_id),
        )
    ).fetchone()
    return found is not None


async def _requeue(conn: AsyncConnection[Any], job_id: int) -> None:
    """Queue parked job `job_id` again; `DecisionRefused` while another queued job holds its queueing lock
    (procrastinate allows one: a parked job is not queued, so another may have taken it)."""
    try:
        async with conn.transaction():  # a savepoint: the caller's transaction goes on after a refusal
            await conn.execute(
                procrastinate_sql.queries["retry_job"],
                {"job_id": job_id, "retry_at": None, "new_priority": None, "new_queue_name": None, "new_lock": None},
            )
    except errors.UniqueViolation:
        holder = await (
            await conn.execute(
                "SELECT o.id, o.queueing_lock FROM procrastinate_jobs j JOIN procrastinate_jobs o "
                "ON o.queueing_lock = j.queueing_lock AND o.status = 'todo' AND o.id <> j.id WHERE j.id = %s",
                (job_id,),
            )
        ).fetchone()
        other, lock = holder if holder is not None else ("another", "?")
        raise DecisionRefused(
            f"job {job_id} cannot be queued again while job {other} holds its queueing lock {lock!r} (procrastinate "
            "queues one job per lock); decide again once that job has started, or cancel it"
        ) from None


async def expire_pending(pool: AsyncConnectionPool[Any], queue: str, expiry: float) -> list[tuple[int, str]]:
    """Deny the pending approvals of `queue`'s parked jobs asked more than `expiry` seconds ago (their jobs go
    on, reading the denial); the (job id, approval id) of each."""
    async with pool.connection() as conn:
        rows = await (await conn.execute(_EXPIRED, (queue, expiry))).fetchall()
    expired: list[tuple[int, str]] = []
    note = f"no decision came within {expiry:g}s (LLM_DO_JOBS_APPROVAL_EXPIRY)"
    for job_id, approval_id in rows:
        try:
            await store_decision(pool, queue, job_id, approval_id, "deny", note)
        except DecisionRefused:
            continue  # decided meanwhile
        expired.append((job_id, approval_id))
    return expired
