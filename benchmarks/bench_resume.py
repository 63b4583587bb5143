"""A parked job: from a person's decision to the resumed run at the decided tool.

Starts a throwaway PostgreSQL server (tests/postgres.py, unix socket only) and one worker in this process
(`run_worker`, concurrency 1, the default poll interval of 1 s) on a queue that parks (`approvals="park"`). The
entry is one agent whose scripted model (no latency) calls `pay`, which needs a person's decision, then answers with
text. Each round defers a job, waits until it is parked, waits a random 0 to 1 s more (so that the decision does not
fall at the same point of the worker's polling every time), then times from the call to `JobQueue.decide` to the
moment the resumed run enters `pay`: the decision's transaction, the worker hearing of the job (a notification, or
its next poll), fetching it, reading its journal and decisions, and replaying the run up to the question.

    python benchmarks/bench_resume.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llm_do import AgentEntry, Runtime, ToolPolicy, Toolset, tool  # noqa: E402
from llm_do.jobs import JobQueue, WorkerOptions, current_job, run_worker  # noqa: E402
from tests.jobs_support import fresh_database  # noqa: E402
from tests.postgres import temporary_postgres  # noqa: E402

entered: dict[int, float] = {}
"""When the resumed run of each job entered `pay` (perf_counter)."""
arrived = asyncio.Event()


async def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("pay", {"amount": 10})])
    return ModelResponse(parts=[TextPart("paid")])


class Till(Toolset):
    @tool
    def pay(self, amount: int) -> str:
        """Pay `amount`."""
        job = current_job()
        if job is not None:
            entered[job.id] = time.perf_counter()
            arrived.set()
        return f"paid {amount}"


payer = AgentEntry(Agent(FunctionModel(_respond)), name="payer", toolsets=["till"])


def make_runtime() -> Runtime:
    return Runtime(entries=[payer], toolsets={"till": Till}, policies={"till": ToolPolicy(tools={"pay": "ask"})})


async def _status(queue: JobQueue, job_id: int, wanted: str) -> None:
    while (await queue.get(job_id)).status != wanted:  # noqa: ASYNC110  (polling the database)
        await asyncio.sleep(0.01)


async def latencies(dsn: str, rounds: int, seed: int) -> list[float]:
    chance = random.Random(seed)
    found: list[float] = []
    async with JobQueue(dsn, entries=["payer"], runtime=make_runtime, queue="bench", approvals="park") as queue:
        await queue.apply_schema()
        stop = asyncio.Event()
        options = WorkerOptions(concurrency=1, heartbeat=5, name="bench")
        worker = asyncio.create_task(run_worker(queue, options, stop=stop, install_signal_handlers=False))
        try:
            for number in range(rounds + 1):  # the first one warms up
                job_id = await queue.defer("payer", f"job {number}")
                await _status(queue, job_id, "awaiting_approval")
                [question] = await queue.pending(job_id)
                await asyncio.sleep(chance.uniform(0, 1))
                arrived.clear()
                decided = time.perf_counter()
                await queue.decide(job_id, question.approval_id, "approve")
                await arrived.wait()
                if number:
                    found.append(entered[job_id] - decided)
                    print(f"round {number}: {found[-1] * 1000:.1f} ms", flush=True)
                await _status(queue, job_id, "succeeded")
        finally:
            stop.set()
            await worker
    return found


async def main(args: argparse.Namespace) -> None:
    load = os.getloadavg()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    with temporary_postgres() as postgres:
        async with fresh_database(postgres) as dsn:
            found = await latencies(dsn, args.rounds, args.seed)
    ordered = sorted(found)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    print(f"\nfrom the decision to the resumed run at the tool ({len(found)} rounds):")
    print(f"| median | {statistics.median(found) * 1000:.1f} ms |")
    print(f"| 90th percentile | {p90 * 1000:.1f} ms |")
    print(f"| fastest, slowest | {ordered[0] * 1000:.1f} ms, {ordered[-1] * 1000:.1f} ms |")
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30, help="decisions timed (after one warm-up)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the random waits before each decision")
    asyncio.run(main(parser.parse_args()))
