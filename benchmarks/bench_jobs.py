"""Agent runs as jobs: throughput against worker processes and concurrency, and the cost of a job over
a direct `Runtime.run`.

Starts a throwaway PostgreSQL server (tests/postgres.py, unix socket only). The entry is one agent
whose scripted model answers each request after `--latency` seconds (default 50 ms, standing in for
an LLM): a tool call, then text, so a run makes two requests.

1. Throughput. For each number of worker processes (`llm-do worker bench_jobs:queue`, real
   subprocesses) and each concurrency, the workers start on a fresh database. Then the jobs are
   deferred and timed until the last one has succeeded. The baseline is the same number of runs made
   directly with `Runtime.run` in one process, at the same concurrency (an asyncio semaphore, no
   queue).
2. Overhead. A model with no latency, concurrency 1, one worker in this process (`run_worker`). The
   time per job is measured from the first run's start to the last run's end in the results table,
   so it covers fetching, running, storing and finishing each job. Direct runs alternate with job
   rounds on an identical runtime.

    python benchmarks/bench_jobs.py [--latency 0.05] [--rounds 15] [--svg docs/bench-jobs.svg]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llm_do import AgentEntry, Runtime  # noqa: E402
from llm_do.jobs import JobQueue, WorkerOptions, run_worker  # noqa: E402
from tests.jobs_support import fresh_database  # noqa: E402
from tests.postgres import PostgresServer, temporary_postgres  # noqa: E402

LATENCY = float(os.environ.get("BENCH_JOBS_LATENCY", "0.05"))


async def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if LATENCY:
        await asyncio.sleep(LATENCY)
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("add", {"a": 1, "b": 2})])
    return ModelResponse(parts=[TextPart("3")])


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


agent = Agent(FunctionModel(_respond, model_name="scripted-50ms"), tools=[add])
adder = AgentEntry(agent, name="adder")


def make_runtime() -> Runtime:
    return Runtime(entries=[adder])


queue = JobQueue(entries=["adder"], runtime=make_runtime)
"""What the worker processes run (`llm-do worker bench_jobs:queue --app-dir benchmarks`)."""


# -- 1. throughput -----------------------------------------------------------------------------------


def start_workers(count: int, concurrency: int, dsn: str, latency: float) -> list[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "LLM_DO_JOBS_DATABASE_URL": dsn,
        "BENCH_JOBS_LATENCY": str(latency),
        "LLM_DO_WORKER_HEARTBEAT": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "llm_do.cli", "worker", "bench_jobs:queue", "--app-dir", str(ROOT / "benchmarks")]
    return [
        subprocess.Popen([*command, "--concurrency", str(concurrency)], cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
        for _ in range(count)
    ]


async def count(dsn: str, sql: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval(sql))
    finally:
        await conn.close()


async def jobs_per_second(postgres: PostgresServer, workers: int, concurrency: int, jobs: int, latency: float) -> float:
    async with fresh_database(postgres) as dsn, JobQueue(dsn, entries=["adder"]) as deferrer:
        await deferrer.apply_schema()
        processes = start_workers(workers, concurrency, dsn, latency)
        try:
            while await count(dsn, "SELECT count(*) FROM procrastinate_workers") < workers:  # noqa: ASYNC110
                await asyncio.sleep(0.1)
            started = time.perf_counter()
            pending = iter(range(jobs))

            async def defer_some() -> None:
                for number in pending:
                    await deferrer.defer("adder", f"job {number}")

            await asyncio.gather(*(defer_some() for _ in range(8)))
            done_sql = "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('succeeded', 'failed')"
            while await count(dsn, done_sql) < jobs:  # noqa: ASYNC110  (polling the database)
                await asyncio.sleep(0.05)
            elapsed = time.perf_counter() - started
            failed = await count(dsn, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'failed'")
            if failed:
                raise RuntimeError(f"{failed} jobs failed")
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                process.wait(timeout=60)
    return jobs / elapsed


async def direct_runs_per_second(concurrency: int, runs: int) -> float:
    gate = asyncio.Semaphore(concurrency)
    async with make_runtime() as runtime:

        async def one(number: int) -> None:
            async with gate:
                await runtime.run("adder", f"job {number}")

        started = time.perf_counter()
        await asyncio.gather(*(one(number) for number in range(runs)))
        return runs / (time.perf_counter() - started)


# -- 2. overhead per job ---------------------------------------------------------------------------


async def per_direct_run(runs: int) -> float:
    async with make_runtime() as runtime:
        started = time.perf_counter()
        for number in range(runs):
            await runtime.run("adder", f"job {number}")
        return (time.perf_counter() - started) / runs


async def per_job(dsn: str, jobs: int, concurrency: int = 1) -> float:
    async with JobQueue(dsn, entries=["adder"], runtime=make_runtime) as jobs_queue:
        await jobs_queue.apply_schema()
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute("TRUNCATE llm_do_job_results")
            first = None
            for number in range(jobs):
                job_id = await jobs_queue.defer("adder", f"job {number}")
                first = job_id if first is None else first
            stop = asyncio.Event()
            options = WorkerOptions(concurrency=concurrency, heartbeat=5, poll_interval=0.5, name="bench")
            worker = asyncio.create_task(run_worker(jobs_queue, options, stop=stop, install_signal_handlers=False))
            while await conn.fetchval("SELECT count(*) FROM llm_do_job_results") < jobs:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            stop.set()
            await worker
            span = await conn.fetchval(
                "SELECT extract(epoch FROM max(finished_at) - min(started_at)) FROM llm_do_job_results"
            )
            outcomes = await conn.fetchval("SELECT count(*) FROM llm_do_job_results WHERE outcome <> 'ok'")
            if outcomes:
                raise RuntimeError(f"{outcomes} jobs did not end ok")
        finally:
            await conn.close()
    return float(span) / jobs


# -- the report ----------------------------------------------------------------------------------


def svg(points: dict[tuple[int, int], float], baseline: dict[int, float], path: Path, latency: float) -> None:
    """A bar chart by hand (no plotting dependency): jobs/s per concurrency, one bar per worker count."""
    concurrencies = sorted({c for _, c in points})
    top = max([*points.values(), *baseline.values()]) * 1.15
    width, height, left, bottom, group = 640, 380, 70, 50, 170
    colors = {1: "#4c78a8", 2: "#f58518", "direct": "#9d9d9d"}
    plot_h = height - bottom - 40
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">'
        f"Jobs per second ({latency * 1000:.0f} ms per model request, 2 requests per run)</text>",
    ]
    for tick in range(6):
        value = top * tick / 5
        y = height - bottom - plot_h * tick / 5
        parts.append(f'<line x1="{left}" x2="{width - 20}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e0e0e0"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{value:.0f}</text>')
    for index, concurrency in enumerate(concurrencies):
        x0 = left + 20 + index * group
        bars: list[tuple[Any, float]] = [
            (1, points.get((1, concurrency), 0.0)),
            (2, points.get((2, concurrency), 0.0)),
            ("direct", baseline.get(concurrency, 0.0)),
        ]
        for slot, (key, value) in enumerate(bars):
            h = plot_h * value / top
            x = x0 + slot * 45
            y = height - bottom - h
            parts.append(f'<rect x="{x}" y="{y:.1f}" width="40" height="{h:.1f}" fill="{colors[key]}"/>')
            parts.append(f'<text x="{x + 20}" y="{y - 4:.1f}" text-anchor="middle" font-size="10">{value:.1f}</text>')
        parts.append(
            f'<text x="{x0 + 65}" y="{height - bottom + 18}" text-anchor="middle">concurrency {concurrency}</text>'
        )
    legend = [
        ("1 worker process", colors[1]),
        ("2 worker processes", colors[2]),
        ("direct Runtime.run, 1 process", colors["direct"]),
    ]
    for index, (label, color) in enumerate(legend):
        x = left + index * 185
        parts.append(f'<rect x="{x}" y="{height - 22}" width="12" height="12" fill="{color}"/>')
        parts.append(f'<text x="{x + 16}" y="{height - 12}">{label}</text>')
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n")


async def main(args: argparse.Namespace) -> None:
    global LATENCY
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    with temporary_postgres() as postgres:
        # 2. overhead first: it wants the quietest machine
        LATENCY = 0.0
        direct: list[float] = []
        jobbed: list[float] = []
        async with fresh_database(postgres) as dsn:
            await per_job(dsn, 20)  # warm-up
            await per_direct_run(20)
            for number in range(args.rounds):
                direct.append(await per_direct_run(args.overhead_jobs))
                jobbed.append(await per_job(dsn, args.overhead_jobs))
                print(f"overhead round {number + 1}: direct {direct[-1] * 1000:.2f} ms, job {jobbed[-1] * 1000:.2f} ms")
            # the same at concurrency 10: what a job costs in throughput rather than in latency
            direct10: list[float] = []
            jobbed10: list[float] = []
            for _ in range(args.rounds):
                direct10.append(1 / await direct_runs_per_second(10, args.overhead_jobs * 2))
                jobbed10.append(await per_job(dsn, args.overhead_jobs * 2, concurrency=10))
        d10, j10 = statistics.median(direct10), statistics.median(jobbed10)
        paired10 = statistics.median(b - a for a, b in zip(direct10, jobbed10, strict=True))
        d, j = statistics.median(direct), statistics.median(jobbed)
        paired = statistics.median(b - a for a, b in zip(direct, jobbed, strict=True))
        print(f"\nper run, no model latency, concurrency 1 ({args.rounds} rounds x {args.overhead_jobs}, medians):")
        print(f"| direct `Runtime.run` | {d * 1000:.2f} ms |\n| as a job | {j * 1000:.2f} ms |")
        print(f"| overhead of a job (median of the rounds' differences) | {paired * 1000:.2f} ms |")
        quiet = (min(jobbed) - min(direct)) * 1000
        print(f"| quietest rounds: fastest job round - fastest direct round | {quiet:.2f} ms |")
        print(
            f"\nper run at concurrency 10 (1 / throughput; {args.rounds} rounds x {args.overhead_jobs * 2}, medians):"
        )
        print(f"| direct `Runtime.run` | {d10 * 1000:.2f} ms |\n| as a job | {j10 * 1000:.2f} ms |")
        print(f"| overhead of a job (median of the rounds' differences) | {paired10 * 1000:.2f} ms |")
        quiet10 = (min(jobbed10) - min(direct10)) * 1000
        print(f"| quietest rounds: fastest job round - fastest direct round | {quiet10:.2f} ms |", flush=True)

        # 1. throughput
        LATENCY = args.latency
        points: dict[tuple[int, int], float] = {}
        baseline: dict[int, float] = {}
        for concurrency in (1, 10, 50):
            jobs = max(10, int({1: 40, 10: 300, 50: 800}[concurrency] * args.scale))
            baseline[concurrency] = await direct_runs_per_second(concurrency, jobs)
            for workers in (1, 2):
                points[(workers, concurrency)] = await jobs_per_second(
                    postgres, workers, concurrency, jobs, args.latency
                )
                print(
                    f"{workers} worker(s), concurrency {concurrency}: {points[(workers, concurrency)]:.1f} jobs/s "
                    f"(direct, 1 process: {baseline[concurrency]:.1f} runs/s)",
                    flush=True,
                )
        print("\n| concurrency | direct runs/s (1 process) | 1 worker jobs/s | ratio | 2 workers jobs/s | ratio |")
        print("|---:|---:|---:|---:|---:|---:|")
        for concurrency in (1, 10, 50):
            base = baseline[concurrency]
            one, two = points[(1, concurrency)], points[(2, concurrency)]
            print(f"| {concurrency} | {base:.1f} | {one:.1f} | {one / base:.2f} | {two:.1f} | {two / base:.2f} |")
        if args.svg:
            svg(points, baseline, Path(args.svg), args.latency)
            print(f"\nplot written to {args.svg}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per model request (throughput part)")
    parser.add_argument("--rounds", type=int, default=15, help="rounds of the overhead part")
    parser.add_argument("--overhead-jobs", type=int, default=60, help="jobs (and direct runs) per overhead round")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the throughput part's job counts")
    parser.add_argument("--svg", help="write the throughput plot to this SVG file")
    asyncio.run(main(parser.parse_args()))
