"""Jobs parked until a person decides: real `llm-do worker` processes on the suite's PostgreSQL, the model
requests counted by the models themselves and every payment noted by the tool (tests/journal_app.py)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from llm_do import (
    AgentEntry,
    Approval,
    ApprovalRequest,
    CallScope,
    ConfigurationError,
    Runtime,
    ToolPolicy,
    Toolset,
    entry,
    tool,
)
from llm_do.approvals import RunSuspended
from llm_do.jobs import (
    DecisionRefused,
    InvalidJobRequest,
    JobEntry,
    JobNotFound,
    JobQueue,
    PendingApproval,
    WorkerOptions,
    expire_approvals,
    recover_stalled_jobs,
    remove_old_journals,
    run_worker,
)

from ..jobs_support import Worker, eventually, finished
from ..journal_app import parking as app_parking, queue as app_queue, sent
from ..tiers import sized

TARGET = "tests.journal_app:parking"
ENTRIES = list(app_parking.entries.values())


@pytest.fixture
async def queue(dsn: str) -> AsyncIterator[JobQueue]:
    async with JobQueue(dsn, entries=ENTRIES, queue=app_parking.queue_name, approvals="park") as opened:
        await opened.apply_schema()
        yield opened


def ask(notes: Path, amount: int = 10) -> str:
    return json.dumps({"notes": str(notes), "amount": amount})


def noted(notes: Path, kind: str) -> list[str]:
    return [line for line in (notes.read_text().splitlines() if notes.exists() else []) if line.startswith(kind)]


def paid(notes: Path) -> list[str]:
    return noted(notes, "paid ")


async def parked(queue: JobQueue, job_id: int, within: float = 30.0) -> PendingApproval:
    """Wait until the job is parked; the one question it waits on."""
    await parked_on_any(queue, job_id, within)
    [pending] = await queue.pending(job_id)
    return pending


async def parked_on_any(queue: JobQueue, job_id: int, within: float = 30.0) -> None:
    async def awaiting() -> bool:
        return (await queue.get(job_id)).status == "awaiting_approval"

    await eventually(awaiting, f"job {job_id} is parked", within=within)


PAYER_BEFORE = {("payer", 0): 1, ("payer", 1): 1, ("payer", 2): 1}
"""The payer's requests up to the one whose response asks to pay: each sent once, whatever the parking."""


async def test_a_parked_job_frees_its_worker_and_an_approval_resumes_it_paying_once(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=1)
    try:
        job_id = await queue.defer("payer", ask(notes, 25))
        pending = await parked(queue, job_id)
        assert (pending.chain, pending.toolset, pending.tool) == (("payer",), "till", "pay")
        assert pending.call_id == "call_1" and pending.tool_call_id  # as a live run's ApprovalRequest names it
        with pytest.deprecated_call(match="use PendingApproval.chain"):
            assert pending.call_path == "payer"  # the old name, kept
        assert pending.args == {"notes": str(notes), "amount": 25}
        assert pending.approval_id.startswith("apr_") and pending.reason
        assert [record.id for record in await queue.list("awaiting_approval")] == [job_id]
        assert paid(notes) == []

        other = await queue.defer("counter", json.dumps({"notes": str(tmp_path / "other")}))
        assert (await finished(queue, other)).status == "succeeded"  # the only slot was free
        assert (await queue.get(job_id)).status == "awaiting_approval"

        assert await queue.decide(job_id, pending.approval_id, "approve") is True
        record = await finished(queue, job_id)
    finally:
        assert worker.stop() == 0, worker.output()
    assert record.status == "succeeded", (record, worker.output())
    assert record.output == "done: quote ok, step 1 ok, paid 25"
    assert paid(notes) == ["paid 25"]
    assert noted(notes, "till exit") == ["till exit RunParked", "till exit ok"]  # the parked run was torn down
    assert sent(notes) == {**PAYER_BEFORE, ("payer", 3): 1}
    assert record.journal == {
        "replayed": 3,
        "sent": 1,
        "live_from": [{"call": "payer", "position": 3, "reason": "ends"}],
    }
    assert await queue.pending(job_id) == []
    assert await queue.list("awaiting_approval") == []


async def test_a_denied_call_never_runs_and_the_model_reads_the_denial(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=1)
    try:
        job_id = await queue.defer("payer", ask(notes))
        pending = await parked(queue, job_id)
        await queue.decide(job_id, pending.approval_id, "deny", note="over budget")
        record = await finished(queue, job_id)
    finally:
        assert worker.stop() == 0, worker.output()
    assert record.status == "succeeded", record
    assert paid(notes) == []
    assert "the approver denied it: over budget" in record.output
    assert sent(notes) == {**PAYER_BEFORE, ("payer", 3): 1}


async def test_decisions_that_cannot_apply_are_refused_and_a_parked_job_can_be_cancelled(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    async with JobQueue(dsn, entries=list(app_queue.entries.values())) as others:
        foreign = await others.defer("counter", "{}")
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=1)
    try:
        job_id = await queue.defer("payer", ask(notes))
        pending = await parked(queue, job_id)
        async with JobQueue(dsn, entries=ENTRIES, queue="twin", approvals="park") as twin:  # same entries
            assert await twin.list("awaiting_approval") == []
            for reach in (twin.get, twin.pending, twin.cancel):
                with pytest.raises(JobNotFound):
                    await reach(job_id)
            with pytest.raises(DecisionRefused, match=f"job {job_id} is no job of queue 'twin'"):
                await twin.decide(job_id, pending.approval_id, "approve")
            assert await expire_approvals(twin, 0) == [] and await remove_old_journals(twin, 0) == 0
        assert await queue.pending(job_id) == [pending] and await journaled(queue, job_id) == 3
        with pytest.raises(DecisionRefused, match=f"job {job_id} has no approval 'apr_nope'"):
            await queue.decide(job_id, "apr_nope", "approve")
        with pytest.raises(DecisionRefused, match=f"job {foreign} is no job of queue 'parking'"):
            await queue.decide(foreign, pending.approval_id, "approve")
        with pytest.raises(DecisionRefused, match="is no job of queue"):
            await queue.decide(10**9, pending.approval_id, "approve")
        with pytest.raises(
            InvalidJobRequest, match=r"approval id .apr_.x00. holds a NUL character, which no approval id does"
        ):
            await queue.decide(job_id, "apr_\x00", "approve")
        await queue.decide(job_id, pending.approval_id, "deny", note="not\x00now")  # a NUL is stored escaped
        with pytest.raises(
            DecisionRefused, match=f"approval '{pending.approval_id}' of job {job_id} was already decided"
        ):
            await queue.decide(job_id, pending.approval_id, "approve")
        record = await finished(queue, job_id)

        dropped = await queue.defer("payer", ask(tmp_path / "dropped"))
        question = await parked(queue, dropped)
        assert await queue.cancel(dropped) is True
        assert (await queue.get(dropped)).status == "cancelled"
        assert await queue.pending(dropped) == [] and await queue.cancel(dropped) is False
        with pytest.raises(DecisionRefused, match="was already decided"):
            await queue.decide(dropped, question.approval_id, "approve")
        assert await journaled(queue, dropped) == 3  # its runs stored no result: it ended all the same
        assert await remove_old_journals(queue, 3600) == 0
        await remove_old_journals(queue, 0)
        assert await journaled(queue, dropped) == 0
    finally:
        assert worker.stop() == 0, worker.output()
    assert record.status == "succeeded" and paid(notes) == []
    assert "the approver denied it: not\\x00now" in record.output
    assert paid(tmp_path / "dropped") == []


async def journaled(queue: JobQueue, job_id: int) -> int:
    async with queue.pool.connection() as conn:
        found = await (
            await conn.execute("SELECT count(*) FROM llm_do_journal WHERE job_id = %s", (job_id,))
        ).fetchone()
    assert found is not None
    return int(found[0])


async def lock_waiters(dsn: str, count: int, on: tuple[str, ...] = ("transactionid", "tuple")) -> None:
    """Wait until `count` sessions wait for a lock: a row another transaction holds (or, `on=("relation",)`, a
    table)."""

    async def waiting() -> bool:
        conn = await asyncpg.connect(dsn)
        try:
            found = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = ANY($1) "
                "AND datname = current_database()",
                list(on),
            )
        finally:
            await conn.close()
        return bool(found == count)

    await eventually(waiting, f"{count} session(s) wait for a lock ({', '.join(on)})")


async def test_a_cancel_that_waits_behind_a_decision_still_cancels_the_requeued_job(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """Three web processes: two decide, one cancels, at once. The first decision applies (it queues the job
    again), the second is refused; the cancel, which read the job parked, must still stop it, not answer that it
    already ended."""
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=1)
    try:
        job_id = await queue.defer("payer", ask(tmp_path / "notes"))
        pending = await parked(queue, job_id)
    finally:
        assert worker.stop() == 0, worker.output()  # nobody runs the job once it is queued again
    holder = await asyncpg.connect(dsn)  # another session holds the job's row
    try:
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM procrastinate_jobs WHERE id = $1 FOR UPDATE", job_id)
            deciding = asyncio.create_task(queue.decide(job_id, pending.approval_id, "approve"))
            await lock_waiters(dsn, 1)
            again = asyncio.create_task(queue.decide(job_id, pending.approval_id, "deny"))
            await lock_waiters(dsn, 2)
            cancelling = asyncio.create_task(queue.cancel(job_id))  # reads the job parked, then waits its turn
            await lock_waiters(dsn, 3)
    finally:
        await holder.close()
    assert await deciding is True
    with pytest.raises(DecisionRefused, match=f"approval '{pending.approval_id}' of job {job_id} was already decided"):
        await again
    assert await cancelling is True
    assert (await queue.get(job_id)).status == "cancelled"


async def test_a_cancel_that_comes_while_the_run_is_parking_ends_the_job_cancelled(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """The cancel reads the job once the run stored its question, before procrastinate marked its end: the job
    must not stay parked (a decision would run it after `cancel` said True)."""
    notes = tmp_path / "notes"
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=1)
    approvals = await asyncpg.connect(dsn)
    try:
        async with approvals.transaction():  # the run's question waits to be stored, the job's row held by the run
            await approvals.execute("LOCK TABLE llm_do_approvals IN EXCLUSIVE MODE")
            job_id = await queue.defer("payer", ask(notes))
            await lock_waiters(dsn, 1, on=("relation",))
            cancelling = asyncio.create_task(queue.cancel(job_id))
            await lock_waiters(dsn, 1)  # the cancel waits for the job's row
        assert await cancelling is True  # it read the question stored and the run still ending

        async def ended() -> bool:
            return (await queue.get(job_id)).status != "doing"

        await eventually(ended, "the parked run ended")
        assert (await queue.get(job_id)).status == "cancelled"
        assert await queue.pending(job_id) == []
    finally:
        await approvals.close()
        assert worker.stop() == 0, worker.output()
    assert paid(notes) == []


async def test_a_cancel_that_comes_just_before_the_run_stores_its_question_ends_the_job_cancelled(
    queue: JobQueue, dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """quitter's tool cancels its own job, then the model wants to pay. The worker hears of the cancel late (its
    notification is off, its polling hourly), as when the cancel commits just before the run stores its
    question: the question must not be stored, and the job ends cancelled, not parked (procrastinate would
    forget the cancel when the parked run ends)."""
    async with queue.pool.connection() as conn:
        await conn.execute(
            "ALTER TABLE procrastinate_jobs DISABLE TRIGGER procrastinate_jobs_notify_queue_job_aborted_v1"
        )
    monkeypatch.setenv("LLM_DO_JOBS_DATABASE_URL", dsn)  # the worker opens the queue quitter cancels through
    notes = tmp_path / "notes"
    stop = asyncio.Event()
    options = WorkerOptions(concurrency=1, heartbeat=0.2, poll_interval=3600, name="in-process")
    worker = asyncio.create_task(
        run_worker(app_parking, options, stop=stop, install_signal_handlers=False), name="in-process worker"
    )
    try:
        job_id = await queue.defer("quitter", ask(notes))

        async def ended() -> bool:
            return (await queue.get(job_id)).status not in ("todo", "doing")

        await eventually(ended, "the run ended")
        record = await queue.get(job_id)
    finally:
        stop.set()
        await worker
    assert (record.status, record.outcome, record.error) == ("aborted", "cancelled", "cancelled (cancel requested)")
    assert await queue.pending(job_id) == []
    assert paid(notes) == []
    assert sent(notes) == {("quitter", 0): 1, ("quitter", 1): 1, ("quitter", 2): 1}


async def test_a_decision_wakes_a_worker_that_polls_hourly(
    queue: JobQueue, dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """procrastinate notifies its workers of inserted jobs only; a decision queues the job again by an update, and
    notifies them itself: a worker that would poll for jobs once an hour resumes the job all the same."""
    monkeypatch.setenv("LLM_DO_JOBS_DATABASE_URL", dsn)
    notes = tmp_path / "notes"
    stop = asyncio.Event()
    options = WorkerOptions(concurrency=1, heartbeat=0.2, poll_interval=3600, name="in-process")
    worker = asyncio.create_task(
        run_worker(app_parking, options, stop=stop, install_signal_handlers=False), name="in-process worker"
    )
    try:
        job_id = await queue.defer("payer", ask(notes, 4))  # an insert: procrastinate's own notification
        pending = await parked(queue, job_id)
        assert await queue.decide(job_id, pending.approval_id, "approve") is True
        record = await finished(queue, job_id)
    finally:
        stop.set()
        await worker
    assert record.status == "succeeded" and paid(notes) == ["paid 4"]


async def test_a_job_whose_worker_died_while_it_parked_can_be_cancelled_and_leaves_no_question(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """The worker dies after the run stored its question and before its end was recorded: the job is queued again
    as stalled, its question still open. Cancelling it denies that question, so nothing shows it and its journal
    goes with the retention."""
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=1)
    approvals, events = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    try:
        async with approvals.transaction():  # the run's question waits to be stored
            await approvals.execute("LOCK TABLE llm_do_approvals IN EXCLUSIVE MODE")
            job_id = await queue.defer("payer", ask(tmp_path / "notes"))
            await lock_waiters(dsn, 1, on=("relation",))
            await events.execute("BEGIN")  # procrastinate records a job's end in its events table too
            await events.execute("LOCK TABLE procrastinate_events IN EXCLUSIVE MODE")

        async def stored() -> bool:
            return bool(await queue.pending(job_id))

        await eventually(stored, "the question is stored")
        await lock_waiters(dsn, 1, on=("relation",))  # the run's end waits for the events table
        worker.kill()
        await events.execute(  # the dead worker's session would still record the end once the table is free
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database()"
        )
        await events.execute("COMMIT")
    finally:
        await approvals.close()
        await events.close()
        worker.kill()
    assert await recover_stalled_jobs(queue, stalled_timeout=0.001) == [job_id]
    assert await queue.cancel(job_id) is True
    assert (await queue.get(job_id)).status == "cancelled"
    assert await queue.pending(job_id) == []
    await remove_old_journals(queue, 0)
    assert await journaled(queue, job_id) == 0


async def test_a_parked_job_whose_queueing_lock_another_queued_job_took(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """procrastinate lets one queued job hold a queueing lock. A parked job is not queued, so another job may take
    its lock: the decision that would queue it again is refused until then (expiry too), and a cancel works."""
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=1)
    try:
        job_id = await queue.defer("payer", ask(tmp_path / "notes"), queueing_lock="account-7")
        pending = await parked(queue, job_id)
        later = await queue.defer("payer", ask(tmp_path / "later"), queueing_lock="account-7", delay=3600)
        refused = rf"job {job_id} cannot be queued again while job {later} holds its queueing lock 'account-7'"
        with pytest.raises(DecisionRefused, match=refused):
            await queue.decide(job_id, pending.approval_id, "approve")
        assert await expire_approvals(queue, 0) == []  # refused likewise, and the housekeeping goes on
        assert await queue.pending(job_id) == [pending]  # nothing was stored
        assert await queue.cancel(later) is True
        assert await queue.decide(job_id, pending.approval_id, "approve") is True
        assert (await finished(queue, job_id)).status == "succeeded"

        dropped = await queue.defer("payer", ask(tmp_path / "dropped"), queueing_lock="account-8")
        await parked(queue, dropped)
        waiting = await queue.defer("payer", ask(tmp_path / "waiting"), queueing_lock="account-8", delay=3600)
        assert await queue.cancel(dropped) is True
        assert [(await queue.get(each)).status for each in (dropped, waiting)] == ["cancelled", "todo"]
    finally:
        assert worker.stop() == 0, worker.output()
    assert paid(tmp_path / "notes") == ["paid 10"] and paid(tmp_path / "dropped") == []


async def test_an_approval_asked_at_depth_2_parks_and_the_whole_tree_replays(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """chief asks middle, which asks payer, which wants to pay."""
    notes = tmp_path / "notes"
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=1)
    try:
        job_id = await queue.defer("chief", ask(notes, 7))
        pending = await parked(queue, job_id)
        assert (pending.chain, pending.tool) == (("chief", "middle", "payer"), "pay")
        await queue.decide(job_id, pending.approval_id, "approve")
        record = await finished(queue, job_id)
    finally:
        assert worker.stop() == 0, worker.output()
    assert record.status == "succeeded", (record, worker.output())
    assert record.output == "middle said: payer said: done: quote ok, step 1 ok, paid 7"
    assert paid(notes) == ["paid 7"]
    assert sent(notes) == {
        ("chief", 0): 1,
        ("middle", 0): 1,
        **PAYER_BEFORE,
        ("payer", 3): 1,
        ("middle", 1): 1,
        ("chief", 1): 1,
    }
    assert record.journal is not None and record.journal["replayed"] == 5


async def test_a_tool_that_catches_the_parking_does_not_keep_the_job_from_parking(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """careful's tool has the payer pay inside `except Exception`, which catches `RunParked`: the run goes on,
    but the job parks all the same (no result stored), and the decision resumes it to succeed once."""
    notes = tmp_path / "notes"
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=1)
    try:
        job_id = await queue.defer("careful", ask(notes, 5))
        pending = await parked(queue, job_id)
        assert (pending.chain, pending.tool) == (("careful", "payer"), "pay")
        assert (await queue.get(job_id)).outcome is None  # the parked run stored no result
        assert await queue.decide(job_id, pending.approval_id, "approve") is True
        record = await finished(queue, job_id)
    finally:
        assert worker.stop() == 0, worker.output()
    assert record.status == "succeeded", (record, worker.output())
    assert record.output == "careful: done: quote ok, step 1 ok, paid 5"
    assert paid(notes) == ["paid 5"]
    assert await queue.pending(job_id) == []
    # The parked run read the caught failure and answered it (request 1); the resumed run asked again, live.
    assert sent(notes) == {("careful", 0): 1, **PAYER_BEFORE, ("payer", 3): 1, ("careful", 1): 2}


async def test_parallel_calls_that_both_ask_resume_once_each_is_decided(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """pair asks two payers at once; each wants to pay. Whichever questions a run parked on, the job is queued
    again once they are all decided, and goes on until the last one is answered."""
    notes = {tag: tmp_path / f"{tag}.notes" for tag in ("pair", "a", "b")}
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=1)
    decided: list[str] = []
    try:
        job_id = await queue.defer(
            "pair", json.dumps({"notes": str(notes["pair"]), "notes_a": str(notes["a"]), "notes_b": str(notes["b"])})
        )
        while len(decided) < 2:
            await parked_on_any(queue, job_id)
            questions = await queue.pending(job_id)
            assert questions and all(question.chain == ("pair", "payer") for question in questions)
            for number, question in enumerate(questions, 1):
                assert question.approval_id not in decided
                resumed = await queue.decide(job_id, question.approval_id, "approve")
                assert resumed is (number == len(questions))
                decided.append(question.approval_id)
        record = await finished(queue, job_id)
    finally:
        assert worker.stop() == 0, worker.output()
    assert record.status == "succeeded", (record, worker.output())
    assert record.output == "pair: done: quote ok, step 1 ok, paid 1 | done: quote ok, step 1 ok, paid 2"
    assert (paid(notes["a"]), paid(notes["b"])) == (["paid 1"], ["paid 2"])
    assert sent(notes["pair"]) == {("pair", 0): 1, ("pair", 1): 1}
    assert sent(notes["a"]) == sent(notes["b"]) == {**PAYER_BEFORE, ("payer", 3): 1}


async def test_two_questions_of_one_response_park_together_and_resume_once_both_are_decided(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """double pays 1 and 2 in one response: the job parks on both questions at once (one round of decisions), and
    deciding both queues it again once."""
    notes = tmp_path / "notes"
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=1)
    try:
        job_id = await queue.defer("double", json.dumps({"notes": str(notes)}))
        await parked_on_any(queue, job_id)
        questions = await queue.pending(job_id)
        assert sorted(question.args["amount"] for question in questions) == [1, 2]
        assert all((question.chain, question.call_id) == (("double",), "call_1") for question in questions)
        assert [await queue.decide(job_id, question.approval_id, "approve") for question in questions] == [False, True]
        record = await finished(queue, job_id)
    finally:
        assert worker.stop() == 0, worker.output()
    assert record.status == "succeeded", (record, worker.output())
    assert record.attempts == 3  # one park: its end and its retry
    assert record.output == "double: paid 1, paid 2"
    assert sorted(paid(notes)) == ["paid 1", "paid 2"]
    assert sent(notes) == {("double", 0): 1, ("double", 1): 1}


async def test_a_slower_sibling_finishes_its_request_and_both_questions_park_together(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """pair asks two payers at once. Payer b's model answers its request to pay only once payer a has asked: the
    run does not park while b's request is in flight. b's response is journaled (paid once), b reaches its own
    question, and both questions park together: one round of decisions."""
    notes = {tag: tmp_path / f"{tag}.notes" for tag in ("pair", "a", "b")}
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=1)
    try:
        fields = {"notes": str(notes["pair"]), "notes_a": str(notes["a"]), "notes_b": str(notes["b"]), "slow_b": True}
        job_id = await queue.defer("pair", json.dumps(fields))
        await parked_on_any(queue, job_id)
        questions = await queue.pending(job_id)
        assert sorted(question.args["amount"] for question in questions) == [1, 2]
        assert [await queue.decide(job_id, question.approval_id, "approve") for question in questions] == [False, True]
        record = await finished(queue, job_id)
    finally:
        assert worker.stop() == 0, worker.output()
    assert record.status == "succeeded", (record, worker.output())
    assert record.attempts == 3  # one park: its end and its retry
    assert (paid(notes["a"]), paid(notes["b"])) == (["paid 1"], ["paid 2"])
    assert sent(notes["a"]) == sent(notes["b"]) == {**PAYER_BEFORE, ("payer", 3): 1}
    assert sent(notes["pair"]) == {("pair", 0): 1, ("pair", 1): 1}


async def test_a_decision_never_applies_to_a_question_asked_again_with_other_arguments(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """drifty pays what a drifting tool read, under a fixed tool call id: the resumed run asks the same
    question id with another amount, so the decision does not apply and the job parks again."""
    notes = tmp_path / "notes"
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=1)
    try:
        job_id = await queue.defer("drifty", ask(notes))
        first = await parked(queue, job_id)
        assert first.args["amount"] == 1
        await queue.decide(job_id, first.approval_id, "approve")

        async def asked_again() -> bool:
            found = await queue.pending(job_id)
            return bool(found) and found[0].args["amount"] != 1

        await eventually(asked_again, "the job asks again, with the drifted amount")
        second = await parked(queue, job_id)
        assert second.approval_id == first.approval_id and second.args["amount"] == 3
        assert await queue.cancel(job_id) is True
    finally:
        assert worker.stop() == 0, worker.output()
    assert paid(notes) == []


async def test_two_jobs_whose_models_give_the_same_tool_call_id_park_on_questions_of_their_own(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """Two drifty jobs pay under the same fixed tool call id: their questions' ids differ, and one job's id
    decides nothing of the other's."""
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=2)
    try:
        jobs = [await queue.defer("drifty", ask(tmp_path / f"notes{n}")) for n in (1, 2)]
        first, second = [await parked(queue, job_id) for job_id in jobs]
        assert first.tool_call_id == second.tool_call_id == "pay-once"
        assert first.approval_id != second.approval_id
        with pytest.raises(DecisionRefused, match=f"job {jobs[1]} has no approval '{first.approval_id}'"):
            await queue.decide(jobs[1], first.approval_id, "approve")
        assert [await queue.cancel(job_id) for job_id in jobs] == [True, True]
    finally:
        assert worker.stop() == 0, worker.output()


async def test_a_tool_that_changes_on_every_run_fails_the_job_after_the_rounds_allowed(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """drifty pays what a drifting tool read: each resumed run goes live before the question and asks again. With
    LLM_DO_JOBS_PARKING_ROUNDS=1, the job parks once more, then fails naming the tool whose result changed."""
    notes = tmp_path / "notes"
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=1, env={"LLM_DO_JOBS_PARKING_ROUNDS": "1"})
    amounts = []
    try:
        job_id = await queue.defer("drifty", ask(notes))
        for _ in range(2):
            await parked_on_any(queue, job_id)
            [question] = await queue.pending(job_id)
            amounts.append(question.args["amount"])
            assert await queue.decide(job_id, question.approval_id, "approve") is True

            async def ran_again(decided: PendingApproval = question) -> bool:
                record = await queue.get(job_id)
                return record.status == "failed" or (
                    record.status == "awaiting_approval" and await queue.pending(job_id) != [decided]
                )

            await eventually(ran_again, "the resumed run ended or parked again")
        record = await queue.get(job_id)
    finally:
        assert worker.stop() == 0, worker.output()
    assert amounts == [1, 3]  # the first attempt's, then the resumed run's (each park counts two attempts)
    assert record.status == "failed", record
    assert record.error is not None and record.error.startswith("ParkingDiverged: job ")
    assert "asked again 2 times in a row (LLM_DO_JOBS_PARKING_ROUNDS allows 1)" in record.error
    assert "the result of tool 'drift' changed since the journaled run (call drifty, request 1)" in record.error
    assert await queue.pending(job_id) == []
    assert paid(notes) == []


async def test_a_decision_never_sends_a_file_that_changed_since_the_question(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """hander hands doc.txt to the reviewer, whose calls with attachments ask. The file changes (same size) while
    the job is parked: the person approved the bytes they were shown, so the resumed run asks again."""
    notes, doc = tmp_path / "notes", tmp_path / "doc.txt"
    doc.write_text("shown\n")
    env = {"LLM_DO_PROJECT_ROOT": str(tmp_path)}
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=1, env=env)
    try:
        job_id = await queue.defer("hander", json.dumps({"notes": str(notes), "file": "doc.txt"}))
        first = await parked(queue, job_id)
        assert (first.chain, first.toolset, first.args["attachments"]) == (("hander",), "reviewer", ["doc.txt"])
        doc.write_text("other\n")
        assert await queue.decide(job_id, first.approval_id, "approve") is True

        async def ran_again() -> bool:
            return (await queue.get(job_id)).status in ("awaiting_approval", "succeeded", "failed")

        await eventually(ran_again, "the resumed run ended or parked")
        assert noted(notes, "reviewed") == []  # the approval did not send what nobody was shown
        second = await parked(queue, job_id)
        assert second.approval_id == first.approval_id and second.args == first.args
        assert [(info.name, info.size) for info in first.attachments] == [("doc.txt", 6)]
        assert [info.sha256 for info in second.attachments] == [hashlib.sha256(b"other\n").hexdigest()]
        assert first.attachments[0].sha256 == hashlib.sha256(b"shown\n").hexdigest()
        assert await queue.decide(job_id, second.approval_id, "approve") is True
        record = await finished(queue, job_id)
    finally:
        assert worker.stop() == 0, worker.output()
    assert record.status == "succeeded", (record, worker.output())
    assert record.output == "reviewer said: read other"
    assert noted(notes, "reviewed") == ["reviewed other"]


@pytest.mark.long
@pytest.mark.deep
async def test_parked_jobs_decided_in_random_order_across_workers(queue: JobQueue, dsn: str, tmp_path: Path) -> None:
    """20 parked jobs in `make test`, 50 in `make test-deep`; the first worker stops halfway through the decisions."""
    count = sized(dev=20, deep=50)
    jobs = {}
    first = Worker(TARGET, dsn, tmp_path / "first.log", concurrency=2)
    second: Worker | None = None
    try:
        for n in range(count):
            notes = tmp_path / f"job{n}.notes"
            jobs[await queue.defer("payer", ask(notes, n))] = notes
        questions = {job_id: await parked(queue, job_id) for job_id in jobs}
        assert sorted(record.id for record in await queue.list("awaiting_approval")) == sorted(jobs)
        other = await queue.defer("counter", json.dumps({"notes": str(tmp_path / "other")}))
        assert (await finished(queue, other)).status == "succeeded"  # the parked jobs hold none of its 2 slots
        second = Worker(TARGET, dsn, tmp_path / "second.log", concurrency=2)
        order = list(jobs)
        random.Random(7).shuffle(order)
        approved = set(order[::2])
        for index, job_id in enumerate(order):
            if index == count // 2:
                assert first.stop() == 0, first.output()  # the rest run on a worker that did not start them
            await queue.decide(job_id, questions[job_id].approval_id, "approve" if job_id in approved else "deny")
        records = {job_id: await finished(queue, job_id) for job_id in jobs}
    finally:
        first.kill()
        if second is not None:
            assert second.stop() == 0, second.output()
    for job_id, notes in jobs.items():
        assert records[job_id].status == "succeeded", records[job_id]
        amount = json.loads(records[job_id].input)["amount"]
        assert paid(notes) == ([f"paid {amount}"] if job_id in approved else [])
        assert sent(notes) == {**PAYER_BEFORE, ("payer", 3): 1}


async def test_an_approval_nobody_decides_expires_denied_and_the_job_goes_on(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=1, env={"LLM_DO_JOBS_APPROVAL_EXPIRY": "1"})
    try:
        job_id = await queue.defer("payer", ask(notes))
        record = await finished(queue, job_id)
    finally:
        assert worker.stop() == 0, worker.output()
    assert record.status == "succeeded", record
    assert paid(notes) == []
    assert "no decision came within 1s (LLM_DO_JOBS_APPROVAL_EXPIRY)" in record.output
    assert sent(notes) == {**PAYER_BEFORE, ("payer", 3): 1}


async def test_housekeeping_steps_are_independent_a_failing_expiry_leaves_journal_removal(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """The database refuses every denial (a CHECK constraint), so the workers' approval expiry fails at every
    heartbeat: the journals of finished jobs are removed all the same."""
    async with queue.pool.connection() as conn:
        await conn.execute("ALTER TABLE llm_do_approvals ADD CONSTRAINT no_denial CHECK (choice <> 'deny')")
    env = {"LLM_DO_JOBS_APPROVAL_EXPIRY": "0.01", "LLM_DO_JOBS_JOURNAL_RETENTION": "0"}
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=1, env=env)
    try:
        stuck = await queue.defer("payer", ask(tmp_path / "notes"))
        await parked(queue, stuck)  # its question expires at once, and its denial is refused
        job_id = await queue.defer("counter", json.dumps({"notes": str(tmp_path / "counter")}))
        assert (await finished(queue, job_id)).status == "succeeded"

        async def removed() -> bool:
            return await journaled(queue, job_id) == 0

        await eventually(removed, "the finished job's journal is removed", within=10)
        assert (await queue.get(stuck)).status == "awaiting_approval"  # the expiry still fails
    finally:
        assert worker.stop() == 0, worker.output()
    assert "housekeeping: expiring approvals failed" in worker.output()  # a warning: the database is not away


async def test_a_decision_survives_the_kill_of_the_worker_before_the_resumed_run(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    first = Worker(TARGET, dsn, tmp_path / "first.log", concurrency=1)
    try:
        job_id = await queue.defer("payer", ask(notes, 3))
        pending = await parked(queue, job_id)
    finally:
        first.kill()
    await queue.decide(job_id, pending.approval_id, "approve")
    assert (await queue.get(job_id)).status == "todo"
    second = Worker(TARGET, dsn, tmp_path / "second.log", concurrency=1)
    try:
        record = await finished(queue, job_id)
    finally:
        assert second.stop() == 0, second.output()
    assert record.status == "succeeded" and paid(notes) == ["paid 3"]
    assert sent(notes) == {**PAYER_BEFORE, ("payer", 3): 1}


def test_a_parking_queue_refuses_entries_without_a_journal_and_unknown_modes() -> None:
    with pytest.raises(ConfigurationError, match=r"approvals='park'\) needs the journal, but entry 'plain' opts out"):
        JobQueue("postgresql://nowhere", entries=["payer", JobEntry("plain", journal=False)], approvals="park")
    with pytest.raises(ConfigurationError, match="must be 'runtime' or 'park', got 'later'"):
        JobQueue("postgresql://nowhere", entries=["payer"], approvals="later")  # type: ignore[arg-type]


# -- in one process: the hold itself, without PostgreSQL --------------------------------------------------------


class _Suspended(RunSuspended):
    """What a parking approver raises: the question stays open outside the run."""


class _Purse(Toolset):
    @tool
    def pay(self, amount: int) -> str:
        """Pay `amount`."""
        return f"paid {amount}"


def _holding_runtime(approver: Any, slow: asyncio.Event, answered: list[str]) -> Runtime:
    """`two` asks `payer` twice at once; payer `late` answers its first request only once `slow` is set, and 50
    turns of the event loop later."""

    async def two(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("payer", {"input": tag}) for tag in ("early", "late")])
        return ModelResponse(parts=[TextPart("both paid")])

    async def payer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        first = messages[0]
        assert isinstance(first, ModelRequest)
        tag = next(str(part.content) for part in first.parts if isinstance(part, UserPromptPart))
        if len(messages) > 1:
            return ModelResponse(parts=[TextPart(f"{tag} done")])
        if tag.startswith("late"):
            await slow.wait()
            for _ in range(50):  # turns enough for the early call's end to reach pydantic-ai, were it not held
                await asyncio.sleep(0)
        answered.append(tag)
        return ModelResponse(parts=[ToolCallPart("pay", {"amount": len(tag)})])

    return Runtime(
        None,
        entries=[
            AgentEntry(Agent(FunctionModel(two)), name="two", toolsets=["payer"]),
            AgentEntry(Agent(FunctionModel(payer)), name="payer", toolsets=["purse"]),
        ],
        toolsets={"purse": _Purse},
        policies={"purse": ToolPolicy(tools={"pay": "ask"})},
        approver=approver,
    )


async def test_a_suspended_call_waits_for_its_slower_sibling_to_reach_its_own_question() -> None:
    slow, answered, asked = asyncio.Event(), list[str](), list[int]()

    async def approver(request: ApprovalRequest) -> Approval:
        asked.append(request.args["amount"])
        slow.set()  # the late payer's model answers only now: its request was in flight when the early one asked
        raise _Suspended(request.description)

    async with _holding_runtime(approver, slow, answered) as runtime, asyncio.timeout(10):
        with pytest.raises(_Suspended):
            await runtime.run("two", "go")
    assert answered == ["early", "late"]  # the late payer's request was answered, not cancelled
    assert asked == [5, 4]  # and its question was asked in the same run


async def test_calls_an_entrys_function_makes_side_by_side_are_held_like_a_models() -> None:
    """fan has two payers pay at once from Python (`asyncio.gather` of `scope.call_agent`): the early payer's
    suspension waits for the late one's request and question, as for a model's parallel tool calls."""
    slow, answered, asked = asyncio.Event(), list[str](), list[int]()

    async def approver(request: ApprovalRequest) -> Approval:
        asked.append(request.args["amount"])
        slow.set()
        raise _Suspended(request.description)

    @entry(name="fan", toolsets=["payer"])
    async def fan(scope: CallScope, text: str) -> str:
        said = await asyncio.gather(scope.call_agent("payer", "early"), scope.call_agent("payer", "late"))
        return " | ".join(map(str, said))

    payer = _holding_runtime(approver, slow, answered).entry("payer")
    runtime = Runtime(
        None,
        entries=[fan, payer],
        toolsets={"purse": _Purse},
        policies={"purse": ToolPolicy(tools={"pay": "ask"})},
        approver=approver,
    )
    async with runtime, asyncio.timeout(10):
        with pytest.raises(_Suspended):
            await runtime.run("fan", "go")
    assert answered == ["early", "late"] and asked == [5, 4]


async def test_a_question_the_same_response_asked_of_the_calls_own_tool_parks_with_the_childs() -> None:
    """mixed pays itself and has the payer pay, in one response: pydantic-ai would ask mixed's own question after
    the response's tool calls end, which the payer's suspension cuts short. Both are asked in the one run."""
    asked: list[str] = []

    async def mixed(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("pay", {"amount": 1}), ToolCallPart("payer", {"input": "child"})])
        return ModelResponse(parts=[TextPart("done")])

    async def approver(request: ApprovalRequest) -> Approval:
        asked.append(" > ".join(request.chain))
        raise _Suspended(request.description)

    payer = _holding_runtime(approver, asyncio.Event(), []).entry("payer")
    runtime = Runtime(
        None,
        entries=[AgentEntry(Agent(FunctionModel(mixed)), name="mixed", toolsets=["purse", "payer"]), payer],
        toolsets={"purse": _Purse},
        policies={"purse": ToolPolicy(tools={"pay": "ask"})},
        approver=approver,
    )
    async with runtime, asyncio.timeout(10):
        with pytest.raises(_Suspended):
            await runtime.run("mixed", "go")
    assert sorted(asked) == ["mixed", "mixed > payer"]


async def test_a_held_call_is_cancelled_with_its_run() -> None:
    """The late payer's model never answers: the early payer's call is held, and cancelling the run ends it."""
    slow, answered, asked = asyncio.Event(), list[str](), list[str]()

    async def approver(request: ApprovalRequest) -> Approval:
        asked.append(request.approval_id)
        raise _Suspended(request.description)

    async with _holding_runtime(approver, slow, answered) as runtime:
        running = asyncio.create_task(runtime.run("two", "go"))

        async def held() -> bool:
            return bool(asked)

        await eventually(held, "the early payer asked")
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
    assert answered == ["early"] and len(asked) == 1
