"""Live runs that are jobs from their first request: a question of a session's live run that waits for a person
longer than `park_after` parks the run as a job of the application's queue, and the run ends, freeing what it
held; a run whose web process dies goes on on a worker.

`LiveParking(queue, runtime).stream(entry, input, session=...)` opens the live run as `Runtime.stream` does, with
what a job's run has from its first request:

- its job, inserted `doing` before the run starts and held by this process as one of procrastinate's workers
  (`holding`: heartbeats while it streams live runs), whose id gives the run's questions their ids (as a job's:
  `stable_approval_ids(f"job {id}")`), so a resumed run asks the same questions with the same ids;
- the job's journal of model responses;
- an approver beside the person's (the stream's `approver`): after `park_after` seconds it withdraws the question
  from the live run (`LiveRun.withdraw`, so a late click is refused) and ends the call with `LiveRunParked`, a
  `RunSuspended`: the run's parallel calls go on to their end or their own question, which parks at once.

When the run has ended (its teardown done), `on_end` writes in one transaction, if the job is still the live run's
(no worker took it): the parked job (its row `failed` after one run, with the run's input, trace, session and
grants) and its questions, when the run parked: the job is `awaiting_approval`, and the stream's last event is
`RunFailed` with the `LiveRunParked`, which names the job and every question. A decision (`LiveParking.decide`, by
session; `JobQueue.decide`, by job) queues it; a worker replays it from the journal up to its questions and goes
on, in the session (its history read from the store and its turn saved there). A run that ends otherwise deletes
its job and journal.

If the process dies, its heartbeats stop and the workers' stalled-job recovery queues the job again: a worker
replays the run from its journal, in its session, and a question it was asking parks again with its id.

On `SIGTERM` (`stop_asking`), the questions waiting park at once, and those asked later in a parking run too;
then `Runtime.stop_asking` denies what other runs wait on.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from .. import Approval, ApprovalChoice, ApprovalRequest, Attachment, LiveRun, Runtime
from ..approvals import RunSuspended, session_key, stable_approval_ids
from ..errors import ConfigurationError, LlmDoError
from ..files import check_call
from ..models.journal import Journal
from ..run import Outcome
from ..sessions import OpenQuestion
from ..tracing import current_traceparent
from .execute import stored_attachments
from .holding import LiveHold
from .journal import LIVE_SUFFIX, JobJournals
from .parking import (
    AWAITING_SQL,
    PARK_SQL,
    DecisionRefused,
    PendingApproval,
    RunParked,
    pending_approvals,
    question_row,
    record_decision,
    store_decision,
)
from .pgtext import storable_text, stored_as_given
from .queue import TASK_PREFIX, job_input
from .records import InvalidJobRequest
from .settings import JobSettings

if TYPE_CHECKING:
    from .. import Session
    from .queue import JobQueue

__all__ = ["LIVE_SUFFIX", "LiveParking", "LiveRunParked", "LiveRunTakenOver", "SessionJob"]

logger = logging.getLogger("llm_do.jobs")

STOPPING = "the service is restarting; ask again in a moment"

_START = """
WITH beat AS (UPDATE procrastinate_workers SET last_heartbeat = now() WHERE id = %(worker)s RETURNING id)
INSERT INTO procrastinate_jobs (id, queue_name, task_name, args, status, attempts, worker_id)
SELECT nextval(pg_get_serial_sequence('procrastinate_jobs', 'id')), %(queue)s, %(task)s, %(args)s, 'doing', 0, beat.id
  FROM beat
RETURNING id
"""
"""A live run's job, held by this process's worker row (its heartbeat refreshed): none if that row is gone."""

_HOLD = "SELECT status = 'doing' AND attempts = 0 FROM procrastinate_jobs WHERE id = %(id)s FOR UPDATE"
"""Whether the live run still holds its job (no worker took it), the row locked until the transaction ends."""

_PARK_JOB = """
UPDATE procrastinate_jobs SET status = 'failed', attempts = 1, worker_id = NULL, args = %(args)s WHERE id = %(id)s
"""
"""A parked live run as procrastinate keeps a parked job: failed after one run, queued again by a decision."""

_END_JOB = "DELETE FROM procrastinate_jobs WHERE id = %(id)s"

_END = """
WITH held AS (SELECT id FROM procrastinate_jobs WHERE id = %(id)s AND status = 'doing' AND attempts = 0 FOR UPDATE),
     ended AS (DELETE FROM procrastinate_jobs WHERE id IN (SELECT id FROM held) RETURNING id),
     dropped AS (DELETE FROM llm_do_journal WHERE queue = %(queue)s AND job_id IN (SELECT id FROM ended)),
     answers AS (DELETE FROM llm_do_approvals WHERE queue = %(queue)s AND job_id IN (SELECT id FROM ended))
SELECT count(*) FROM ended
"""
"""A live run's end that did not park, in one statement: its job, journal and answers go, if no worker took it."""
_DROP_JOURNAL = "DELETE FROM llm_do_journal WHERE queue = %(queue)s AND job_id = %(id)s"
_DROP_ANSWERS = "DELETE FROM llm_do_approvals WHERE queue = %(queue)s AND job_id = %(id)s"

_KEEP_ANSWER = """
WITH held AS (SELECT id FROM procrastinate_jobs WHERE id = %(job_id)s AND status = 'doing' AND attempts = 0 FOR UPDATE),
     granted AS (UPDATE procrastinate_jobs SET args = jsonb_set(args, '{grants}',
                        coalesce(args->'grants', '[]'::jsonb) || %(grant)s::jsonb)
                  WHERE %(grant)s::jsonb IS NOT NULL AND id IN (SELECT id FROM held))
INSERT INTO llm_do_approvals (queue, job_id, approval_id, call_path, call_id, tool_call_id, toolset, tool, args,
                              attachments, reason, description, park_round, choice, note, decided_at)
SELECT %(queue)s, held.id, %(approval_id)s, %(call_path)s, %(call_id)s, %(tool_call_id)s, %(toolset)s, %(tool)s,
       %(args)s, %(attachments)s, %(reason)s, %(description)s, %(park_round)s, %(choice)s, %(note)s, now()
  FROM held
ON CONFLICT (queue, job_id, approval_id) DO UPDATE SET
    choice = EXCLUDED.choice, note = EXCLUDED.note, decided_at = EXCLUDED.decided_at
"""
"""A question answered in the live run, kept decided with its job in one statement, while no worker took the job;
an answer `approve_for_session` adds its grant (`grant`, else NULL) to the job's, so that a worker that takes the run
over is not asked again about an identical call."""

_SESSION_JOB = f"""
SELECT j.id, {AWAITING_SQL} FROM procrastinate_jobs j
 WHERE j.queue_name = %s AND j.args->>'session' = %s
   AND (j.status IN ('todo', 'doing')
        OR (j.status = 'failed' AND EXISTS (SELECT 1 FROM llm_do_approvals a
                                             WHERE a.queue = j.queue_name AND a.job_id = j.id AND a.choice IS NULL)))
 ORDER BY j.id DESC LIMIT 1
"""

_SESSION_JOBS = """
SELECT j.id FROM procrastinate_jobs j
 WHERE j.queue_name = %s AND j.args->>'session' = %s AND j.status = 'failed'
   AND EXISTS (SELECT 1 FROM llm_do_approvals a WHERE a.queue = j.queue_name AND a.job_id = j.id AND a.choice IS NULL)
 ORDER BY j.id
"""

_JOB_OF = """
SELECT a.job_id FROM llm_do_approvals a JOIN procrastinate_jobs j ON j.id = a.job_id
 WHERE a.queue = %s AND j.queue_name = %s AND a.approval_id = %s AND j.args->>'session' = %s
"""


class LiveRunParked(RunParked):
    """A live run's questions waited longer than `park_after` (or the process was told to stop): the run parked as
    job `job_id` of the queue, in session `session_id`, and ended. `questions` are every question it waits on
    (parallel calls park together); decide them with `LiveParking.decide(session_id, ...)` or `JobQueue.decide`."""

    def __init__(self, job_id: int, session_id: str, questions: Sequence[ApprovalRequest]) -> None:
        self.job_id = job_id
        self.session_id = session_id
        self.questions = tuple(questions)
        self.request = self.questions[0]
        ids = ", ".join(question.approval_id for question in self.questions)
        RunSuspended.__init__(
            self,
            f"the run waits for a decision as job {job_id} of session {session_id!r} (approval {ids}); it goes on "
            "once each is decided: LiveParking.decide(session_id, approval_id, 'approve' | 'deny')",
        )


@dataclass(frozen=True, slots=True)
class SessionJob:
    """The job that holds a session's unfinished run (`LiveParking.held`)."""

    job_id: int
    status: str
    """`doing` (live in a process, or run by a worker), `todo` (queued again: a worker takes it next) or
    `awaiting_approval` (parked on a question)."""


class LiveRunTakenOver(LlmDoError):
    """A live run whose process was silent longer than the workers' `stalled_timeout`: a worker took its job and
    goes on with it there, so this process stops it."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        super().__init__(
            f"job {job_id}: this process's heartbeats stopped long enough for a worker to take the live run over; "
            "it goes on there (its turn is saved to the session once)"
        )


class LiveParking:
    """Live runs of sessions that park as jobs of `queue` when a question waits longer than `park_after` seconds
    (default `LLM_DO_JOBS_PARK_AFTER`, 300), or when the process is told to stop (`stop_asking`).

    `queue` is a `JobQueue(..., approvals="park")` that declares the entries streamed here, opened by the
    application (`async with queue`); its workers' runtime must load the same entries, and keep sessions in the
    same history store as `runtime` (a `PostgresHistoryStore` on the same database): the resumed run continues
    the session's conversation there. Each run is a job of the queue from its first request, held by this process
    (one of procrastinate's workers while it streams live runs): if the process dies, a worker goes on with the run
    once its heartbeats have stopped for `LLM_DO_WORKER_STALLED_TIMEOUT`. Close it (`async with`, or `aclose`) once
    its runs have ended. See docs/jobs.md, "Live runs that park" and "Live runs that survive their process"."""

    def __init__(self, queue: JobQueue, runtime: Runtime, *, park_after: float | None = None) -> None:
        if queue.approvals != "park":
            raise ConfigurationError(
                "LiveParking needs a queue that parks (JobQueue(..., approvals='park')): its workers resume a parked "
                "run by answering its questions with the stored decisions"
            )
        wait = JobSettings().jobs_park_after if park_after is None else park_after
        timeout = runtime.config.approval_timeout
        if not 0 < wait < timeout:
            raise ConfigurationError(
                f"LiveParking: park_after ({wait:g}s, LLM_DO_JOBS_PARK_AFTER) must be more than 0 and less than the "
                f"runtime's approval timeout ({timeout:g}s, LLM_DO_APPROVAL_TIMEOUT), which would deny the question "
                "first"
            )
        self.queue = queue
        self.runtime = runtime
        self.park_after = wait
        self.stopping: str | None = None
        """Why questions park at once (`stop_asking`); None while they wait `park_after`."""
        self._denying = False
        """`Runtime.stop_asking` was called: a question waiting then and not parked by then is denied (one asked
        later parks at once: the runtime asks a parking approver still)."""
        self._waiting: dict[asyncio.Event, asyncio.Future[None]] = {}
        """The questions waiting for `park_after` (woken to park at once) and when each has settled."""
        self._settling: set[asyncio.Future[None]] = set()
        """Each question asked here, until it was answered, denied or taken by its run as parked."""
        self._journals: JobJournals | None = None
        self._holder: LiveHold | None = None
        self._stop: asyncio.Task[None] | None = None
        runtime.inbox.add(self)  # a session's parked questions are in its inbox, in every process

    # -- streaming ----------------------------------------------------------------------

    @asynccontextmanager
    async def stream(
        self,
        entry: str,
        input_data: Any,
        *,
        session: Session | str,
        trace_parent: str | None = None,
        attachments: Sequence[Attachment] = (),
        model_events: bool = True,
        resumable: bool = False,
        on_end: Callable[[Outcome], Awaitable[Outcome]] | None = None,
    ) -> AsyncIterator[LiveRun]:
        """`Runtime.stream(entry, input_data, session=session, ...)`, run as a job of the queue held by this process
        (and journaled as that job) from its first request, and parked as that job when one of its questions waits
        longer than `park_after` (see the class). `on_end`, as `Runtime.stream`'s, is awaited after the job is
        written (parked, or gone with its journal), with the outcome the stream would end with."""
        queue = self.queue
        if entry not in queue.entries:
            raise ConfigurationError(
                f"LiveParking: entry {entry!r} may not park: declare it in the queue's JobQueue(entries=[...])"
            )
        session_id = session if isinstance(session, str) else session.id
        payload = job_input(input_data, f"a run of entry {entry!r} that may park")
        handed = tuple(attachments)
        if handed:
            check_call(handed, JobSettings().attachments)
        traceparent = trace_parent if trace_parent is not None else current_traceparent()
        args: dict[str, Any] = {"input": payload, "traceparent": traceparent, "session": session_id}
        args.update(_grants_of(self.runtime, session_id))  # the session's so far, for a worker that takes it over
        if handed:
            args["attachments"] = stored_attachments(handed)
        job_id = await self._start(entry, args)
        journals = self._journals_of()
        journal = await journals.open(job_id, 1)  # a first run: nothing to read
        parking = _RunParking(self, job_id, entry, session_id, args, journal)
        self._hold.holding(job_id, parking.lost)

        async def ended(outcome: Outcome) -> Outcome:
            outcome = await parking.ended(outcome)
            return outcome if on_end is None else await on_end(outcome)

        try:
            async with AsyncExitStack() as streaming:
                # the run's task takes the journal and the job's question ids with the context it starts in; the
                # consumer's block does not keep them
                with journals.installed(self.runtime, entry, journal), stable_approval_ids(f"job {job_id}"):
                    opened = self.runtime.stream(
                        entry,
                        input_data,
                        session=session,
                        trace_parent=traceparent,
                        approver=parking,
                        attachments=handed,
                        model_events=model_events,
                        resumable=resumable,
                        on_end=ended,
                    )
                    live = await streaming.enter_async_context(opened)
                parking.live = live  # before the run's first step: the stream's task has not run yet
                yield live
        except BaseException:
            if parking.live is None:  # it never started (a busy session, a closed runtime): its job goes
                await _shielded(parking.drop())
            raise

    async def _start(self, entry: str, args: dict[str, Any]) -> int:
        """The live run's job, inserted `doing` and held by this process's worker row (registered at the first run,
        and again if it was pruned); its id."""
        queue, hold = self.queue, self._hold
        values = {"queue": queue.queue_name, "task": TASK_PREFIX + entry, "args": Jsonb(args)}
        for _ in range(3):
            worker = hold.worker_id if hold.worker_id is not None else await hold.register()
            async with queue.pool.connection() as conn:
                found = await (await conn.execute(_START, {**values, "worker": worker})).fetchone()
            if found is not None:
                return int(found[0])
            hold.worker_id = None  # its row was pruned (no heartbeat since the last run): register again
        raise RuntimeError("LiveParking: this process's worker row vanished as soon as it was registered")

    def _journals_of(self) -> JobJournals:
        if self._journals is None:
            self._journals = JobJournals(self.queue.pool, self.queue.queue_name)
        return self._journals

    @property
    def _hold(self) -> LiveHold:
        if self._holder is None:
            self._holder = LiveHold(self.queue.pool, JobSettings().worker_heartbeat)
        return self._holder

    async def aclose(self) -> None:
        """Stop the heartbeats of this process's live runs and unregister its worker row. Call it once the runs
        streamed here have ended (the application's shutdown, after the chat router's): the jobs of runs still
        live are queued again by the workers, as those of a process that died."""
        if self._holder is not None:
            await self._holder.aclose()

    async def __aenter__(self) -> LiveParking:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- the job that holds a session's run ----------------------------------------------

    async def held(self, session_id: str) -> SessionJob | None:
        """The job that holds session `session_id`'s run, if one does: a live run's (`doing`: in the process
        streaming it, or, once that process died, until a worker takes it), one queued again (`todo`), run by a
        worker (`doing`), or parked (`awaiting_approval`). None when no run of the session is unfinished."""
        queue = self.queue
        if not stored_as_given(session_id):
            return None
        async with queue.pool.connection() as conn:
            found = await (await conn.execute(_SESSION_JOB, (queue.queue_name, session_id))).fetchone()
        return None if found is None else SessionJob(int(found[0]), str(found[1]))

    # -- a session's parked questions ---------------------------------------------------

    async def pending(self, session_id: str) -> list[PendingApproval]:
        """The questions session `session_id`'s parked runs wait on (none but that session's), oldest job first."""
        queue = self.queue
        if not stored_as_given(session_id):
            return []
        async with queue.pool.connection() as conn:
            rows = await (await conn.execute(_SESSION_JOBS, (queue.queue_name, session_id))).fetchall()
        found: list[PendingApproval] = []
        for (job_id,) in rows:
            found.extend(await pending_approvals(queue.pool, queue.queue_name, int(job_id)))
        return found

    async def decide(
        self,
        session_id: str,
        approval_id: str,
        choice: Literal["approve", "approve_for_session", "deny"],
        note: str | None = None,
    ) -> bool:
        """Answer question `approval_id` of a run of session `session_id` that parked (`pending(session_id)`), as
        `JobQueue.decide` does; True when its job was queued again (it waits on no other question). Raises
        `DecisionRefused` for an approval that is no parked question of that session (another session's too).

        `approve_for_session` approves it and every identical call for the rest of the session, as in a live run:
        the grant goes with the job (its resumed run is not asked again, nor are the job's other questions about an
        identical call), and to the session if it is open in this process (its later runs here)."""
        if choice not in ("approve", "approve_for_session", "deny"):
            raise InvalidJobRequest(
                "decide: a parked run's question is answered 'approve', 'approve_for_session' or 'deny', "
                f"got {choice!r}"
            )
        job_id = await self._job_of(session_id, approval_id)
        if job_id is None:
            raise DecisionRefused(
                f"approval {approval_id!r} is no parked question of session {session_id!r}: list them with "
                "LiveParking.pending(session_id)"
            )
        return await self._decide(session_id, job_id, approval_id, choice, note)

    async def _job_of(self, session_id: str, approval_id: str) -> int | None:
        queue = self.queue
        if not stored_as_given(session_id, approval_id):
            return None
        async with queue.pool.connection() as conn:
            found = await (
                await conn.execute(_JOB_OF, (queue.queue_name, queue.queue_name, approval_id, session_id))
            ).fetchone()
        return None if found is None else int(found[0])

    async def _decide(
        self,
        session_id: str,
        job_id: int,
        approval_id: str,
        choice: Literal["approve", "approve_for_session", "deny"],
        note: str | None,
    ) -> bool:
        queue = self.queue
        asked = None
        if choice == "approve_for_session":  # (its session key, for this process's open session)
            asked = next((item for item in await self.pending(session_id) if item.approval_id == approval_id), None)
        queued = await store_decision(queue.pool, queue.queue_name, job_id, approval_id, choice, note)
        session = self.runtime.sessions.get(session_id)
        if asked is not None and session is not None:
            session.grants.granted.add(session_key(asked.toolset, asked.tool, asked.args, asked.attachments))
        return queued

    # -- the inbox: a place a session's questions wait ------------------------------------

    async def open_questions(self, session_id: str) -> list[OpenQuestion]:
        """The questions session `session_id`'s parked runs wait on (`pending`), as its inbox lists them."""
        return [
            OpenQuestion(_request_of(session_id, item), "parked", job_id=item.job_id, asked_at=item.asked_at)
            for item in await self.pending(session_id)
        ]

    async def answer(self, session_id: str, approval_id: str, choice: ApprovalChoice, note: str | None) -> bool:
        """Answer a parked question of session `session_id` (`decide`); False when it is none of them."""
        job_id = await self._job_of(session_id, approval_id)
        if job_id is None:
            return False
        await self._decide(session_id, job_id, approval_id, choice, note)
        return True

    # -- a process told to stop -----------------------------------------------------------

    def stop_asking(self, reason: str = STOPPING) -> int:
        """The process is told to stop (`llm_do.web.questions_end_on_signal(parking.stop_asking)`): every question
        of the runs streamed here that waits for a person parks now, and each asked later parks at once; then
        `Runtime.stop_asking(reason)` denies, with `reason`, what the runtime's other runs wait on, and every later
        question of theirs. How many questions were waiting here. Call it in the event loop's thread."""
        if self.stopping is None:
            self.stopping = reason
        waiting = list(self._waiting)
        for woken in waiting:
            woken.set()
        if self._stop is None:
            self._stop = asyncio.get_running_loop().create_task(self._deny_the_rest(reason))
        return len(waiting)

    async def _deny_the_rest(self, reason: str) -> None:
        """Once every question asked here has parked (or was answered), deny the rest (`Runtime.stop_asking`)."""
        deadline = asyncio.get_running_loop().time() + 5.0
        while self._settling and asyncio.get_running_loop().time() < deadline:
            await asyncio.wait(set(self._settling), timeout=max(0.0, deadline - asyncio.get_running_loop().time()))
        self._denying = True  # in the same step as the denial: a question either parked before, or is denied
        self.runtime.stop_asking(reason)


class _RunParking:
    """One live run's parking: the stream's approver, which parks a question that waited too long, and its
    `on_end`, which writes the parked job once the run has ended."""

    def __init__(
        self, owner: LiveParking, job_id: int, entry: str, session_id: str, args: dict[str, Any], journal: Journal
    ) -> None:
        self.owner = owner
        self.job_id = job_id
        self.entry = entry
        self.session_id = session_id
        self.args = args
        self.journal = journal
        self.live: LiveRun | None = None
        self.taken = False
        """A worker took the run's job (`lost`)."""
        self.recording: set[asyncio.Future[None]] = set()
        """The person's answers being stored with the job (`_record`)."""
        self.questions: list[ApprovalRequest] = []
        """The questions the run left open, in the order they parked."""
        self.answered: dict[str, tuple[ApprovalRequest, Approval]] = {}
        """The questions answered in the live run: the job keeps their decisions, so the resumed run, which asks
        them again on its way to the open ones, is answered as the person answered, without asking."""

    parks = True
    """It never waits for a person past `park_after`: once the process stops asking, its questions park at once."""

    async def __call__(self, request: ApprovalRequest) -> Approval:
        owner = self.owner
        late = owner._denying  # asked after the runtime stopped asking: parked at once, since nobody denies it
        loop = asyncio.get_running_loop()
        settled: asyncio.Future[None] = loop.create_future()
        owner._settling.add(settled)
        settled.add_done_callback(owner._settling.discard)
        parking = False
        answer = None if self.live is None else self.live.answer(request.approval_id)
        if answer is not None:
            answer.add_done_callback(functools.partial(self._answered, request))
        try:
            if not self.questions and owner.stopping is None:  # a run that parks already parks each question at once
                woken = asyncio.Event()
                owner._waiting[woken] = settled
                try:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(owner.park_after):
                            await woken.wait()
                finally:
                    del owner._waiting[woken]
            live = self.live
            parked = RunParked(self.job_id, request)
            denied = owner._denying and not late  # `Runtime.stop_asking` denies the questions waiting when it ran
            withdrawn = None if denied or live is None else live.withdraw(request.approval_id, parked)
            if withdrawn is None:  # answered (or denied) meanwhile: whatever this approver says is not used
                settled.set_result(None)
                await loop.create_future()  # until the live run cancels it
            assert withdrawn is not None
            parking = True
            self.questions.append(request)
            withdrawn.add_done_callback(functools.partial(_settle, settled))
            raise parked
        finally:
            if not parking and not settled.done():
                settled.set_result(None)

    def _answered(self, request: ApprovalRequest, answer: asyncio.Future[Approval]) -> None:
        if not answer.cancelled() and answer.exception() is None:
            self.answered[request.approval_id] = (request, answer.result())
            recording = asyncio.ensure_future(self._record(request, answer.result()))
            self.recording.add(recording)
            recording.add_done_callback(self._recorded)

    async def _record(self, request: ApprovalRequest, approval: Approval) -> None:
        """Store the person's answer with the job, while it is the live run's: a worker that takes the run over
        (its process died) answers the question as the person did, without asking again."""
        queue = self.owner.queue
        values = question_row(queue.queue_name, self.job_id, request, 0)
        values["choice"] = "deny" if approval.choice == "deny" else "approve"
        values["note"] = None if approval.note is None else storable_text(approval.note)
        values["grant"] = None
        if approval.choice == "approve_for_session":
            key = session_key(request.toolset, request.tool, request.args, request.attachments)
            values["grant"] = Jsonb([list(key)])
        async with queue.pool.connection() as conn:
            await conn.execute(_KEEP_ANSWER, values)

    def _recorded(self, recording: asyncio.Future[None]) -> None:
        self.recording.discard(recording)
        if not recording.cancelled() and recording.exception() is not None:
            logger.warning(
                "job %d: the person's answer could not be kept with the job (%s): a worker that takes the run "
                "over asks again",
                self.job_id,
                recording.exception(),
            )

    def lost(self) -> None:
        """A worker took this run's job (this process was silent too long): the run stops here, and its end writes
        nothing (the worker goes on with the job and its journal)."""
        self.taken = True
        live = self.live
        if live is not None and live.driver is not None:  # a resumable run whose stream was left: its task
            live.driver.cancel()

    async def ended(self, outcome: Outcome) -> Outcome:
        """The run has ended: park it as its job if it left questions open, else end its job and drop its journal;
        nothing if a worker took the job meanwhile."""
        self.owner._hold.released(self.job_id)
        if self.recording:  # the answers kept with the job, before the job is written or goes
            await asyncio.wait(set(self.recording))
        park = bool(self.questions) and isinstance(outcome, Exception)  # a tool that caught the parking let it end
        writing = asyncio.ensure_future(self._write(park))
        try:
            held = await asyncio.shield(writing)
        except asyncio.CancelledError:
            await asyncio.wait((writing,))  # the job is written whole, or not at all
            raise
        if not held:
            logger.warning("job %d: a worker took this live run over; its end here is not written", self.job_id)
            if isinstance(outcome, BaseException):
                return LiveRunTakenOver(self.job_id)
            return outcome  # its turn was saved first: the worker's save of the same turn is refused
        if not park:
            return outcome
        return LiveRunParked(self.job_id, self.session_id, self.questions)

    async def drop(self) -> None:
        """The run never started: its job and journal go."""
        self.owner._hold.released(self.job_id)
        queue = self.owner.queue
        async with queue.pool.connection() as conn, conn.transaction():
            await conn.execute(_END_JOB, {"id": self.job_id})
            await conn.execute(_DROP_JOURNAL, {"queue": queue.queue_name, "id": self.job_id})
            await conn.execute(_DROP_ANSWERS, {"queue": queue.queue_name, "id": self.job_id})

    async def _write(self, park: bool) -> bool:
        """Write the run's end; False (nothing written) when a worker took its job."""
        await self.journal.settled()  # the responses the run received are in the journal before the job adopts it
        queue = self.owner.queue
        names = {"queue": queue.queue_name, "id": self.job_id}
        if not park:
            async with queue.pool.connection() as conn:
                ended = await (await conn.execute(_END, names)).fetchone()
            return ended is not None and int(ended[0]) == 1
        async with queue.pool.connection() as conn, conn.transaction():
            found = await (await conn.execute(_HOLD, names)).fetchone()
            if found is None or not found[0]:
                return False
            await conn.execute(_PARK_JOB, {**names, "args": Jsonb({**self.args, **self._grants()})})
            for request in self.questions:
                await conn.execute(PARK_SQL, question_row(queue.queue_name, self.job_id, request, 0))
            for request, approval in self.answered.values():  # the decisions the person gave the live run
                await _store_answer(conn, queue.queue_name, self.job_id, request, approval)
        return True

    def _grants(self) -> dict[str, Any]:
        """The session's "approve for session" answers, for the resumed run's session on the worker (a call they
        answered in the live run is not asked again there)."""
        return _grants_of(self.owner.runtime, self.session_id)


def _grants_of(runtime: Runtime, session_id: str) -> dict[str, Any]:
    """The `grants` of a job's arguments: the "approve for session" answers of session `session_id`, if open here."""
    session = runtime.sessions.get(session_id)
    granted = sorted(session.grants.granted) if session is not None else []
    return {"grants": [list(key) for key in granted]} if granted else {}


def _request_of(session_id: str, parked: PendingApproval) -> ApprovalRequest:
    """A parked question as the question its run asked."""
    return ApprovalRequest(
        entry=parked.chain[-1],
        depth=len(parked.chain) - 1,
        chain=parked.chain,
        toolset=parked.toolset,
        tool=parked.tool,
        args=parked.args,
        reason=parked.reason,
        description=parked.description,
        approval_id=parked.approval_id,
        call_id=parked.call_id or "",
        tool_call_id=parked.tool_call_id,
        attachments=parked.attachments,
        session_id=session_id,
    )


async def _store_answer(
    conn: AsyncConnection[Any], queue: str, job_id: int, request: ApprovalRequest, approval: Approval
) -> None:
    """A question the person answered in the live run, stored decided with its job (as a parked job's decision)."""
    await conn.execute(PARK_SQL, question_row(queue, job_id, request, 0))
    choice = "deny" if approval.choice == "deny" else "approve"  # a grant for the session approves this one
    await record_decision(conn, queue, job_id, request.approval_id, choice, approval.note)


async def _shielded(work: Awaitable[None]) -> None:
    task = asyncio.ensure_future(work)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait((task,))
        raise


def _settle(settled: asyncio.Future[None], _: object) -> None:
    if not settled.done():
        settled.set_result(None)
