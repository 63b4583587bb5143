"""Live runs of a session that park as jobs: a question that waits longer than `park_after` ends the live run (its
teardown runs, its stream ends saying where the question went) and a decision resumes it on a real `llm-do worker`
process, in the session, replaying what it paid for. The models note every request they are sent, the till every
payment (tests/journal_app.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from pydantic_ai.messages import ModelResponse, TextPart

from llm_do import (
    ApprovalChoice,
    ApprovalNotPending,
    ApprovalRequest,
    ApprovalRequested,
    PostgresHistoryStore,
    RunFailed,
    RunFinished,
    Runtime,
    SessionBusy,
)
from llm_do.approvals import session_key
from llm_do.events import ApprovalDecided, StreamEvent
from llm_do.jobs import (
    DecisionRefused,
    JobQueue,
    LiveParking,
    LiveRunParked,
    PendingApproval,
    RunParked,
    SessionJob,
    recover_stalled_jobs,
    remove_old_journals,
)
from llm_do.web import vercel_chunks

from ..jobs_support import Worker, eventually, finished, query, wait_for_workers
from ..journal_app import sent
from ..live_app import ENTRIES, QUEUE, live_runtime

TARGET = "tests.live_app:queue"


@pytest.fixture
async def queue(dsn: str) -> AsyncIterator[JobQueue]:
    async with JobQueue(dsn, entries=ENTRIES, queue=QUEUE, approvals="park") as opened:
        await opened.apply_schema()
        yield opened


@pytest.fixture
async def runtime(dsn: str, queue: JobQueue) -> AsyncIterator[Runtime]:
    """The web process's runtime (this test's process)."""
    async with live_runtime(dsn) as opened:
        yield opened


@pytest.fixture
async def worker(dsn: str, tmp_path: Path) -> AsyncIterator[Worker]:
    """A real `llm-do worker` process of the live queue, running before the test starts; it must stop cleanly."""
    started = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=1)
    await wait_for_workers(dsn, 1, [started])
    try:
        yield started
    finally:
        stopped = started.stop()
    assert stopped == 0, started.output()


def ask(notes: Path, amount: int = 10) -> str:
    return json.dumps({"notes": str(notes), "amount": amount})


def noted(notes: Path, kind: str) -> list[str]:
    return [line for line in (notes.read_text().splitlines() if notes.exists() else []) if line.startswith(kind)]


PAYER_BEFORE = {("payer", 0): 1, ("payer", 1): 1, ("payer", 2): 1}
"""The payer's requests up to its question (quote, step, pay), each sent once."""


async def test_a_question_that_waits_too_long_parks_the_run_and_a_decision_resumes_it_in_its_session(
    queue: JobQueue, runtime: Runtime, dsn: str, tmp_path: Path, worker: Worker
) -> None:
    notes = tmp_path / "notes"
    parking = LiveParking(queue, runtime, park_after=0.2)
    events: list[StreamEvent] = []

    async def seen(run: Any) -> AsyncIterator[StreamEvent]:
        async for event in run:
            events.append(event)
            yield event

    async with parking.stream("payer", ask(notes, 25), session="alice") as run:
        chunks = [chunk.model_dump(mode="json", by_alias=True) async for chunk in vercel_chunks(seen(run))]
    # the run ended parked: torn down (the till closed), nothing paid, the question not answered here
    [asked] = [event.request for event in events if isinstance(event, ApprovalRequested)]
    [decided] = [event for event in events if isinstance(event, ApprovalDecided)]
    assert decided.approved is False and isinstance(decided.error, RunParked)  # left open, not answered
    last = events[-1]
    assert isinstance(last, RunFailed) and isinstance(last.error, LiveRunParked)
    parked = last.error
    assert [question.approval_id for question in parked.questions] == [asked.approval_id]
    assert parked.session_id == "alice" and f"job {parked.job_id}" in str(parked)
    assert noted(notes, "paid") == [] and noted(notes, "till exit") == ["till exit RunParked"]
    assert sent(notes) == PAYER_BEFORE
    with pytest.raises(ApprovalNotPending):
        run.decide(asked.approval_id, "approve")  # a late click on the page that showed it
    assert run.pending == ()
    assert runtime.sessions["alice"].busy is False  # the session is free; its history has no turn of the run

    # what the page read: the question shown parked, where it waits, and a whole stream
    kinds = [chunk["type"] for chunk in chunks]
    assert kinds[0] == "start" and kinds[-2:] == ["finish", "done"] and "error" not in kinds
    [told] = [chunk["data"] for chunk in chunks if chunk["type"] == "data-llm-do-parked"]
    assert told["job_id"] == parked.job_id and told["approval_ids"] == [asked.approval_id]
    shown = [c["data"] for c in chunks if c["type"] == "data-llm-do-approval"]
    assert [data["state"] for data in shown] == ["pending", "parked", "parked"]
    assert shown[-1]["job_id"] == parked.job_id and shown[-1]["tool"] == "pay"  # every field kept

    # the job: parked, in the session, its question the live run's (same id), reachable from that session only
    record = await queue.get(parked.job_id)
    assert (record.status, record.entry, record.session) == ("awaiting_approval", "payer", "alice")
    [pending] = await parking.pending("alice")
    assert (pending.job_id, pending.approval_id, pending.tool_call_id) == (
        parked.job_id,
        asked.approval_id,
        asked.tool_call_id,
    )
    assert pending.args == {"notes": str(notes), "amount": 25}
    assert await parking.pending("bob") == []
    with pytest.raises(DecisionRefused, match="no parked question of session 'bob'"):
        await parking.decide("bob", asked.approval_id, "approve")
    assert (await queue.get(parked.job_id)).status == "awaiting_approval"

    # decided: a worker replays the run up to the question, pays once, and ends the session's turn
    assert await parking.decide("alice", asked.approval_id, "approve") is True
    record = await finished(queue, parked.job_id)
    assert record.status == "succeeded", (record, worker.output())
    assert record.output == "done: quote ok, step 1 ok, paid 25"
    assert noted(notes, "paid") == ["paid 25"]
    assert sent(notes) == {**PAYER_BEFORE, ("payer", 3): 1}  # nothing paid twice
    went_live = [{"call": "payer", "position": 3, "reason": "ends"}]
    assert record.journal == {"replayed": 3, "sent": 1, "live_from": went_live}
    async with PostgresHistoryStore(dsn) as store:
        history = (await store.load("alice")).messages
    final = history[-1]
    assert isinstance(final, ModelResponse) and final.parts == [TextPart("done: quote ok, step 1 ok, paid 25")]
    assert len([message for message in history if isinstance(message, ModelResponse)]) == 4
    # the web process, whose session stayed open, reads the conversation with the worker's turn (a page reloading)
    assert (await runtime.session("alice")).history == history
    assert await parking.pending("alice") == []


async def test_parallel_questions_park_together_and_resume_once_both_are_decided(
    queue: JobQueue, runtime: Runtime, dsn: str, tmp_path: Path, worker: Worker
) -> None:
    notes_a, notes_b = tmp_path / "a", tmp_path / "b"
    prompt = json.dumps({"notes": str(tmp_path / "pair"), "notes_a": str(notes_a), "notes_b": str(notes_b)})
    parking = LiveParking(queue, runtime, park_after=0.2)
    async with parking.stream("pair", prompt, session="carol") as run:
        events = [event async for event in run]
    amounts = {
        event.request.args["amount"]: event.request.approval_id
        for event in events
        if isinstance(event, ApprovalRequested)
    }
    asked = set(amounts.values())
    last = events[-1]
    assert isinstance(last, RunFailed) and isinstance(last.error, LiveRunParked), last
    assert {question.approval_id for question in last.error.questions} == asked and len(asked) == 2
    assert noted(notes_a, "paid") == noted(notes_b, "paid") == []
    pending = await parking.pending("carol")
    assert {question.approval_id for question in pending} == asked
    first, second = amounts[1], amounts[2]  # payer a's question, payer b's
    assert await parking.decide("carol", first, "approve") is False  # it waits on the other one too
    assert await parking.decide("carol", second, "deny", note="not b") is True
    record = await finished(queue, last.error.job_id)
    assert record.status == "succeeded", (record, worker.output())
    assert noted(notes_a, "paid") == ["paid 1"] and noted(notes_b, "paid") == []
    assert sent(notes_a) == {**PAYER_BEFORE, ("payer", 3): 1}  # each payer's requests paid once
    assert sent(notes_b) == {**PAYER_BEFORE, ("payer", 3): 1}
    assert "not b" in str(record.output)


async def test_two_questions_of_one_response_are_shown_together_park_together_and_resume_once(
    queue: JobQueue, runtime: Runtime, dsn: str, tmp_path: Path, worker: Worker
) -> None:
    """double pays 1 and 2 in one response: the page shows both questions before either parks, the run parks on both
    (none left for the resumed run to park on again), and deciding both resumes the job once."""
    notes = tmp_path / "notes"
    parking = LiveParking(queue, runtime, park_after=0.3)
    async with parking.stream("double", json.dumps({"notes": str(notes)}), session="dora") as run:
        events = [event async for event in run]
    asked = [event.request for event in events if isinstance(event, ApprovalRequested)]
    assert [question.args["amount"] for question in asked] == [1, 2]  # in the order the model made them
    questions = [event for event in events if isinstance(event, (ApprovalRequested, ApprovalDecided))]
    shown = [ApprovalRequested, ApprovalRequested, ApprovalDecided, ApprovalDecided]
    assert [type(event) for event in questions] == shown  # both shown before either parked
    last = events[-1]
    assert isinstance(last, RunFailed) and isinstance(last.error, LiveRunParked), last
    ids = {question.approval_id for question in asked}
    assert {question.approval_id for question in last.error.questions} == ids and len(ids) == 2
    assert {question.approval_id for question in await parking.pending("dora")} == ids
    assert noted(notes, "paid") == []

    assert await parking.decide("dora", asked[0].approval_id, "approve") is False  # it waits on the other one too
    assert await parking.decide("dora", asked[1].approval_id, "deny", note="not 2") is True
    record = await finished(queue, last.error.job_id)
    assert record.status == "succeeded" and record.attempts == 3, (record, worker.output())  # parked once, not twice
    assert str(record.output).startswith("double: paid 1, ") and "not 2" in str(record.output)
    assert noted(notes, "paid") == ["paid 1"]
    assert sent(notes) == {("double", 0): 1, ("double", 1): 1}  # the response that asked twice was paid once
    assert await parking.pending("dora") == []


async def answer_first(
    parking: LiveParking, entry: str, prompt: str, session: str, choice: ApprovalChoice, note: str | None = None
) -> tuple[list[ApprovalRequested], StreamEvent]:
    """Stream a run of `entry`, answering its first question live (`choice`, `note`): the questions it asked, and
    its last event."""
    asked: list[ApprovalRequested] = []
    async with parking.stream(entry, prompt, session=session) as run:
        async for event in run:
            if isinstance(event, ApprovalRequested):
                asked.append(event)
                if len(asked) == 1:
                    run.decide(event.request.approval_id, choice, note=note)  # the person answers the first
            last = event
    return asked, last


async def test_a_question_answered_live_is_not_asked_again_when_the_run_resumes(
    queue: JobQueue, runtime: Runtime, dsn: str, tmp_path: Path, worker: Worker
) -> None:
    notes = tmp_path / "notes"
    parking = LiveParking(queue, runtime, park_after=0.3)
    asked, last = await answer_first(parking, "twice", json.dumps({"notes": str(notes)}), "hana", "deny", "not 1")
    assert isinstance(last, RunFailed) and isinstance(last.error, LiveRunParked)
    _, second = (event.request.approval_id for event in asked)
    assert [question.approval_id for question in last.error.questions] == [second]
    assert [question.approval_id for question in await parking.pending("hana")] == [second]
    assert await parking.decide("hana", second, "approve") is True
    record = await finished(queue, last.error.job_id)
    assert record.status == "succeeded" and record.attempts == 3, (record, worker.output())  # parked once, not twice
    assert "not 1" in str(record.output) and str(record.output).endswith("paid 2")  # the first denied as answered
    assert noted(notes, "paid") == ["paid 2"]
    assert sent(notes) == {("twice", 0): 1, ("twice", 1): 1, ("twice", 2): 1}


async def test_a_live_answer_whose_note_holds_a_nul_character_parks_with_the_run(
    queue: JobQueue, runtime: Runtime, tmp_path: Path
) -> None:
    parking = LiveParking(queue, runtime, park_after=0.3)
    notes = json.dumps({"notes": str(tmp_path / "notes")})
    asked, last = await answer_first(
        parking, "twice", notes, "nul", "deny", "not\x001"
    )  # a PostgreSQL text refuses NUL
    assert isinstance(last, RunFailed) and isinstance(last.error, LiveRunParked), last
    _, second = (event.request.approval_id for event in asked)
    assert [question.approval_id for question in await parking.pending("nul")] == [second]


async def test_a_call_the_session_approved_in_the_live_run_is_not_asked_again_when_the_run_resumes(
    queue: JobQueue, runtime: Runtime, dsn: str, tmp_path: Path, worker: Worker
) -> None:
    notes = tmp_path / "notes"
    parking = LiveParking(queue, runtime, park_after=0.3)
    # pay 1: approved for the session, so the same call again is not asked
    asked, last = await answer_first(parking, "again", json.dumps({"notes": str(notes)}), "iris", "approve_for_session")
    assert isinstance(last, RunFailed) and isinstance(last.error, LiveRunParked)
    # the second pay 1 was answered by the grant at once; only pay 2 waited, and parked
    assert [question.args["amount"] for question in last.error.questions] == [2]
    assert await parking.decide("iris", asked[-1].request.approval_id, "approve") is True
    record = await finished(queue, last.error.job_id)
    # resumed once: the grant holds on the worker too, so the second pay 1 parks nothing
    assert record.status == "succeeded" and record.attempts == 3, (record, worker.output())
    assert str(record.output) == "again: paid 1, paid 1, paid 2"
    assert [question.approval_id for question in await parking.pending("iris")] == []


async def parked_on(listed: Callable[[], Awaitable[list[PendingApproval]]]) -> list[PendingApproval]:
    """What `listed()` gives once it lists a question (a worker's run parked), polled."""
    async with asyncio.timeout(60):
        while True:
            found = await listed()
            if found:
                return found
            await asyncio.sleep(0.05)


async def test_a_parked_question_approved_for_the_session_carries_the_grant_to_the_resumed_run(
    queue: JobQueue, runtime: Runtime, dsn: str, tmp_path: Path, worker: Worker
) -> None:
    notes = tmp_path / "notes"
    parking = LiveParking(queue, runtime, park_after=0.2)
    async with parking.stream("again", json.dumps({"notes": str(notes)}), session="jo") as run:
        events = [event async for event in run]
    last = events[-1]
    assert isinstance(last, RunFailed) and isinstance(last.error, LiveRunParked), last
    [first] = last.error.questions  # pay 1, parked (nobody answered it live)
    assert first.args["amount"] == 1

    # the session's inbox lists it, parked, in this process and answerable from any
    [listed] = await runtime.questions("jo")
    assert (listed.approval_id, listed.held, listed.job_id) == (first.approval_id, "parked", last.error.job_id)
    assert (
        listed.request.tool == "pay" and listed.request.session_id == "jo" and "approve_for_session" in listed.choices
    )

    # approved for the session: the same call again (the second pay 1) is not asked on the worker; pay 2 is
    assert await parking.decide("jo", first.approval_id, "approve_for_session") is True
    [grants] = await query(
        dsn, "SELECT args->'grants' AS grants FROM procrastinate_jobs WHERE id = $1", last.error.job_id
    )
    assert len(json.loads(grants["grants"])) == 1
    waiting = await parked_on(lambda: parking.pending("jo"))
    assert [question.args["amount"] for question in waiting] == [2], worker.output()
    assert runtime.sessions["jo"].grants.granted  # this process's session holds it too, for its later runs here
    await runtime.answer("jo", waiting[0].approval_id, "approve")  # through the inbox: the parked one
    record = await finished(queue, last.error.job_id)
    assert record.status == "succeeded", (record, worker.output())
    assert str(record.output) == "again: paid 1, paid 1, paid 2"
    assert noted(notes, "paid").count("paid 2") == 1  # (the tools before a question run again as a run resumes)
    assert await runtime.questions("jo") == ()


async def test_a_job_run_in_no_session_cannot_be_approved_for_one(
    queue: JobQueue, tmp_path: Path, worker: Worker
) -> None:
    job_id = await queue.defer("payer", ask(tmp_path / "notes", 3))  # a plain job: no session
    waiting = await parked_on(lambda: queue.pending(job_id))
    with pytest.raises(DecisionRefused, match=f"job {job_id} runs in no session"):
        await queue.decide(job_id, waiting[0].approval_id, "approve_for_session")
    assert [question.approval_id for question in await queue.pending(job_id)] == [waiting[0].approval_id]

    async def parked() -> bool:  # its question is listed as it is asked; the job parks as its run ends
        return (await queue.get(job_id)).status == "awaiting_approval"

    await eventually(parked, f"job {job_id} is parked")
    assert await queue.decide(job_id, waiting[0].approval_id, "approve") is True
    assert (await finished(queue, job_id)).status == "succeeded"


async def test_a_later_turn_of_a_conversation_parks_and_resumes_from_the_conversation_so_far(
    queue: JobQueue, runtime: Runtime, dsn: str, tmp_path: Path, worker: Worker
) -> None:
    notes = tmp_path / "notes"
    parking = LiveParking(queue, runtime, park_after=0.3)
    async with parking.stream("clerk", json.dumps({"notes": str(notes), "amount": 1}), session="ivy") as run:
        async for event in run:
            if isinstance(event, ApprovalRequested):
                run.decide(event.request.approval_id, "approve")  # the first turn is answered at once
            last = event
    assert isinstance(last, RunFinished) and last.result.output == "turn 1: paid 1"
    async with parking.stream("clerk", json.dumps({"notes": str(notes), "amount": 2}), session="ivy") as run:
        events = [event async for event in run]  # the second one is not: it parks
    parked = events[-1]
    assert isinstance(parked, RunFailed) and isinstance(parked.error, LiveRunParked)
    [question] = parked.error.questions
    assert await parking.decide("ivy", question.approval_id, "approve") is True
    record = await finished(queue, parked.error.job_id)
    assert record.status == "succeeded" and record.output == "turn 2: paid 2", (record, worker.output())
    assert noted(notes, "paid") == ["paid 1", "paid 2"]
    assert noted(notes, "sent") == ["sent clerk 1.0", "sent clerk 1.1", "sent clerk 2.0", "sent clerk 2.1"]
    async with PostgresHistoryStore(dsn) as store:
        history = (await store.load("ivy")).messages
    said = [part.content for message in history for part in message.parts if isinstance(part, TextPart)]
    assert said == ["turn 1: paid 1", "turn 2: paid 2"]  # the second turn saved after the first


async def test_a_resumable_run_whose_page_closed_parks_and_a_page_that_comes_back_reads_where_it_went(
    queue: JobQueue, runtime: Runtime, tmp_path: Path
) -> None:
    parking = LiveParking(queue, runtime, park_after=0.3)
    async with parking.stream("payer", ask(tmp_path / "notes"), session="jack", resumable=True) as run:
        async for event in run:
            if isinstance(event, ApprovalRequested):
                break  # the page closes; the run goes on waiting
    events = [event async for event in run]  # the page comes back: the run from its start, to its end
    assert sum(isinstance(event, ApprovalRequested) for event in events) == 1
    last = events[-1]
    assert isinstance(last, RunFailed) and isinstance(last.error, LiveRunParked)
    assert runtime.live_run("jack") is None  # ended: its question waits as a job
    assert [question.approval_id for question in await parking.pending("jack")] == [
        question.approval_id for question in last.error.questions
    ]


async def test_a_question_answered_in_time_never_parks_and_leaves_no_job_or_journal(
    queue: JobQueue, runtime: Runtime, dsn: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    parking = LiveParking(queue, runtime, park_after=300)
    async with parking.stream("payer", ask(notes), session="dave") as run:
        async for event in run:
            if isinstance(event, ApprovalRequested):
                run.decide(event.request.approval_id, "approve")
            last = event
    assert isinstance(last, RunFinished) and last.result.output == "done: quote ok, step 1 ok, paid 10"
    assert noted(notes, "paid") == ["paid 10"]
    assert await query(dsn, "SELECT id FROM procrastinate_jobs") == []
    assert await query(dsn, "SELECT job_id FROM llm_do_journal") == []  # written as it ran, dropped at its end
    session = await runtime.session("dave")
    assert session.history[-1].parts == [TextPart("done: quote ok, step 1 ok, paid 10")]


async def test_a_live_run_is_a_job_held_by_this_process_from_its_first_request_which_workers_leave_alone(
    queue: JobQueue, runtime: Runtime, dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = tmp_path / "notes"
    monkeypatch.setenv("LLM_DO_WORKER_HEARTBEAT", "0.1")
    async with LiveParking(queue, runtime, park_after=300) as parking:
        async with parking.stream("payer", ask(notes, 4), session="erin") as run:
            async for event in run:
                if isinstance(event, ApprovalRequested):
                    [job] = await query(dsn, "SELECT id, status, attempts, worker_id, args FROM procrastinate_jobs")
                    assert (job["status"], job["attempts"]) == ("doing", 0)  # held by this process's worker row
                    assert json.loads(job["args"])["session"] == "erin"
                    [worker] = await query(dsn, "SELECT id FROM procrastinate_workers")
                    assert job["worker_id"] == worker["id"]
                    assert await parking.held("erin") == SessionJob(job["id"], "doing")
                    assert await parking.held("someone else") is None
                    # older than a worker's stalled timeout, but its heartbeats keep it: the recovery leaves it
                    await asyncio.sleep(1.5)
                    assert await recover_stalled_jobs(queue, 1.0) == []
                    run.decide(event.request.approval_id, "approve")
        assert run.ended and noted(notes, "paid") == ["paid 4"]
        assert await parking.held("erin") is None
        assert await query(dsn, "SELECT id FROM procrastinate_jobs") == []  # its job went with its end
        assert await query(dsn, "SELECT id FROM procrastinate_workers") != []
    assert await query(dsn, "SELECT id FROM procrastinate_workers") == []  # closed: unregistered


async def test_a_process_whose_worker_row_was_pruned_holds_its_runs_again_and_a_run_that_never_starts_leaves_no_job(
    queue: JobQueue, runtime: Runtime, dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = tmp_path / "notes"
    monkeypatch.setenv("LLM_DO_WORKER_HEARTBEAT", "0.1")
    async with LiveParking(queue, runtime, park_after=300) as parking:
        async with parking.stream("payer", ask(notes, 5), session="fay") as run:
            async for event in run:
                if isinstance(event, ApprovalRequested):
                    [first] = await query(dsn, "SELECT id FROM procrastinate_workers")
                    # pruned as stalled (procrastinate's workers do it): the job's worker_id becomes NULL, which
                    # the recovery would take at once; the next heartbeat registers again and holds the job
                    await query(dsn, "DELETE FROM procrastinate_workers WHERE id = $1", first["id"])

                    async def held_again() -> bool:
                        found = await query(dsn, "SELECT worker_id FROM procrastinate_jobs")
                        return found[0]["worker_id"] is not None

                    await eventually(held_again, "the job held by a new worker row")
                    assert await recover_stalled_jobs(queue, 1.0) == []
                    async with parking.stream("payer", ask(notes, 6), session="fay") as busy:
                        ended = [each async for each in busy]  # the session runs: a second run never starts
                    assert isinstance(ended[-1], RunFailed) and isinstance(ended[-1].error, SessionBusy)
                    assert len(await query(dsn, "SELECT id FROM procrastinate_jobs")) == 1  # its job went
                    run.decide(event.request.approval_id, "approve")
        assert noted(notes, "paid") == ["paid 5"]
        assert await query(dsn, "SELECT id FROM procrastinate_jobs") == []
        await query(dsn, "DELETE FROM procrastinate_workers")  # pruned between two runs: the next registers again
        async with parking.stream("payer", ask(notes, 7), session="gus") as later:
            async for event in later:
                if isinstance(event, ApprovalRequested):
                    later.decide(event.request.approval_id, "approve")
        assert noted(notes, "paid") == ["paid 5", "paid 7"]


async def test_told_to_stop_a_waiting_question_parks_at_once_and_a_run_that_cannot_park_is_denied(
    queue: JobQueue, runtime: Runtime, dsn: str, tmp_path: Path
) -> None:
    parking = LiveParking(queue, runtime, park_after=300)
    parked_notes, denied_notes = tmp_path / "parked", tmp_path / "denied"
    asked: list[str] = []
    both_asked = asyncio.Event()

    async def follow(run: Any) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        async for event in run:
            events.append(event)
            if isinstance(event, ApprovalRequested):
                asked.append(event.request.approval_id)
                if len(asked) == 2:
                    both_asked.set()
        return events

    async def parkable() -> list[StreamEvent]:
        async with parking.stream("payer", ask(parked_notes), session="erin") as run:
            return await follow(run)

    async def plain() -> list[StreamEvent]:  # a live run not streamed through the parking: it cannot park
        async with runtime.stream("payer", ask(denied_notes), session="frank") as run:
            return await follow(run)

    runs = asyncio.gather(parkable(), plain())
    await both_asked.wait()
    await asyncio.sleep(0.05)  # the questions' approvers have started: each waits for its answer
    assert parking.stop_asking() == 1  # SIGTERM: the one waiting here parks
    parked_events, denied_events = await runs
    last = parked_events[-1]
    assert isinstance(last, RunFailed) and isinstance(last.error, LiveRunParked)
    assert (await queue.get(last.error.job_id)).status == "awaiting_approval"
    [why] = [event.why for event in denied_events if isinstance(event, ApprovalDecided)]
    assert why == "no one can answer it now: the service is restarting; ask again in a moment"
    assert isinstance(denied_events[-1], RunFinished)  # the model read the denial and answered
    assert noted(parked_notes, "paid") == noted(denied_notes, "paid") == []
    # a question asked from now on is denied at once in a run that cannot park ...
    async with runtime.stream("payer", ask(tmp_path / "late"), session="gina") as run:
        late = [event async for event in run]
    assert isinstance(late[-1], RunFinished)
    assert [event.approved for event in late if isinstance(event, ApprovalDecided)] == [False]
    # ... and parks at once in one that can (a run still working when the process was told to stop)
    async with parking.stream("payer", ask(tmp_path / "later"), session="hana") as run:
        later = [event async for event in run]
    assert isinstance(later[-1], RunFailed) and isinstance(later[-1].error, LiveRunParked)
    assert later[-1].error.session_id == "hana" and noted(tmp_path / "later", "paid") == []
    parked_jobs = {record.id for record in await queue.list("awaiting_approval")}
    assert parked_jobs == {last.error.job_id, later[-1].error.job_id}


async def test_the_journal_of_a_live_run_whose_process_died_is_removed_after_the_retention(
    queue: JobQueue, dsn: str
) -> None:
    insert = (
        "INSERT INTO llm_do_journal (queue, job_id, call_path, position, key, response, attempt, written_at) "
        "VALUES ('live:live', $1, 'payer', 0, 'k', '{}', 1, now() - make_interval(secs => $2))"
    )
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(insert, 1001, 7200.0)  # a run whose process died two hours ago
        await conn.execute(insert, 1002, 0.0)  # a run going on now
    finally:
        await conn.close()
    assert await remove_old_journals(queue, 3600) == 1
    assert [row[0] for row in await query(dsn, "SELECT job_id FROM llm_do_journal")] == [1002]


async def test_an_answer_for_the_session_joins_the_live_runs_job_for_a_worker_that_takes_the_run_over(
    queue: JobQueue, runtime: Runtime, dsn: str, tmp_path: Path
) -> None:
    """double asks to pay 1 and 2 at once: pay 1 approved for the session is kept with the job, grant included, while
    the run is live (a worker that takes it over is not asked again about an identical call); the session's next run
    starts its job with the grant."""
    notes = tmp_path / "notes"

    async def job_args() -> dict[str, Any]:
        [job] = await query(dsn, "SELECT args FROM procrastinate_jobs")
        return dict(json.loads(job["args"]))

    async with LiveParking(queue, runtime, park_after=300) as parking:
        asked: list[ApprovalRequest] = []
        async with parking.stream("double", json.dumps({"notes": str(notes)}), session="hal") as run:
            async for event in run:
                if not isinstance(event, ApprovalRequested):
                    continue
                asked.append(event.request)
                if len(asked) < 2:
                    continue
                first, second = asked
                assert "grants" not in await job_args()
                run.decide(first.approval_id, "approve_for_session")

                async def granted() -> bool:
                    return "grants" in await job_args()

                await eventually(granted, "the grant kept with the live run's job")
                key = session_key(first.toolset, first.tool, first.args, first.attachments)
                assert (await job_args())["grants"] == [list(key)]
                kept = await query(dsn, "SELECT approval_id, choice FROM llm_do_approvals")
                assert [(row["approval_id"], row["choice"]) for row in kept] == [(first.approval_id, "approve")]
                run.decide(second.approval_id, "approve")
        assert run.ended and noted(notes, "paid") == ["paid 1", "paid 2"]

        started_with: list[Any] = []
        async with parking.stream("payer", ask(notes, 3), session="hal") as run:
            async for event in run:
                if isinstance(event, ApprovalRequested):
                    started_with.append((await job_args())["grants"])  # the session's so far, from its start
                    run.decide(event.request.approval_id, "approve")
        assert run.ended and len(noted(notes, "paid")) == 3
        assert started_with == [[list(key)]]


async def test_an_id_holding_a_nul_character_names_no_parked_question_nor_session(
    queue: JobQueue, runtime: Runtime
) -> None:
    """A PostgreSQL text refuses NUL: such an id (a malformed request's) is no question and no session there,
    refused as any unknown one is, never a database error."""
    parking = LiveParking(queue, runtime)
    with pytest.raises(DecisionRefused, match="no parked question of session"):
        await parking.decide("nul", "apr_\x00", "approve")
    assert await parking.answer("nul", "apr_\x00", "approve", None) is False
    assert await parking.answer("nul\x00", "apr_1", "deny", "no") is False
    assert await parking.pending("nul\x00") == [] and await parking.open_questions("nul\x00") == []
    assert await parking.held("nul\x00") is None
