"""Agent runs as jobs: deferred here, run by real `llm-do worker` processes on the suite's PostgreSQL,
results read back from the database; cancellation, failures, retries, SIGKILL and a server restart."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import re
import signal
import subprocess
import sys
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from pydantic import SecretStr

from llm_do import Attachment, AttachmentError, ConfigurationError, InvalidSettings, LlmDoError
from llm_do.jobs import (
    InvalidJobRequest,
    JobNotFound,
    JobQueue,
    JobRecord,
    JobSettings,
    WorkerOptions,
    current_job,
    recover_stalled_jobs,
    run_worker,
)

from ..attachment_files import CSV, png
from ..jobs_app import make_runtime, queue as app_queue
from ..jobs_support import Worker, eventually, fresh_database, wait_for_workers
from ..mcp_support import alive, stubborn_pids, stubborn_project, wait_for
from ..postgres import temporary_postgres

TARGET = "tests.jobs_app:queue"
OTHER_TARGET = "tests.jobs_app:other_queue"
ENTRIES = list(app_queue.entries.values())


@pytest.fixture
async def queue(dsn: str) -> AsyncIterator[JobQueue]:
    """The test app's queue, opened on a fresh database with its schema (this process only defers)."""
    async with JobQueue(dsn, entries=ENTRIES) as opened:
        await opened.apply_schema()
        yield opened


@asynccontextmanager
async def in_process_worker(queue: JobQueue) -> AsyncIterator[None]:
    """The Python API: `run_worker` in this process, stopped (gracefully) when the block ends."""
    stop = asyncio.Event()
    options = WorkerOptions(concurrency=2, heartbeat=0.2, stalled_timeout=1.5, poll_interval=0.2, name="in-process")
    task = asyncio.create_task(
        run_worker(queue, options, runtime=make_runtime, stop=stop, install_signal_handlers=False)
    )
    try:
        yield
    finally:
        stop.set()
        await task


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def started_by(path: Path, job_id: int) -> int:
    """The pid of the worker that noted `started <job_id> <pid>` (waits for the line)."""
    pattern = re.compile(rf"started {job_id} (\d+)")

    async def seen() -> bool:
        return any(pattern.fullmatch(line) for line in lines(path))

    await eventually(seen, f"job {job_id} started")
    return next(int(match.group(1)) for line in lines(path) if (match := pattern.fullmatch(line)))


async def finished(queue: JobQueue, job_id: int, within: float = 30.0) -> JobRecord:
    async with asyncio.timeout(within):
        return await queue.wait(job_id, interval=0.05)


async def test_a_deferred_run_is_run_by_a_worker_and_its_result_is_stored(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    first = await queue.defer("orchestrate", "hi")
    assert (await queue.get(first)).status == "todo"
    assert [job.id for job in await queue.list("todo")] == [first]
    worker = Worker(TARGET, dsn, tmp_path / "worker.log")
    try:
        record = await finished(queue, first)
        second = await queue.defer("greeter", "hello")
        greeted = await finished(queue, second)
    finally:
        assert worker.stop() == 0, worker.output()
    assert record.status == "succeeded" and record.outcome == "ok", record
    assert record.output == "greeter said: hello from the job"
    assert record.input == "hi" and record.entry == "orchestrate" and record.error is None
    assert record.worker is not None and record.worker.endswith(f":{worker.pid}")
    assert [(call["id"], call["parent"], call["entry"]) for call in record.calls] == [
        ("call_1", None, "orchestrate"),
        ("call_2", "call_1", "greeter"),
    ]
    assert record.usage["requests"] == 2
    assert record.started_at is not None and record.finished_at is not None
    assert record.finished_at >= record.started_at
    assert greeted.output == "hello from the job" and greeted.usage["requests"] == 2
    assert {job.id for job in await queue.list("succeeded")} == {first, second}
    assert [job.id for job in await queue.list(entry="greeter")] == [second]
    assert await queue.list("todo") == []


async def test_a_job_deferred_inside_a_span_is_run_in_that_trace(queue: JobQueue) -> None:
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("web request") as span:
        job_id = await queue.defer("traced", None)
    untraced_id = await queue.defer("traced", None)
    trace_id = format(span.get_span_context().trace_id, "032x")
    async with in_process_worker(queue):
        record = await finished(queue, job_id)
        untraced = await finished(queue, untraced_id)
    assert record.traceparent is not None and record.traceparent.split("-")[1] == trace_id
    assert record.output == {"trace_id": trace_id, "job": record.traceparent}
    assert untraced.traceparent is None and untraced.output["trace_id"] != trace_id


async def test_a_jobs_output_comes_back_decoded_from_json(queue: JobQueue) -> None:
    async with in_process_worker(queue):
        record = await finished(queue, await queue.defer("receipt", "B"))
    assert record.output == {"amount": 10, "to": "B", "at": "2026-01-02T03:04:05Z"}  # the model's JSON form, decoded


async def test_output_and_errors_holding_a_nul_character_are_stored(queue: JobQueue) -> None:
    """PostgreSQL's jsonb refuses a NUL character and its text columns refuse it too; the result is kept anyway."""
    async with in_process_worker(queue):
        said = await finished(queue, await queue.defer("nul", {"text": "a\\0b"}))
        raised = await finished(queue, await queue.defer("nul", {"text": "c\\0d", "raise": True}))
    assert said.status == "succeeded" and said.output == {"said": "a\x00b"}  # exactly
    assert raised.status == "failed" and raised.error == "ValueError: c\\x00d"  # readable, not lost


async def test_a_jobs_attachments_are_stored_in_it_and_handed_to_its_run(
    queue: JobQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    chart = Attachment.from_bytes("data/chart.png", png())
    table = Attachment.from_bytes("data/sales.csv", CSV.encode())
    job_id = await queue.defer("inspect", "look", attachments=[chart, table])
    async with queue.pool.connection() as conn:  # the job itself holds the bytes: any worker can run it
        row = await (await conn.execute("SELECT args FROM procrastinate_jobs WHERE id = %s", (job_id,))).fetchone()
    assert row is not None
    assert [base64.b64decode(item["data"]) for item in row[0]["attachments"]] == [png(), CSV.encode()]
    async with in_process_worker(queue):
        record = await finished(queue, job_id)
    assert record.status == "succeeded", record
    assert record.output == [
        {**chart.info.to_json(), "hex": png().hex()},
        {**table.info.to_json(), "hex": CSV.encode().hex()},
    ]
    assert list(record.attachments) == [chart.info.to_json(), table.info.to_json()]  # no bytes in the record
    assert record.calls[0]["attachments"] == [chart.info.to_json(), table.info.to_json()]
    monkeypatch.setenv("LLM_DO_ATTACHMENTS__MAX_CALL_BYTES", str(chart.size + table.size - 1))
    with pytest.raises(AttachmentError, match=r"more than the .*-byte limit .*MAX_CALL_BYTES"):
        await queue.defer("inspect", "look", attachments=[chart, table])
    for odd in (["data/chart.png"], chart, "data/chart.png"):  # a name, not a list, a string: what to pass instead
        with pytest.raises(
            InvalidJobRequest, match=r"attachments must be a list of llm_do.Attachment.*Attachment.read"
        ):
            await queue.defer("inspect", "look", attachments=odd)  # type: ignore[arg-type]


async def test_a_jobs_attachment_bytes_never_reach_the_workers_log(
    queue: JobQueue, caplog: pytest.LogCaptureFixture
) -> None:
    """procrastinate logs each job's arguments as it starts and ends it: the files are named there, not dumped."""
    notes = Attachment.from_bytes("notes.txt", b"the launch code is 0000\n")
    caplog.set_level(logging.DEBUG, logger="procrastinate")
    job_id = await queue.defer("inspect", "look", attachments=[notes])
    async with in_process_worker(queue):
        assert (await finished(queue, job_id)).status == "succeeded"
    logged = [record for record in caplog.records if record.name.startswith("procrastinate")]
    started = [record.getMessage() for record in logged if record.getMessage().startswith("Starting job")]
    assert len(started) == 1 and "'notes.txt'" in started[0] and notes.sha256 in started[0]
    encoded = base64.b64encode(notes.data).decode()
    assert [record.getMessage() for record in logged if encoded in record.getMessage() + repr(vars(record))] == []


async def test_a_call_that_needs_approval_follows_the_workers_approval_mode(
    queue: JobQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LLM_DO_APPROVAL_MODE", raising=False)
    async with in_process_worker(queue):  # the default mode, prompt, and nobody to ask
        refused = await finished(queue, await queue.defer("guarded", "open it"))
    monkeypatch.setenv("LLM_DO_APPROVAL_MODE", "reject_all")
    async with in_process_worker(queue):
        denied = await finished(queue, await queue.defer("guarded", "open it"))
    assert refused.status == "failed" and refused.error is not None
    assert "called tool 'open_vault' of toolset 'vault', which needs approval" in refused.error
    assert "LLM_DO_APPROVAL_MODE" in refused.error
    assert denied.status == "succeeded" and denied.output.startswith("vault said: ")
    assert "the vault is open" not in denied.output


async def test_a_run_that_raises_marks_its_job_failed_with_its_error_and_it_is_not_retried(queue: JobQueue) -> None:
    async with in_process_worker(queue):
        failed_id = await queue.defer("boom", {"n": 1})
        failed = await finished(queue, failed_id)
        retried_id = await queue.defer("flaky", "x")  # JobEntry("flaky", retry=1)
        retried = await finished(queue, retried_id)
    assert failed.status == "failed" and failed.outcome == "error"
    assert failed.error == "ValueError: boom on {'n': 1}"
    assert failed.attempts == 1 and failed.output is None  # ran once, not retried
    assert [call["outcome"] for call in failed.calls] == ["error"]
    assert retried.status == "succeeded" and retried.attempts == 2
    assert retried.output == {"attempt": 2, "input": "x"}  # the run's attempt is the record's count
    assert [job.id for job in await queue.list(["failed", "aborted"])] == [failed_id]


async def test_cancelling_a_queued_job_and_a_running_job(queue: JobQueue, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    queued = await queue.defer("sleeper", {"path": str(notes), "seconds": 60}, delay=3600)
    assert await queue.cancel(queued) is True
    assert (await queue.get(queued)).status == "cancelled"

    async with in_process_worker(queue):
        running = await queue.defer("sleeper", {"path": str(notes), "seconds": 60})
        pid = await started_by(notes, running)
        assert pid == os.getpid()
        assert await queue.cancel(running) is True
        record = await finished(queue, running, within=15)
        after = await finished(queue, await queue.defer("greeter", "still there?"))  # the worker goes on
    assert record.status == "aborted" and record.outcome == "cancelled"
    assert record.error == "cancelled (cancel requested)"
    assert f"teardown {running} {pid}" in lines(notes), "the run's teardown ran in the worker"
    assert not any(line.startswith(f"finished {running}") for line in lines(notes))
    assert after.status == "succeeded"
    assert await queue.cancel(running) is False  # already over
    with pytest.raises(JobNotFound, match="no llm-do job with id 999999") as missing:
        await queue.get(999_999)
    assert isinstance(missing.value, LlmDoError) and isinstance(missing.value, LookupError)
    with pytest.raises(JobNotFound):
        await queue.cancel(999_999)


@pytest.mark.long
async def test_two_queues_in_one_database_never_see_or_touch_each_others_jobs(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """Both queues declare the same entries, so their jobs share procrastinate's task names."""
    notes = tmp_path / "notes.txt"
    async with JobQueue(dsn, entries=ENTRIES, queue="llm_do_other") as other:
        mine = await queue.defer("greeter", "mine")
        theirs = await other.defer("greeter", "theirs")
        theirs_later = await other.defer("sleeper", {"path": str(notes), "seconds": 0}, delay=3600)
        assert [job.id for job in await queue.list("todo", entry="greeter")] == [mine]
        assert [job.id for job in await queue.list()] == [mine]
        assert [job.id for job in await other.list()] == [theirs_later, theirs]
        for job_id in (theirs, theirs_later):
            with pytest.raises(JobNotFound):
                await queue.get(job_id)
            with pytest.raises(JobNotFound):
                await queue.cancel(job_id)
            with pytest.raises(JobNotFound):
                await queue.wait(job_id)
        with pytest.raises(JobNotFound):
            await other.get(mine)
        assert (await other.get(theirs_later)).status == "todo", "the other queue's job was not cancelled"

        worker = Worker(OTHER_TARGET, dsn, tmp_path / "other.log")  # a real worker of the other queue
        try:
            assert (await finished(other, theirs)).output == "hello from the job"
            running = await other.defer("sleeper", {"path": str(notes), "seconds": 60})
            doomed = await other.defer("sleeper", {"path": str(notes), "seconds": 60})
            await started_by(notes, running)
            await started_by(notes, doomed)
        finally:
            worker.kill()  # its jobs stay `doing`, its heartbeat stops
        assert (await queue.get(mine)).status == "todo", "the other queue's worker ran this queue's job"
        with pytest.raises(JobNotFound):
            await queue.cancel(doomed)
        assert await other.cancel(doomed) is True  # nobody is left to cancel its run
        assert (await other.get(doomed)).cancel_requested is True
        assert await recover_stalled_jobs(queue, stalled_timeout=0.001) == []
        assert sorted(await recover_stalled_jobs(other, stalled_timeout=0.001)) == [running, doomed]
        recovered = await other.get(doomed)
        assert recovered.status == "aborted" and not recovered.cancel_requested, recovered

        async with in_process_worker(queue):  # a worker of this queue runs its job, and only its own
            done = await finished(queue, mine)
        assert done.output == "hello from the job" and done.input == "mine"
        assert [job.id for job in await queue.list("succeeded")] == [mine]
        assert {job.id: job.status for job in await other.list()} == {
            doomed: "aborted",
            running: "todo",
            theirs_later: "todo",
            theirs: "succeeded",
        }


@pytest.mark.long
async def test_a_sigkilled_workers_job_is_run_again_by_another_worker(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    workers = [Worker(TARGET, dsn, tmp_path / f"worker{n}.log", concurrency=2) for n in range(2)]
    try:
        await wait_for_workers(dsn, 2, workers)
        job_id = await queue.defer("sleeper", {"path": str(notes), "seconds": 1})
        victim_pid = await started_by(notes, job_id)
        victim = next(worker for worker in workers if worker.pid == victim_pid)
        survivor = next(worker for worker in workers if worker is not victim)
        victim.kill()
        record = await finished(queue, job_id, within=30)
    finally:
        for worker in workers:
            if worker.process.poll() is None:
                assert worker.stop() == 0, worker.output()
    assert record.status == "succeeded", record
    assert record.attempts == 2 and record.worker is not None and record.worker.endswith(f":{survivor.pid}")
    assert lines(notes) == [
        f"started {job_id} {victim_pid}",
        f"started {job_id} {survivor.pid}",
        f"finished {job_id} attempt 2",
        f"teardown {job_id} {survivor.pid}",
    ]


async def test_a_dead_workers_job_whose_queueing_lock_another_job_took_waits_and_holds_up_no_other(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    """procrastinate queues one job per queueing lock, and a running job does not hold it: once its worker died,
    the job cannot be queued again while another took the lock. It waits for the lock; the others go on."""
    notes = tmp_path / "notes.txt"
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", concurrency=2)
    try:
        locked = await queue.defer("sleeper", {"path": str(notes), "seconds": 60}, queueing_lock="account-7")
        free = await queue.defer("sleeper", {"path": str(notes), "seconds": 60})
        await started_by(notes, locked)
        await started_by(notes, free)
    finally:
        worker.kill()
    taker = await queue.defer("sleeper", {"path": str(notes), "seconds": 0}, queueing_lock="account-7", delay=3600)
    assert await recover_stalled_jobs(queue, stalled_timeout=0.001) == [free]
    assert (await queue.get(locked)).status == "doing"
    assert await queue.cancel(taker) is True
    assert await recover_stalled_jobs(queue, stalled_timeout=0.001) == [locked]
    assert [(await queue.get(job_id)).status for job_id in (locked, free)] == ["todo", "todo"]


async def test_a_job_still_running_when_its_worker_shuts_down_is_queued_again(
    queue: JobQueue, dsn: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    worker = Worker(TARGET, dsn, tmp_path / "worker.log", env={"LLM_DO_WORKER_SHUTDOWN_TIMEOUT": "0.5"})
    job_id = await queue.defer("sleeper", {"path": str(notes), "seconds": 60, "then": 0})
    pid = await started_by(notes, job_id)
    assert worker.stop() == 0, worker.output()  # SIGTERM: the job gets 0.5 s, then its run is cancelled
    stopped = await queue.get(job_id)
    assert stopped.status == "todo" and stopped.outcome == "cancelled", stopped
    assert stopped.error == "cancelled (worker shutdown)"
    assert f"teardown {job_id} {pid}" in lines(notes)
    async with in_process_worker(queue):
        record = await finished(queue, job_id)
    assert record.status == "succeeded" and record.attempts == 2 and record.outcome == "ok"


@pytest.mark.long
async def test_workers_reconnect_after_a_postgresql_restart(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    with temporary_postgres() as server:
        async with fresh_database(server) as dsn, JobQueue(dsn, entries=ENTRIES) as queue:
            await queue.apply_schema()
            worker = Worker(TARGET, dsn, tmp_path / "worker.log")
            try:
                await wait_for_workers(dsn, 1, [worker])
                before = await finished(queue, await queue.defer("greeter", "before"))
                across = await queue.defer("sleeper", {"path": str(notes), "seconds": 2})
                await started_by(notes, across)
                await asyncio.to_thread(server.stop)
                await asyncio.sleep(3.0)  # longer than the worker's 1 s database timeout: it gives up, then waits
                await asyncio.to_thread(server.start)
                after_id = await _defer_when_back(queue, "sleeper", {"path": str(notes), "seconds": 0.1})
                after = await finished(queue, after_id, within=60)
                across_record = await finished(queue, across, within=60)
                assert worker.process.poll() is None, worker.output()
            finally:
                code = worker.stop()
            assert code == 0, worker.output()
    assert before.status == "succeeded" and after.status == "succeeded", worker.output()
    assert across_record.status == "succeeded", (across_record, worker.output())
    assert "lost its database" in worker.output() and "database reachable again" in worker.output()


async def _defer_when_back(queue: JobQueue, entry: str, input_data: object) -> int:
    """Defer once the queue's own pool reaches the restarted server again."""
    for _ in range(100):
        try:
            return await queue.defer(entry, input_data)
        except Exception:
            await asyncio.sleep(0.2)
    raise AssertionError("the queue never reached the restarted server")


async def test_bad_declarations_and_inputs_are_refused_with_what_to_do(queue: JobQueue, dsn: str) -> None:
    with pytest.raises(ConfigurationError, match=r"entry 'nope' may not run as a job: declare it .* \(declared: boom"):
        await queue.defer("nope", "x")
    with pytest.raises(TypeError, match="input of a job of entry 'greeter' must be JSON-compatible"):
        await queue.defer("greeter", object())
    with pytest.raises(ValueError, match=r"input of a job of entry 'greeter' holds a NUL character, .* encode it"):
        await queue.defer("greeter", {"deep": ["fine", {"no\x00key": 1}]})
    with pytest.raises(
        InvalidJobRequest, match=r"unknown job status 'done': use aborted, awaiting_approval, cancelled, doing, failed"
    ):
        await queue.list("done")
    with pytest.raises(InvalidJobRequest, match=r"entry 'nope' is not one of this queue's \(declared: boom"):
        await queue.list(entry="nope")
    newest = await queue.defer("greeter", "not yours", delay=3600)
    for wrong in (None, str(newest), float(newest), True):  # None once read the newest job of the queue
        for call in (queue.get, queue.cancel, queue.pending, queue.wait):
            with pytest.raises(InvalidJobRequest, match=rf"a job id is the int JobQueue.defer returned, got {wrong!r}"):
                await call(wrong)  # type: ignore[arg-type]
    chose = "choice must be 'approve', 'approve_for_session' or 'deny', got 'yes'"
    with pytest.raises(InvalidJobRequest, match=chose) as word:
        await queue.decide(newest, "apr_1", "yes")  # type: ignore[arg-type]
    assert isinstance(word.value, LlmDoError) and isinstance(word.value, ValueError)
    with pytest.raises(InvalidJobRequest, match=r"an approval id is the str JobQueue\.pending gave"):
        await queue.decide(newest, 7, "approve")  # type: ignore[arg-type]  # once "the jobs schema is missing"
    with pytest.raises(InvalidJobRequest, match="limit must be an int of 0 or more, got -1"):
        await queue.list(limit=-1)
    bad_options: list[tuple[dict[str, Any], str]] = [
        ({"priority": "high"}, r"priority must be an int \(a 32-bit one\), got 'high'"),
        ({"delay": float("nan")}, "delay must be a finite number of seconds, got nan"),
        ({"queueing_lock": 5}, "queueing_lock must be a str without NUL characters, got 5"),
        ({"traceparent": "00-\x00"}, "traceparent must be a str without NUL characters"),
    ]
    for options, message in bad_options:
        with pytest.raises(InvalidJobRequest, match=rf"defer\('greeter', \.\.\.\): {message}"):
            await queue.defer("greeter", "x", **options)
    assert (await queue.get(newest)).status == "todo"
    with pytest.raises(ConfigurationError, match="declared twice"):
        JobQueue(dsn, entries=["a", "a"])
    with pytest.raises(ConfigurationError, match="is empty"):
        JobQueue(dsn, entries=[])
    assert current_job() is None  # outside a worker's run


async def test_a_database_without_the_schema_says_to_apply_it(dsn: str) -> None:
    async with JobQueue(dsn, entries=ENTRIES) as queue:  # no worker started here, apply_schema() not called
        for attempt in (queue.defer("greeter", "x"), queue.get(1), queue.list(), queue.cancel(1)):
            with pytest.raises(ConfigurationError, match=r"jobs schema is missing .*await queue\.apply_schema\(\)"):
                await attempt
        await queue.apply_schema()
        assert (await queue.get(await queue.defer("greeter", "x"))).status == "todo"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("postgresql://app:s3cret-pw%zz@db.internal/app", 'invalid percent-encoded token: "***"'),
        ("postgresql://app:s3cret-pw@[::1/app", 'matching "]" in IPv6 host address in URI: "***"'),
        ("host=db.internal password=s3cret-pw dbname", 'missing "=" after "dbname"'),
    ],
)
async def test_a_url_libpq_cannot_read_is_refused_without_quoting_its_password(
    url: str, problem: str, caplog: pytest.LogCaptureFixture
) -> None:
    """libpq quotes such a URL in its message, and psycopg's pool logged that at every attempt to connect."""
    caplog.set_level(logging.DEBUG)
    queue = JobQueue(SecretStr(url), entries=ENTRIES)
    with pytest.raises(ConfigurationError) as raised:
        await queue.open(connect_timeout=0.5)
    message = str(raised.value)
    assert message.startswith("the jobs database URL cannot be used: ") and problem in message
    assert raised.value.__cause__ is None and raised.value.__context__ is None
    assert "s3cret" not in message + caplog.text and not queue.is_open


async def test_applying_the_schema_again_takes_no_lock_that_waits_for_queries_on_llm_dos_tables(dsn: str) -> None:
    """Every worker applies the schema as it starts: on an up-to-date schema that must not wait for (nor block)
    the queries reading llm-do's tables, as an ALTER TABLE would, even one that changes nothing."""
    async with JobQueue(dsn, entries=ENTRIES) as queue:
        await queue.apply_schema()
        async with queue.pool.connection() as reader, reader.transaction():
            for table in ("llm_do_job_results", "llm_do_approvals", "llm_do_journal"):
                await reader.execute(f"SELECT count(*) FROM {table}")  # a transaction that goes on reading them
            await asyncio.wait_for(queue.apply_schema(), 30)  # (it waited until the reader ended: for good here)


async def test_the_schema_of_an_earlier_version_keeps_its_rows_and_takes_nul_characters(dsn: str) -> None:
    """Earlier versions kept JSON as jsonb, which refuses a NUL character; `apply_schema()` turns those columns
    into json, keeping what they held."""
    async with JobQueue(dsn, entries=ENTRIES) as queue:
        async with queue.pool.connection() as conn:
            await conn.execute(
                "CREATE TABLE llm_do_job_results (job_id bigint PRIMARY KEY, entry text NOT NULL,"
                " outcome text NOT NULL, output jsonb, usage jsonb NOT NULL, calls jsonb NOT NULL,"
                " error text, attempt integer NOT NULL, worker text,"
                " started_at timestamptz NOT NULL, finished_at timestamptz NOT NULL)"
            )
            await conn.execute(
                "INSERT INTO llm_do_job_results VALUES (7, 'greeter', 'ok', '{\"kept\": 1}', '{}', '[]', NULL, 1,"
                " NULL, now(), now())"
            )
            await conn.execute(  # before questions kept the files their calls hand over
                "CREATE TABLE llm_do_approvals (queue text NOT NULL, job_id bigint NOT NULL, approval_id text NOT NULL,"
                " call_path text NOT NULL, toolset text NOT NULL, tool text NOT NULL, args jsonb NOT NULL,"
                " reason text NOT NULL, description text NOT NULL, asked_at timestamptz NOT NULL DEFAULT now(),"
                " choice text, note text, decided_at timestamptz, PRIMARY KEY (queue, job_id, approval_id))"
            )
            await conn.execute(
                "INSERT INTO llm_do_approvals (queue, job_id, approval_id, call_path, toolset, tool, args, reason,"
                " description) VALUES ('q', 7, 'apr_1', 'a', 't', 'x', '{}', 'r', 'd')"
            )
        await queue.apply_schema()
        await queue.apply_schema()  # idempotent
        async with queue.pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT table_name, column_name, data_type FROM information_schema.columns"
                " WHERE table_name LIKE 'llm_do_%' AND data_type IN ('json', 'jsonb') ORDER BY 1, 2"
            )
            columns = await cursor.fetchall()
            [(output,)] = await (await conn.execute("SELECT output FROM llm_do_job_results")).fetchall()
            [(files,)] = await (await conn.execute("SELECT attachments FROM llm_do_approvals")).fetchall()
        assert output == {"kept": 1} and files == []
        assert {data_type for _, _, data_type in columns} == {"json"}
        assert [(table, column) for table, column, _ in columns] == [
            ("llm_do_approvals", "args"),
            ("llm_do_approvals", "attachments"),
            ("llm_do_job_results", "calls"),
            ("llm_do_job_results", "journal"),
            ("llm_do_job_results", "output"),
            ("llm_do_job_results", "usage"),
            ("llm_do_journal", "response"),
        ]
        async with in_process_worker(queue):
            said = await finished(queue, await queue.defer("nul", {"text": "\\0"}))
        assert said.output == {"said": "\x00"}


async def test_a_closed_queue_can_be_opened_again(dsn: str) -> None:
    queue = JobQueue(dsn, entries=ENTRIES)
    async with queue:
        await queue.apply_schema()
        first = await queue.defer("greeter", "first")
    assert not queue.is_open
    async with queue:  # a new pool, and procrastinate defers through it
        second = await queue.defer("greeter", "second")
        assert [job.id for job in await queue.list("todo")] == [second, first]
        async with in_process_worker(queue):  # a worker on the reopened queue
            assert (await finished(queue, first)).status == (await finished(queue, second)).status == "succeeded"
    async with queue:
        assert {job.id for job in await queue.list("succeeded")} == {first, second}


async def test_an_in_process_worker_stops_on_sigterm_leaves_an_ignored_signal_and_gives_handlers_back(
    queue: JobQueue,
) -> None:
    """`run_worker` handles SIGTERM, SIGINT and SIGHUP while it runs, except one the process ignores (as
    under `nohup`), and afterwards each signal has the application's own disposition again."""
    signals = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    former = {signum: signal.getsignal(signum) for signum in signals}
    received: list[int] = []

    def application_handler(signum: int, frame: object) -> None:
        received.append(signum)

    signal.signal(signal.SIGTERM, application_handler)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    options = WorkerOptions(concurrency=1, poll_interval=0.2, name="in-process")
    task = asyncio.create_task(run_worker(queue, options, runtime=make_runtime))

    async def handling_sigterm() -> bool:
        return task.done() or signal.getsignal(signal.SIGTERM) is not application_handler

    try:
        await eventually(handling_sigterm, "the worker handles SIGTERM")
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        signal.raise_signal(signal.SIGTERM)
        async with asyncio.timeout(60):
            await task
        assert received == []  # the worker's, not the application's
        assert signal.getsignal(signal.SIGTERM) is application_handler
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) == former[signal.SIGINT]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for signum, disposition in former.items():
            signal.signal(signum, disposition)


def test_worker_durations_take_fractions_of_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    durations = {"HEARTBEAT": "0.25", "STALLED_TIMEOUT": "1.5", "SHUTDOWN_TIMEOUT": "0.5", "DATABASE_TIMEOUT": "0.75"}
    for name, value in durations.items():
        monkeypatch.setenv(f"LLM_DO_WORKER_{name}", value)
    monkeypatch.setenv("LLM_DO_WORKER_CONCURRENCY", "3")
    assert WorkerOptions.from_settings(JobSettings(), name="w") == WorkerOptions(
        concurrency=3, heartbeat=0.25, stalled_timeout=1.5, shutdown_timeout=0.5, database_timeout=0.75, name="w"
    )
    monkeypatch.setenv("LLM_DO_WORKER_HEARTBEAT", "0")
    with pytest.raises(InvalidSettings, match="LLM_DO_WORKER_HEARTBEAT"):
        JobSettings()


async def test_the_worker_command_names_a_bad_target(dsn: str, tmp_path: Path) -> None:
    for target, expected in (
        ("no_such_module_here", "is neither a project path nor an importable module"),
        ("tests.jobs_app:make_runtime", "tests.jobs_app.make_runtime is not a JobQueue"),
    ):
        worker = Worker(target, dsn, tmp_path / "bad.log")
        assert worker.process.wait(timeout=30) == 1
        assert expected in worker.output()


async def test_the_worker_command_runs_a_projects_entries(dsn: str, tmp_path: Path) -> None:
    from ..docs.test_example_projects import EXAMPLES, SUMMARY

    project = EXAMPLES / "summarizer"
    text = tomllib.loads((project / "project.toml").read_text())["input"]
    async with JobQueue(dsn, entries=["summarize"]) as summaries:
        await summaries.apply_schema()
        job_id = await summaries.defer("summarize", text)
        worker = Worker(str(project), dsn, tmp_path / "worker.log", args=("--model", "replay:recording.json"))
        try:
            record = await finished(summaries, job_id, within=60)
        finally:
            assert worker.stop() == 0, worker.output()
    assert record.status == "succeeded", (record, worker.output())
    assert record.output == SUMMARY
    assert max(call["depth"] for call in record.calls) == 2  # the summarizer called itself, two levels deep


def test_llm_do_itself_never_imports_procrastinate() -> None:
    code = (
        "import sys, llm_do, llm_do.cli.main; "
        "print(sorted(m for m in sys.modules if m.startswith('llm_do.jobs') "
        "or m.split('.')[0] in ('procrastinate', 'psycopg', 'psycopg_pool')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.long
async def test_sighup_stops_a_worker_gracefully_and_its_mcp_servers_with_it(dsn: str, tmp_path: Path) -> None:
    project = stubborn_project(tmp_path / "desk")  # a server and a child that ignore SIGTERM, SIGHUP, stdin's end
    async with JobQueue(dsn, entries=["main"]) as jobs:
        await jobs.apply_schema()
        job_id = await jobs.defer("main", "go")
        env = {"LLM_DO_WORKER_SHUTDOWN_TIMEOUT": "0.5", "LLM_DO_APPROVAL_MODE": "approve_all"}
        worker = Worker(str(project), dsn, tmp_path / "worker.log", env=env)
        pids = await asyncio.to_thread(stubborn_pids, project)
        await asyncio.to_thread(wait_for, project / "holding")  # the job is inside the server's tool
        worker.process.send_signal(signal.SIGHUP)
        code = await asyncio.to_thread(worker.process.wait, 60)
        stopped = await jobs.get(job_id)
    assert code == 0, worker.output()
    assert [pid for pid in pids if alive(pid)] == []  # the runtime closed its servers before the worker exited
    assert stopped.status == "todo" and stopped.error == "cancelled (worker shutdown)", stopped
