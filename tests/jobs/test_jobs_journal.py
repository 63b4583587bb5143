"""The journal of a job's model responses: real `llm-do worker` processes killed mid-run, and the requests
counted by the models themselves (tests/journal_app.py), on the suite's PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.messages import AgentStreamEvent, ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from llm_do import AgentEntry, ConfigurationError, ModelLimits, Runtime, RuntimeConfig
from llm_do.jobs import JobQueue, JobRecord, WorkerOptions, remove_old_journals, run_worker
from llm_do.models import journal as journal_model

from ..jobs_support import Worker, eventually, finished
from ..journal_app import ODD, make_runtime, queue as app_queue, sent

TARGET = "tests.journal_app:queue"
ENTRIES = list(app_queue.entries.values())


@pytest.fixture
async def queue(dsn: str) -> AsyncIterator[JobQueue]:
    async with JobQueue(dsn, entries=ENTRIES) as opened:
        await opened.apply_schema()
        yield opened


def ask(notes: Path, hold: int = -1, **fields: Any) -> str:
    return json.dumps({"notes": str(notes), "hold": hold, **fields})


def held(notes: Path, who: str) -> bool:
    return notes.exists() and f"holding {who}" in notes.read_text().splitlines()


async def holding(notes: Path, who: str) -> None:
    async def seen() -> bool:
        return held(notes, who)

    await eventually(seen, f"{who} holds its request")


async def rows(queue: JobQueue, job_id: int) -> list[tuple[str, int]]:
    async with queue.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT call_path, position FROM llm_do_journal WHERE job_id = %s ORDER BY call_path, position", (job_id,)
        )
        return [(call, position) for call, position in await cursor.fetchall()]


async def run_in_process(queue: JobQueue, entry: str, input_data: str, runtime: Any = make_runtime) -> JobRecord:
    """Defer a job and run it with `run_worker` in this process until it is done."""
    stop = asyncio.Event()
    options = WorkerOptions(concurrency=2, heartbeat=0.2, stalled_timeout=1.5, poll_interval=0.2, name="in-process")
    task = asyncio.create_task(run_worker(queue, options, runtime=runtime, stop=stop, install_signal_handlers=False))
    try:
        return await finished(queue, await queue.defer(entry, input_data))
    finally:
        stop.set()
        await task


async def killed_and_rerun(
    queue: JobQueue, dsn: str, tmp_path: Path, entry: str, who: str, *, journaled: int, hold: int = 4, **fields: Any
) -> tuple[int, Path]:
    """Defer `entry` holding at request `hold` on its first attempt, SIGKILL the worker that holds it once the
    `journaled` responses it received before are written, and let a second worker run the job again; the job's
    id and its notes.

    A response is written beside the run, 2 ms after it arrives and a round trip later (docs/jobs.md): a worker
    killed before that loses it, and pays for it again. Killing after the writes have landed tests what the
    journal promises then, that only the request in flight is paid again; killing as soon as the run holds
    raced the last write (on a loaded machine it had not landed, and the replay went live where the journal
    ended instead of where a tool's result changed it)."""
    notes = tmp_path / f"{entry}.notes"
    job_id = await queue.defer(entry, ask(notes, hold=hold, **fields))
    first = Worker(TARGET, dsn, tmp_path / "first.log")
    try:
        await holding(notes, who)

        async def written() -> bool:
            return len(await rows(queue, job_id)) >= journaled

        await eventually(written, f"the {journaled} responses before the held request are journaled")
    finally:
        first.kill()
    second = Worker(TARGET, dsn, tmp_path / "second.log")
    try:
        record = await finished(queue, job_id)
    finally:
        assert second.stop() == 0, second.output()
    assert record.status == "succeeded" and record.attempts == 2, (record, second.output())
    return job_id, notes


async def uninterrupted(queue: JobQueue, dsn: str, tmp_path: Path, entry: str) -> JobRecord:
    notes = tmp_path / f"{entry}-whole.notes"
    worker = Worker(TARGET, dsn, tmp_path / "whole.log")
    try:
        record = await finished(queue, await queue.defer(entry, ask(notes)))
    finally:
        assert worker.stop() == 0, worker.output()
    assert record.status == "succeeded" and record.attempts == 1, record
    return record


@pytest.mark.long
async def test_a_job_killed_after_k_requests_sends_only_the_one_in_flight_again(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    job_id, notes = await killed_and_rerun(queue, dsn, tmp_path, "counter", "counter", journaled=4)
    record = await queue.get(job_id)
    whole = await uninterrupted(queue, dsn, tmp_path, "counter")
    assert sent(notes) == {
        ("counter", 0): 1,
        ("counter", 1): 1,
        ("counter", 2): 1,
        ("counter", 3): 1,
        ("counter", 4): 2,
    }
    assert record.journal == {
        "replayed": 4,
        "sent": 1,
        "live_from": [{"call": "counter", "position": 4, "reason": "ends"}],
    }
    assert record.output == whole.output == "done: step 0 ok, step 1 ok, step 2 ok, step 3 ok"
    assert record.usage == whole.usage
    assert whole.journal == {"replayed": 0, "sent": 5, "live_from": []}
    assert await rows(queue, job_id) == [("counter", n) for n in range(5)]


@pytest.mark.long
async def test_replay_stops_at_the_first_request_a_changed_tool_result_makes_different(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """drifter: step, step, drift (its result names the attempt), step, then text; killed at request 4."""
    job_id, notes = await killed_and_rerun(queue, dsn, tmp_path, "drifter", "drifter", journaled=4)
    record = await queue.get(job_id)
    assert sent(notes) == {
        ("drifter", 0): 1,
        ("drifter", 1): 1,
        ("drifter", 2): 1,
        ("drifter", 3): 2,
        ("drifter", 4): 2,
    }
    assert record.journal == {
        "replayed": 3,
        "sent": 2,
        "live_from": [{"call": "drifter", "position": 3, "reason": "differs"}],
    }
    assert record.output == "done: step 0 ok, step 1 ok, attempt 2, step 3 ok"


@pytest.mark.long
async def test_nested_and_parallel_calls_are_journaled_under_their_own_call_paths(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """boss asks two helpers at once (one response, two tool calls), each helper calls a tool; the boss is
    killed while it asks for its final answer, after the helpers' four requests. Helper `a` asks after `b`
    on the first attempt and before it on the second."""
    job_id, notes = await killed_and_rerun(queue, dsn, tmp_path, "boss", "boss", journaled=5, hold=1)
    record = await queue.get(job_id)
    assert sent(notes) == {
        ("boss", 0): 1,
        ("helper/a", 0): 1,
        ("helper/a", 1): 1,
        ("helper/b", 0): 1,
        ("helper/b", 1): 1,
        ("boss", 1): 2,
    }
    assert record.journal == {
        "replayed": 5,
        "sent": 1,
        "live_from": [{"call": "boss", "position": 1, "reason": "ends"}],
    }
    assert record.output == "boss: helper a: step a ok | helper b: step b ok"
    async with queue.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT response FROM llm_do_journal WHERE job_id = %s AND call_path = 'boss' AND position = 0", (job_id,)
        )
        found = await cursor.fetchone()
    assert found is not None
    ids = [part["tool_call_id"] for part in found[0]["response"]["parts"]]
    assert len(set(ids)) == 2
    assert await rows(queue, job_id) == sorted(
        [("boss", 0), ("boss", 1)] + [(f"boss/helper@{tool_call_id}", n) for tool_call_id in ids for n in (0, 1)]
    )


@pytest.mark.long
async def test_an_agent_made_in_the_run_is_journaled_and_replayed_like_any_call(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """maker makes a scribe and asks it; the worker is killed while the scribe waits for its second answer."""
    job_id, notes = await killed_and_rerun(queue, dsn, tmp_path, "maker", "scribe", journaled=3, hold=-1, scribe_hold=1)
    record = await queue.get(job_id)
    assert sent(notes) == {("maker", 0): 1, ("maker", 1): 1, ("scribe", 0): 1, ("scribe", 1): 2, ("maker", 2): 1}
    assert record.output == "maker: scribe: step s ok"
    assert record.journal is not None and (record.journal["replayed"], record.journal["sent"]) == (3, 2)
    assert [call["entry"] for call in record.calls] == ["maker", "scribe"]


@pytest.mark.long
async def test_an_agent_kept_for_the_session_is_made_again_and_replayed_when_a_killed_job_runs_again(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """As above, the scribe made with keep="session": a job's run is a session of its own, so the run that runs
    again makes it again from the journaled agent_create, and calls it there."""
    job_id, notes = await killed_and_rerun(
        queue, dsn, tmp_path, "maker", "scribe", journaled=3, hold=-1, scribe_hold=1, keep="session"
    )
    record = await queue.get(job_id)
    assert sent(notes) == {("maker", 0): 1, ("maker", 1): 1, ("scribe", 0): 1, ("scribe", 1): 2, ("maker", 2): 1}
    assert record.output == "maker: scribe: step s ok"
    assert record.journal is not None and (record.journal["replayed"], record.journal["sent"]) == (3, 2)
    assert [call["entry"] for call in record.calls] == ["maker", "scribe"]


async def test_a_journaled_runs_requests_are_held_to_the_runtimes_limits(queue: JobQueue, tmp_path: Path) -> None:
    """The journal's model wraps the entry's model for the job's run, inside the guard that carries the limits."""
    asked: list[object] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked.append((info.model_settings or {}).get("max_tokens"))
        return ModelResponse(parts=[TextPart("done")])

    def runtime(**options: Any) -> Runtime:
        counter = AgentEntry(Agent(FunctionModel(respond)), name="counter")
        config = RuntimeConfig(limits=ModelLimits(max_tokens=77))
        return Runtime(None, entries=[counter], config=config, **options)

    record = await run_in_process(queue, "counter", ask(tmp_path / "notes"), runtime=runtime)
    assert record.status == "succeeded" and record.journal is not None and record.journal["sent"] == 1
    assert asked == [77]


@pytest.mark.long
async def test_an_entry_that_opts_out_sends_every_request_again_and_keeps_no_journal(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    job_id, notes = await killed_and_rerun(
        queue, dsn, tmp_path, "plain", "plain", journaled=0
    )  # JobEntry("plain", journal=False)
    record = await queue.get(job_id)
    assert sent(notes) == {("plain", n): 2 for n in range(5)}
    assert record.journal is None
    assert await rows(queue, job_id) == []


@pytest.mark.long
async def test_a_finished_jobs_journal_is_removed_after_the_retention(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", env={"LLM_DO_JOBS_JOURNAL_RETENTION": "3"})
    try:
        running = await queue.defer("counter", ask(tmp_path / "held", hold=2))
        await holding(tmp_path / "held", "counter")
        done = await queue.defer("counter", ask(notes))
        record = await finished(queue, done)
        assert record.journal == {"replayed": 0, "sent": 5, "live_from": []}
        assert len(await rows(queue, done)) == 5  # kept for 3 s after the job's end
        assert await remove_old_journals(queue, 3600) == 0

        async def removed() -> bool:
            return await rows(queue, done) == []

        await eventually(removed, "the finished job's journal removed by the worker", within=20)
        assert await rows(queue, running) == [("counter", 0), ("counter", 1)]  # the running job's stays
    finally:
        worker.kill()


async def test_a_retried_job_replays_its_streamed_requests_and_the_trace_says_where_it_went_live(
    queue: JobQueue, tmp_path: Path
) -> None:
    """fragile: step, drift, step, fragile (fails on the first attempt: the job is retried), then text. The
    worker's runtime streams (an event handler), so every request goes through `request_stream`."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    events: list[AgentStreamEvent] = []

    async def handler(ctx: Any, stream: Any) -> None:
        async for event in stream:
            events.append(event)

    def streaming() -> Runtime:
        return make_runtime(event_stream_handler=handler, tracer_provider=provider)

    notes = tmp_path / "notes"
    record = await run_in_process(queue, "fragile", ask(notes), streaming)
    assert record.status == "succeeded" and record.attempts == 2, record
    assert sent(notes) == {
        ("fragile", 0): 1,
        ("fragile", 1): 1,
        ("fragile", 2): 2,
        ("fragile", 3): 2,
        ("fragile", 4): 1,
    }
    assert record.journal == {
        "replayed": 2,
        "sent": 3,
        "live_from": [{"call": "fragile", "position": 2, "reason": "differs"}],
    }
    assert record.output == "done: step 0 ok, attempt 2, step 2 ok, held this time"
    assert events, "the runs streamed"
    live = [
        dict(event.attributes or {})
        for span in exporter.get_finished_spans()
        for event in span.events
        if event.name == "llm_do.journal.live"
    ]
    assert live == [
        {"llm_do.journal.call": "fragile", "llm_do.journal.position": 2, "llm_do.journal.reason": "differs"}
    ]
    replayed = [
        span.attributes.get("llm_do.journal.replayed")
        for span in exporter.get_finished_spans()
        if span.attributes and "llm_do.journal.replayed" in span.attributes
    ]
    assert replayed == [2]


async def test_a_request_whose_model_settings_changed_is_sent_again(queue: JobQueue, tmp_path: Path) -> None:
    """tuned: its temperature follows the attempt; step, then fragile (fails on the first attempt), then text."""
    notes = tmp_path / "notes"
    record = await run_in_process(queue, "tuned", ask(notes))
    assert record.status == "succeeded" and record.attempts == 2, record
    assert sent(notes) == {("tuned", 0): 2, ("tuned", 1): 2, ("tuned", 2): 1}
    assert record.journal == {
        "replayed": 0,
        "sent": 3,
        "live_from": [{"call": "tuned", "position": 0, "reason": "differs"}],
    }
    assert await rows(queue, record.id) == [("tuned", n) for n in range(3)]


async def test_apply_schema_adds_the_journal_to_a_database_made_before_it(queue: JobQueue) -> None:
    job_id = await queue.defer("counter", "{}")
    async with queue.pool.connection() as conn:  # as an llm-do without the journal left it
        await conn.execute("DROP TABLE llm_do_journal")
        await conn.execute("ALTER TABLE llm_do_job_results DROP COLUMN journal")
    with pytest.raises(ConfigurationError, match=r"older than this llm-do's .*await queue\.apply_schema\(\)"):
        await queue.get(job_id)
    await queue.apply_schema()
    await queue.apply_schema()  # idempotent
    assert (await queue.get(job_id)).journal is None
    assert await rows(queue, job_id) == []


async def run_while_the_journal_is_locked(
    queue: JobQueue, dsn: str, inputs: list[str], notes: list[Path]
) -> list[JobRecord]:
    """Run a `counter` job per input in this process while another session locks the journal (its writes wait),
    until every job sent its five requests; then release the lock and wait for the jobs."""
    stop = asyncio.Event()
    options = WorkerOptions(
        concurrency=len(inputs), heartbeat=0.2, stalled_timeout=30, poll_interval=0.2, name="in-process"
    )
    locker = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    worker: asyncio.Task[None] | None = None
    try:
        await locker.execute("BEGIN")
        await locker.execute("LOCK TABLE llm_do_journal IN EXCLUSIVE MODE")
        worker = asyncio.create_task(
            run_worker(queue, options, runtime=make_runtime, stop=stop, install_signal_handlers=False)
        )
        jobs = [await queue.defer("counter", text) for text in inputs]

        async def all_sent() -> bool:
            return all(sum(sent(path).values()) == 5 for path in notes)

        await eventually(all_sent, "every job sent its five requests while the journal was locked")
        await locker.execute("COMMIT")
        return [await finished(queue, job_id) for job_id in jobs]
    finally:
        await locker.close()  # first: if a check failed, the worker's jobs still wait for the lock
        stop.set()
        if worker is not None:
            await worker


async def test_responses_kept_while_a_write_is_under_way_are_written_together(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """Three jobs of five requests each run while another session locks the journal: the first write waits on the
    lock, and the worker holds what is handed over meanwhile. Once it is released, each job's rows have gone in at
    most two writes (the one that waited, and one with the rest), and the jobs' first rows in at most two writes
    between them, so some were written together (rows written together share a transaction, PostgreSQL's `xmin`)."""
    notes = [tmp_path / f"job{number}.notes" for number in range(3)]
    records = await run_while_the_journal_is_locked(queue, dsn, [ask(path) for path in notes], notes)
    jobs = [record.id for record in records]
    assert [record.journal for record in records] == [{"replayed": 0, "sent": 5, "live_from": []}] * 3
    async with queue.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT job_id, position, xmin::text FROM llm_do_journal WHERE job_id = ANY(%s)", (jobs,)
        )
        written = {(job_id, position): xmin for job_id, position, xmin in await cursor.fetchall()}
    assert sorted(written) == sorted((job_id, position) for job_id in jobs for position in range(5))
    for job_id in jobs:
        assert len({written[job_id, position] for position in range(5)}) <= 2, written
    assert len({written[job_id, 0] for job_id in jobs}) <= 2, written


async def test_responses_holding_a_nul_character_or_a_lone_surrogate_are_journaled_as_they_are(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """PostgreSQL's jsonb refuses a NUL character, and UTF-8 a lone surrogate; the journal keeps JSON as text with
    both escaped, so nothing is lost."""
    notes = tmp_path / "notes"
    [record] = await run_while_the_journal_is_locked(queue, dsn, [ask(notes, nul=2, surrogate=3)], [notes])
    assert record.status == "succeeded", record
    assert record.journal == {"replayed": 0, "sent": 5, "live_from": []}
    async with queue.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT position, response FROM llm_do_journal WHERE job_id = %s AND position IN (2, 3) ORDER BY position",
            (record.id,),
        )
        [(_, nul), (_, surrogate)] = await cursor.fetchall()
    assert "a NUL: \x00" in [part.get("content") for part in nul["response"]["parts"]]
    assert "a lone surrogate: \udcff" in [part.get("content") for part in surrogate["response"]["parts"]]


async def test_a_response_postgresql_refuses_costs_only_itself_when_written_with_others(
    queue: JobQueue, dsn: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The journal is locked while the job runs, so responses 1 to 4 wait to be written together; response 2
    breaks a CHECK constraint an operator added. The others are kept; the job goes on and says what was lost."""
    notes = tmp_path / "notes"
    async with queue.pool.connection() as conn:
        await conn.execute(
            f"ALTER TABLE llm_do_journal ADD CONSTRAINT refuses CHECK (response::text NOT LIKE '%{ODD}%')"
        )
    try:
        [record] = await run_while_the_journal_is_locked(queue, dsn, [ask(notes, odd=2)], [notes])
    finally:
        async with queue.pool.connection() as conn:
            await conn.execute("ALTER TABLE llm_do_journal DROP CONSTRAINT refuses")
    assert record.status == "succeeded", record
    assert record.journal == {"replayed": 0, "sent": 5, "live_from": [], "unsaved": 1}
    assert await rows(queue, record.id) == [("counter", n) for n in (0, 1, 3, 4)]
    assert "journal: the response to request 2 of call counter was not kept" in caplog.text


@pytest.fixture
def writes_held_to_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """A response's write waits a minute instead of 2 ms: none starts beside a run, so every response a run receives
    is still unwritten when it ends."""
    monkeypatch.setattr(journal_model, "WRITE_DELAY", 60.0)


async def result_and_rows(queue: JobQueue, job_id: int) -> tuple[str, dict[tuple[str, int], tuple[str, int]]]:
    """The transaction (`xmin`) that wrote the job's result, and each journal row's (transaction, attempt)."""
    async with queue.pool.connection() as conn:
        cursor = await conn.execute("SELECT xmin::text FROM llm_do_job_results WHERE job_id = %s", (job_id,))
        [(result,)] = await cursor.fetchall()
        cursor = await conn.execute(
            "SELECT call_path, position, xmin::text, attempt FROM llm_do_journal WHERE job_id = %s", (job_id,)
        )
        return result, {(call, position): (xmin, attempt) for call, position, xmin, attempt in await cursor.fetchall()}


@pytest.mark.usefixtures("writes_held_to_the_end")
async def test_the_responses_unwritten_when_a_run_ends_are_written_with_the_jobs_result(
    queue: JobQueue, tmp_path: Path
) -> None:
    """The responses that call tools are written as they arrive (the model takes 50 ms a request); the last one,
    which calls none and arrives just before the run ends, goes into the statement that stores the job's result: one
    transaction, and no round trip of its own between the run's end and the result."""
    record = await run_in_process(queue, "counter", ask(tmp_path / "notes", latency=0.05))
    assert record.status == "succeeded" and record.journal == {"replayed": 0, "sent": 5, "live_from": []}
    result, written = await result_and_rows(queue, record.id)
    assert sorted(written) == [("counter", position) for position in range(5)]
    assert written[("counter", 4)] == (result, 1)
    assert all(written[("counter", position)][0] != result for position in range(4))  # written as they came


@pytest.mark.usefixtures("writes_held_to_the_end")
async def test_a_journal_that_went_live_is_replaced_and_its_last_response_written_with_the_result(
    queue: JobQueue, tmp_path: Path
) -> None:
    """tuned (its temperature follows the attempt) fails on its first attempt; the second attempt's first request
    differs, so its responses replace the journal from there, the last one with the job's result."""
    record = await run_in_process(queue, "tuned", ask(tmp_path / "notes", latency=0.05))
    assert record.status == "succeeded" and record.attempts == 2, record
    assert record.journal == {
        "replayed": 0,
        "sent": 3,
        "live_from": [{"call": "tuned", "position": 0, "reason": "differs"}],
    }
    result, written = await result_and_rows(queue, record.id)
    assert sorted(written) == [("tuned", position) for position in range(3)]
    assert written[("tuned", 2)] == (result, 2)
    assert [written[("tuned", position)][1] for position in range(2)] == [2, 2]


@pytest.mark.usefixtures("writes_held_to_the_end")
async def test_a_last_response_postgresql_refuses_costs_only_itself_and_the_result_is_stored(
    queue: JobQueue, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The final response breaks a CHECK constraint an operator added, so the statement that writes the run's
    unwritten responses with its result is refused: the responses are written as the journal writes them (each
    alone when a batch is refused), then the result, which says what was lost."""
    async with queue.pool.connection() as conn:
        await conn.execute(
            "ALTER TABLE llm_do_journal ADD CONSTRAINT refuses CHECK (response::text NOT LIKE '%done: %')"
        )
    try:
        record = await run_in_process(queue, "counter", ask(tmp_path / "notes"))
    finally:
        async with queue.pool.connection() as conn:
            await conn.execute("ALTER TABLE llm_do_journal DROP CONSTRAINT refuses")
    assert record.status == "succeeded", record
    assert record.output == "done: step 0 ok, step 1 ok, step 2 ok, step 3 ok"
    assert record.journal == {"replayed": 0, "sent": 5, "live_from": [], "unsaved": 1}
    assert await rows(queue, record.id) == [("counter", n) for n in range(4)]
    assert "journal: the response to request 4 of call counter was not kept" in caplog.text


@pytest.mark.usefixtures("writes_held_to_the_end")
async def test_a_response_that_calls_tools_is_written_at_once(queue: JobQueue, tmp_path: Path) -> None:
    """The run goes on to the tools a response calls, then asks again: the response is written meanwhile, not
    `WRITE_DELAY` later, so a worker that dies while the next request is out has lost nothing but that request."""
    notes = tmp_path / "notes"
    stop = asyncio.Event()
    options = WorkerOptions(
        concurrency=1, heartbeat=0.2, stalled_timeout=30, poll_interval=0.2, shutdown_timeout=1, name="in-process"
    )
    worker = asyncio.create_task(
        run_worker(queue, options, runtime=make_runtime, stop=stop, install_signal_handlers=False)
    )
    try:
        job_id = await queue.defer("counter", ask(notes, hold=2))
        await holding(notes, "counter")

        async def written() -> bool:
            return await rows(queue, job_id) == [("counter", 0), ("counter", 1)]

        await eventually(written, "the two responses before the held request are written while it is out", within=10)
        assert await queue.cancel(job_id)
        assert (await finished(queue, job_id)).status == "aborted"
    finally:
        stop.set()
        await worker
