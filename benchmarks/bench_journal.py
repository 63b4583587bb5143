"""The journal of a job's model responses: what it costs per model request, and jobs per second with and
without it.

Starts a throwaway PostgreSQL server (tests/postgres.py, unix socket only).

1. Cost per request. An agent whose scripted model makes 10 requests (9 tool calls, then text; the
   conversation grows to 20 messages), model and tool answering at once. *In a run*: runs with a job's
   journal (first attempt: every response written, the last write waited for), runs through a
   pass-through `WrapperModel` (what pydantic-ai charges any model wrapping another, the recording one
   included) and plain runs alternate on one runtime; the cost is each one's difference to the plain
   run, per request. *Its own work*: the requests of one run,
   captured, are sent again and again through a `JournalModel` and straight to a model that answers at
   once, alternating, each write awaited: the request's key (a SHA-256 of the conversation, tools and
   settings) plus the write (one INSERT), or on a re-run the key plus the lookup of the journaled answer.
   `--big` makes every tool return 2 KB of text.
2. Throughput against worker processes. For each number of worker processes (`--workers`, default 1, 2
   and 4; `llm-do worker bench_journal:queue`, each running `--concurrency` jobs at once, default 10), a
   cluster of workers on a database of its own; every cluster is up at once. The workers serve three
   entries with the same script: one journaled, two not (`JobEntry(journal=False)`; the second is a
   control, whose ratio to the first shows how much two identical batches differ on this machine). The
   model takes `--latency` seconds per request (default 50 ms) and a run makes 3 requests. Each round
   goes through the clusters, and through the entries within one, in an order that turns; a batch
   (`--jobs` per worker) is deferred 8 at a time and timed from its first defer until its last job has
   ended. Per batch: jobs per second, the workers' CPU time (user + system, from /proc) per job, and the
   PostgreSQL server's (its backends', this process's included) per job. The ratio of a round is its
   journaled batch's jobs per second over its batch without the journal.

    python benchmarks/bench_journal.py [--rounds 5] [--jobs 150] [--workers 1 2 4] [--concurrency 10]
        [--big] [--skip-costs] [--skip-throughput]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llm_do import AgentEntry, Runtime  # noqa: E402
from llm_do.jobs import JobEntry, JobQueue  # noqa: E402
from llm_do.jobs.journal import JobJournals, PostgresJournal  # noqa: E402
from llm_do.models import Journal, JournalEntry, JournalModel, RecordedResponse, request_key  # noqa: E402
from tests.jobs_support import fresh_database  # noqa: E402
from tests.postgres import PostgresServer, temporary_postgres  # noqa: E402

LATENCY = float(os.environ.get("BENCH_JOURNAL_LATENCY", "0.05"))


# -- what the worker processes run ------------------------------------------------------------------


async def _three_requests(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if LATENCY:
        await asyncio.sleep(LATENCY)
    asked = sum(isinstance(message, ModelResponse) for message in messages)
    if asked < 2:
        return ModelResponse(parts=[ToolCallPart("add", {"a": asked, "b": 2})])
    return ModelResponse(parts=[TextPart("done")])


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _entry(name: str) -> AgentEntry:
    return AgentEntry(Agent(FunctionModel(_three_requests, model_name="scripted"), tools=[add]), name=name)


VARIANTS = ("journaled", "plain", "control")
"""The journaled entry; the same without a journal; and that again, whose difference to `plain` is the noise."""


def make_runtime() -> Runtime:
    return Runtime(entries=[_entry(name) for name in VARIANTS])


queue = JobQueue(
    entries=["journaled", JobEntry("plain", journal=False), JobEntry("control", journal=False)], runtime=make_runtime
)
"""What the worker process runs (`llm-do worker bench_journal:queue --app-dir benchmarks`)."""


# -- 1. cost per request -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Captured:
    messages: list[ModelMessage]
    settings: ModelSettings | None
    params: ModelRequestParameters
    response: ModelResponse


class Capturing(WrapperModel):
    def __init__(self, wrapped: Model) -> None:
        super().__init__(wrapped)
        self.captured: list[Captured] = []

    async def request(
        self, messages: list[ModelMessage], settings: ModelSettings | None, params: ModelRequestParameters
    ) -> ModelResponse:
        response = await super().request(messages, settings, params)
        self.captured.append(Captured(list(messages), settings, params, response))
        return response


class Instant(Model):
    """Answers each captured request with its captured response, at once."""

    def __init__(self, captured: list[Captured]) -> None:
        super().__init__()
        self.answers = {len(item.messages): item.response for item in captured}

    @property
    def model_name(self) -> str:
        return "instant"

    @property
    def system(self) -> str:
        return "bench"

    async def request(
        self, messages: list[ModelMessage], settings: ModelSettings | None, params: ModelRequestParameters
    ) -> ModelResponse:
        return self.answers[len(messages)]


def _ten_requests(big: bool) -> tuple[FunctionModel, Any]:
    async def ten(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked = sum(isinstance(message, ModelResponse) for message in messages)
        if asked < 9:
            return ModelResponse(parts=[ToolCallPart("lookup", {"n": asked})])
        return ModelResponse(parts=[TextPart("All ten values are in.")])

    async def lookup(n: int) -> str:
        """Look a value up."""
        return f"value {n}: " + ("x" * 2000 if big else "42")

    return FunctionModel(ten), lookup


async def captured_conversation(big: bool) -> list[Captured]:
    model, lookup = _ten_requests(big)
    capturing = Capturing(model)
    await Agent(capturing, tools=[lookup], instructions="Look up the ten values.").run("Look them up.")
    return capturing.captured


async def work_per_request(pool: Any, rounds: int, big: bool) -> dict[str, list[float]]:
    """The journal's own work per request, nothing overlapping it: key and write (awaited), or key and lookup."""
    captured = await captured_conversation(big)
    instant = Instant(captured)
    samples: dict[str, list[float]] = {
        "its own work, first attempt: key + write": [],
        "its own work, re-run: key + lookup": [],
        "the write alone (one INSERT through the pool)": [],
    }
    for number in range(rounds):
        store = PostgresJournal(pool, "bench-work", number, 1)
        bare = PostgresJournal(pool, "bench-bare", number, 1)
        for index, item in enumerate(captured):
            entry = JournalEntry(
                "-", index, RecordedResponse.answering(request_key(item.messages, item.params), item.response)
            )
            started = time.perf_counter()
            await bare.write([entry])
            samples["the write alone (one INSERT through the pool)"].append(time.perf_counter() - started)
        for mode in list(samples)[:2]:
            journal = Journal(store, await store.entries() if "re-run" in mode else ())
            model = JournalModel(instant, journal)
            for item in captured:
                started = time.perf_counter()
                await instant.request(item.messages, item.settings, item.params)
                direct = time.perf_counter() - started
                started = time.perf_counter()
                await model.request(item.messages, item.settings, item.params)
                await journal.settled()
                samples[mode].append(time.perf_counter() - started - direct)
            if "re-run" in mode and journal.replayed != len(captured):
                raise RuntimeError(f"the re-run replayed {journal.replayed} of {len(captured)} requests")
    return samples


async def cost_in_runs(pool: Any, rounds: int, big: bool) -> dict[str, list[float]]:
    """Per request, what a first attempt's journal adds to a whole run of 10 requests, and what any wrapper
    model adds (pydantic-ai's own work for a model wrapping another), each paired with a plain run."""
    model, lookup = _ten_requests(big)
    agent = Agent(model, tools=[lookup], instructions="Look up the ten values.")
    journals = JobJournals(pool, "bench-runs")
    added: dict[str, list[float]] = {"in a run: any wrapper model (pydantic-ai)": [], "in a run: the journal": []}
    async with Runtime(entries=[AgentEntry(agent, name="looker")]) as runtime:
        await runtime.run("looker", "warm up")
        for number in range(rounds):
            started = time.perf_counter()
            await runtime.run("looker", "Look them up.")
            plain = time.perf_counter() - started
            started = time.perf_counter()
            with agent.override(model=WrapperModel(model)):
                await runtime.run("looker", "Look them up.")
            wrapped = time.perf_counter() - started
            journal = Journal(PostgresJournal(pool, "bench-runs", number, 1))
            started = time.perf_counter()
            with journals.installed(runtime, "looker", journal):
                await runtime.run("looker", "Look them up.")
            await journal.settled()
            journaled = time.perf_counter() - started
            if journal.sent != 10:
                raise RuntimeError(f"the journal saw {journal.sent} requests, not 10")
            added["in a run: any wrapper model (pydantic-ai)"].append((wrapped - plain) / 10)
            added["in a run: the journal"].append((journaled - plain) / 10)
    return added


# -- 2. throughput -----------------------------------------------------------------------------------


def start_workers(count: int, concurrency: int, dsn: str, latency: float) -> list[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "LLM_DO_JOBS_DATABASE_URL": dsn,
        "BENCH_JOURNAL_LATENCY": str(latency),
        "LLM_DO_WORKER_HEARTBEAT": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    command = [
        sys.executable,
        "-m",
        "llm_do.cli",
        "worker",
        "bench_journal:queue",
        "--app-dir",
        str(ROOT / "benchmarks"),
        "--concurrency",
        str(concurrency),
    ]
    return [subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.DEVNULL) for _ in range(count)]


def cpu_seconds(pid: int, children: bool = False) -> float:
    """User and system CPU time of process `pid` so far (Linux), with that of its waited-for children if asked."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def server_cpu_seconds(postgres: PostgresServer) -> float:
    """CPU time of the PostgreSQL server so far: the postmaster, its live backends, and those that ended."""
    assert postgres.data_dir is not None
    postmaster = int((postgres.data_dir / "postmaster.pid").read_text().split()[0])
    total = cpu_seconds(postmaster, children=True)
    for child in Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split():
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            total += cpu_seconds(int(child))
    return total


@dataclass(frozen=True, slots=True)
class Batch:
    rate: float
    """Jobs per second."""
    worker_cpu: float
    """CPU seconds per job, all worker processes together."""
    server_cpu: float
    """CPU seconds per job of PostgreSQL (every backend, those of this process included)."""


@dataclass(slots=True)
class Cluster:
    """Worker processes on a database of their own, and a process-side queue to defer into it."""

    workers: list[subprocess.Popen[bytes]]
    deferrer: JobQueue
    conn: asyncpg.Connection[Any]
    concurrency: int


async def batch(cluster: Cluster, postgres: PostgresServer, entry: str, jobs: int) -> Batch:
    """Defer `jobs` jobs of `entry` (8 at a time) and wait until all have ended."""
    worker_cpu = sum(cpu_seconds(worker.pid) for worker in cluster.workers)
    server_cpu = server_cpu_seconds(postgres)
    started = time.perf_counter()
    first = await cluster.deferrer.defer(entry, "job 0")
    pending = iter(range(1, jobs))

    async def defer_some() -> None:
        for number in pending:
            await cluster.deferrer.defer(entry, f"job {number}")

    await asyncio.gather(*(defer_some() for _ in range(8)))
    done_sql = "SELECT count(*) FROM procrastinate_jobs WHERE id >= $1 AND status IN ('succeeded', 'failed')"
    while await cluster.conn.fetchval(done_sql, first) < jobs:  # noqa: ASYNC110  (polling the database)
        await asyncio.sleep(0.02)
    elapsed = time.perf_counter() - started
    worker_used = sum(cpu_seconds(worker.pid) for worker in cluster.workers) - worker_cpu
    server_used = server_cpu_seconds(postgres) - server_cpu
    failed = await cluster.conn.fetchval("SELECT count(*) FROM procrastinate_jobs WHERE status = 'failed'")
    if failed:
        raise RuntimeError(f"{failed} jobs failed")
    return Batch(jobs / elapsed, worker_used / jobs, server_used / jobs)


@contextlib.asynccontextmanager
async def cluster(postgres: PostgresServer, count: int, concurrency: int, latency: float) -> AsyncIterator[Cluster]:
    async with fresh_database(postgres) as dsn, JobQueue(dsn, entries=queue.entries.values()) as deferrer:
        await deferrer.apply_schema()
        workers = start_workers(count, concurrency, dsn, latency)
        conn = await asyncpg.connect(dsn)
        try:
            while await conn.fetchval("SELECT count(*) FROM procrastinate_workers") < count:  # noqa: ASYNC110
                await asyncio.sleep(0.1)
            yield Cluster(workers, deferrer, conn, concurrency)
        finally:
            await conn.close()
            for worker in workers:
                worker.terminate()
            for worker in workers:
                worker.wait(timeout=60)


async def throughput(
    postgres: PostgresServer, counts: list[int], concurrency: int, jobs: int, rounds: int, latency: float
) -> dict[int, dict[str, list[Batch]]]:
    """Per number of worker processes, the batches of each variant. Every cluster of workers is up at once;
    each round goes through the clusters, and through the variants within one, in an order that turns."""
    measured: dict[int, dict[str, list[Batch]]] = {count: {name: [] for name in VARIANTS} for count in counts}
    async with contextlib.AsyncExitStack() as stack:
        clusters = {
            count: await stack.enter_async_context(cluster(postgres, count, concurrency, latency)) for count in counts
        }
        for count, opened in clusters.items():
            await batch(opened, postgres, "plain", jobs * count)  # warm up
            await batch(opened, postgres, "journaled", jobs * count)
        for number in range(rounds):
            order = counts[number % len(counts) :] + counts[: number % len(counts)]
            for count in order:
                variants = VARIANTS[number % 3 :] + VARIANTS[: number % 3]
                for entry in variants:
                    measured[count][entry].append(await batch(clusters[count], postgres, entry, jobs * count))
                shown = ", ".join(f"{name} {measured[count][name][-1].rate:.2f}" for name in VARIANTS)
                load = os.getloadavg()[0]
                print(f"round {number + 1}, {count} worker(s): jobs/s {shown} (load {load:.1f})", flush=True)
    return measured


# -- the report ----------------------------------------------------------------------------------


async def main(args: argparse.Namespace) -> None:
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    with temporary_postgres() as postgres:
        if not args.skip_costs:
            async with fresh_database(postgres) as dsn, JobQueue(dsn, entries=["journaled"]) as opened:
                await opened.apply_schema()
                in_runs = await cost_in_runs(opened.pool, args.rounds * 40, args.big)
                work = await work_per_request(opened.pool, args.rounds * 20, args.big)
            returns = "2 KB" if args.big else "short"
            print(f"\njournal cost per model request ({returns} tool returns, 10 requests a run):")
            print("| | median | p90 |\n|---|---:|---:|")
            for label, values in {**in_runs, **work}.items():
                ordered = sorted(values)
                p90 = ordered[int(len(ordered) * 0.9)]
                print(f"| {label} | {statistics.median(values) * 1000:.3f} ms | {p90 * 1000:.3f} ms |")
        if args.skip_throughput:
            return
        print(
            f"\nthroughput, {args.latency * 1000:.0f} ms per request, 3 requests a job, concurrency {args.concurrency}"
            f" per worker, {args.jobs} jobs a batch per worker, {args.rounds} rounds:"
        )
        measured = await throughput(postgres, args.workers, args.concurrency, args.jobs, args.rounds, args.latency)
        print(
            "| workers | journaled jobs/s | without jobs/s | ratio (median, range of the rounds) |"
            " control's ratio (range) | worker CPU per job: journaled | without | PostgreSQL CPU per job: journaled |"
            " without |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for count, batches in measured.items():
            ratios = [j.rate / p.rate for j, p in zip(batches["journaled"], batches["plain"], strict=True)]
            control = [c.rate / p.rate for c, p in zip(batches["control"], batches["plain"], strict=True)]

            def median(name: str, field: str, batches: dict[str, list[Batch]] = batches) -> float:
                return float(statistics.median(getattr(each, field) for each in batches[name]))

            print(
                f"| {count} | {median('journaled', 'rate'):.2f} | {median('plain', 'rate'):.2f} | "
                f"**{statistics.median(ratios):.3f}** ({min(ratios):.3f} to {max(ratios):.3f}) | "
                f"{statistics.median(control):.3f} ({min(control):.3f} to {max(control):.3f}) | "
                f"{median('journaled', 'worker_cpu') * 1000:.1f} ms | {median('plain', 'worker_cpu') * 1000:.1f} ms | "
                f"{median('journaled', 'server_cpu') * 1000:.1f} ms | {median('plain', 'server_cpu') * 1000:.1f} ms |"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=150, help="jobs per batch, per worker process")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4], help="worker processes")
    parser.add_argument("--concurrency", type=int, default=10, help="jobs each worker runs at once")
    parser.add_argument("--latency", type=float, default=LATENCY)
    parser.add_argument("--big", action="store_true", help="tools return 2 KB of text each")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-costs", action="store_true", help="only the jobs per second")
    asyncio.run(main(parser.parse_args()))
