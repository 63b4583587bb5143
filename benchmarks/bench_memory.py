"""Does a long-lived Runtime grow per run? Memory after many runs, against plain pydantic-ai.

Each variant runs the same scripted agent (one tool call, then text) many times on one long-lived
object (a `Runtime` with per-run and per-call resources and a global pool that re-arms an idle
timer from a tool, as asyncpg does; or a plain `Agent`). After a warm-up it records the memory
traced by `tracemalloc` and the number of objects the garbage collector tracks at checkpoints, and
reports the growth per run from the middle checkpoint to the last. Flat means no growth.

`--mix` measures the bank service's runs instead (examples/service: the llm-do teller against its
plain pydantic-ai twin `bank.plain`), on a real asyncpg pool over a throwaway PostgreSQL server,
with the mix of the service benchmark at `--concurrency` in flight: of ten runs, eight commit, one
fails mid-transaction (the run raises, its transaction is rolled back) and one forgets to commit
(rolled back when the run ends). asyncpg arms timers inside the runs (a pool connection's idle
timer on every release, a statement cache entry's expiry), each holding a copy of the run's
context. It reports gc-tracked objects, the types that grew most, and the process's RSS.

    python benchmarks/bench_memory.py [--runs 20000] [--checkpoints 5]
    python benchmarks/bench_memory.py --mix [--runs 20000] [--concurrency 50] [--pool-size 20]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import sys
import tracemalloc
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import asyncpg
from dependency_injector import providers
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from containers import AgentContainer
from llm_do import AgentEntry, RunLocalSingleton, Runtime, ToolPolicy, Toolset, tool


def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("record", {"note": "n"})])
    return ModelResponse(parts=[TextPart("done")])


class Pool:
    """Global: re-arms a 300 s idle timer on every release, holding the context of the call that released."""

    def __init__(self) -> None:
        self.timer: asyncio.TimerHandle | None = None

    def release(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = asyncio.get_running_loop().call_later(300, lambda: None)


class Audit:
    def __init__(self) -> None:
        self.lines: list[str] = []


class Notes(Toolset):
    default_policy = ToolPolicy()  # its calls run without asking

    def __init__(self, pool: Pool, audit: Audit) -> None:
        self.pool, self.audit = pool, audit

    @tool
    def record(self, note: str) -> str:
        """Record a note."""
        self.audit.lines.append(note)
        self.pool.release()
        return "ok"


class App(AgentContainer):
    pool = providers.Singleton(Pool)
    audit = RunLocalSingleton(Audit)
    notes = providers.Factory(Notes, pool=pool, audit=audit)


async def measure(run: Callable[[], Awaitable[Any]], runs: int, checkpoints: int) -> list[tuple[int, int, int]]:
    """(runs done, traced bytes, gc-tracked objects) at each checkpoint, after a warm-up."""
    for _ in range(200):
        await run()
    points: list[tuple[int, int, int]] = []
    step = runs // checkpoints
    for done in range(0, runs + 1, step):
        if done:
            for _ in range(step):
                await run()
        await asyncio.sleep(0)
        gc.collect()
        points.append((done, tracemalloc.get_traced_memory()[0], len(gc.get_objects())))
    return points


def show(name: str, points: list[tuple[int, int, int]]) -> None:
    # From the middle checkpoint on: earlier ones may still see bounded start-up effects (asyncio keeps
    # cancelled timers in its heap until it purges them, each with the context it was armed in).
    (first_runs, first_bytes, first_objects), (last_runs, last_bytes, last_objects) = (
        points[len(points) // 2],
        points[-1],
    )
    span = last_runs - first_runs
    print(f"\n{name}", flush=True)
    for done, traced, objects in points:
        print(f"  after {done:6d} runs: {traced / 1024:9.1f} KiB traced, {objects:7d} objects")
    print(
        f"  growth from run {first_runs} to {last_runs}: {(last_bytes - first_bytes) / span:+.1f} bytes/run, "
        f"{(last_objects - first_objects) / span:+.4f} objects/run"
    )


async def main(runs: int, checkpoints: int) -> None:
    tracemalloc.start()
    agent = Agent(FunctionModel(script))
    plain_pool = Pool()

    async def plain() -> None:
        await agent.run("go", toolsets=[Notes(plain_pool, Audit())])

    show("pydantic-ai, a fresh toolset per run", await measure(plain, runs, checkpoints))
    app = App()
    async with Runtime(app, entries=[AgentEntry(agent, name="job", toolsets=["notes"])]) as runtime:
        show("llm-do, one Runtime for every run", await measure(lambda: runtime.run("job", "go"), runs, checkpoints))
        app.pool().release()


# -- the bank service's mix on a real asyncpg pool ------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
ACCOUNTS = [f"acct{number:02d}" for number in range(20)]
START_BALANCE = 10**9

Point = tuple[int, int, int, Counter[str], int, int]
"""(runs done, gc-tracked objects, RSS in bytes, objects by type, objects once asyncio has dropped its
cancelled timers, bytes traced by tracemalloc or 0 when not tracing) at a checkpoint."""


def mixed_prompts(variant: str, count: int, seed: int) -> list[str]:
    """Transfer requests (the teller's prompt): of ten, one fails mid-transaction, one forgets to commit."""
    from bank.model import TransferRequest

    rng = random.Random(seed)
    prompts = []
    for number in range(count):
        source, target = rng.sample(ACCOUNTS, 2)
        kind = rng.randrange(10)
        amount = START_BALANCE * len(ACCOUNTS) + 1 if kind == 0 else 1  # more than any balance: refused
        request = TransferRequest(
            reference=f"{variant}-{seed}-{number}",  # a transfer is made once per reference
            source=source,
            target=target,
            amount=amount,
            forget_commit=kind == 1,
        )
        prompts.append(request.model_dump_json())
    return prompts


def rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


async def measure_mix(
    variant: str, run: Callable[[str], Awaitable[Any]], runs: int, checkpoints: int, concurrency: int
) -> list[Point]:
    """Checkpoints of `runs` runs of the mix, `concurrency` in flight, after a warm-up of 500."""

    async def batch(prompts: list[str]) -> None:
        pending = iter(prompts)

        async def worker() -> None:
            for prompt in pending:
                await run(prompt)

        await asyncio.gather(*(worker() for _ in range(concurrency)))

    await batch(mixed_prompts(variant, 500, seed=0))
    points: list[Point] = []
    step = runs // checkpoints
    for done in range(0, runs + 1, step):
        if done:
            await batch(mixed_prompts(variant, step, seed=done))
        await asyncio.sleep(0)
        gc.collect()
        objects = gc.get_objects()
        by_type = Counter(f"{type(obj).__module__}.{type(obj).__qualname__}" for obj in objects)
        count, resident = len(objects), rss()
        del objects
        await forget_cancelled_timers()
        traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0
        points.append((done, count, resident, by_type, len(gc.get_objects()), traced))
    return points


async def forget_cancelled_timers() -> None:
    """Make asyncio drop the cancelled timers it still keeps (it drops them all once more than half of
    its timers are cancelled), each with the context of the run that armed it; what is left is held
    by live objects and live timers only."""
    loop = asyncio.get_running_loop()
    for timer in [loop.call_later(3600, lambda: None) for _ in range(2000)]:
        timer.cancel()
    await asyncio.sleep(0)
    gc.collect()


def show_mix(name: str, points: list[Point]) -> None:
    first, last = points[len(points) // 2], points[-1]
    span = last[0] - first[0]
    print(f"\n{name}", flush=True)
    for done, objects, resident, _, purged, traced in points:
        print(
            f"  after {done:6d} runs: {objects:7d} objects ({purged:7d} once asyncio drops its cancelled timers), "
            f"RSS {resident / 2**20:6.1f} MiB" + (f", {traced / 1024:9.1f} KiB traced" if traced else "")
        )
    growth = last[3] - first[3]
    growth.pop("collections.Counter", None)  # the checkpoints' own counts by type
    grown = growth.most_common(5)
    print(
        f"  growth from run {first[0]} to {last[0]}: {(last[1] - first[1]) / span:+.4f} objects/run, "
        f"{(last[4] - first[4]) / span:+.4f} once asyncio drops its cancelled timers, "
        f"RSS {(last[2] - first[2]) / span:+.1f} bytes/run, traced {(last[5] - first[5]) / span:+.1f} bytes/run; "
        "types that grew most: " + (", ".join(f"{kind} +{count}" for kind, count in grown) or "none")
    )


async def mix_main(dsn: str, args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT / "examples" / "service"))
    os.environ["LLM_DO_DATABASE_URL"] = dsn
    os.environ["LLM_DO_POOL_SIZE"] = str(args.pool_size)
    from bank import ledger, plain
    from bank.wiring import Bank, open_pool, teller

    from llm_do import run_report

    print(f"{args.runs} runs of the mix at {args.concurrency} in flight, asyncpg pools of {args.pool_size}", flush=True)
    async with asynccontextmanager(open_pool)(dsn, args.pool_size) as pool:
        await pool.executemany(
            "INSERT INTO accounts (name, balance) VALUES ($1, $2)", [(a, START_BALANCE) for a in ACCOUNTS]
        )

        async def plain_run(prompt: str) -> list[str]:
            deps = plain.Deps(pool)
            with suppress(ledger.BankError):  # the service answers 409 with the audit
                await plain._run(deps, prompt)
            return deps.audit.lines

        if args.only != "llm-do":
            show_mix(
                "pydantic-ai (bank.plain), its own pool",
                await measure_mix("pydantic-ai", plain_run, args.runs, args.checkpoints, args.concurrency),
            )

    bank = Bank()
    started = bank.init_resources()
    if started is not None:
        await started
    try:
        async with Runtime(bank, entries=[teller]) as runtime:

            async def llm_do_run(prompt: str) -> list[str]:
                try:
                    result = await runtime.run("teller", prompt)
                except ledger.BankError as error:
                    report = run_report(error)
                    return [] if report is None else list(report.per_run["audit"].lines)
                return list(result.per_run["audit"].lines)

            if args.only != "pydantic-ai":
                show_mix(
                    "llm-do (bank.app's Runtime), its own pool",
                    await measure_mix("llm-do", llm_do_run, args.runs, args.checkpoints, args.concurrency),
                )
    finally:
        stopped = bank.shutdown_resources()
        if stopped is not None:
            await stopped
        conn = await asyncpg.connect(dsn)
        try:
            total = await conn.fetchval("SELECT sum(balance) FROM accounts")
        finally:
            await conn.close()
    print(f"\nmoney conserved: {'yes' if total == START_BALANCE * len(ACCOUNTS) else 'NO'}")


async def create_database(admin_dsn: str, name: str) -> None:
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


def run_mix(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.postgres import temporary_postgres

    with temporary_postgres() as postgres:
        name = postgres.new_database_name()
        asyncio.run(create_database(postgres.dsn(), name))
        asyncio.run(mix_main(postgres.dsn(name), args))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=20000)
    parser.add_argument("--checkpoints", type=int, default=5)
    parser.add_argument("--mix", action="store_true", help="the bank service's mix on a real asyncpg pool")
    parser.add_argument("--concurrency", type=int, default=50, help="with --mix: runs in flight")
    parser.add_argument("--pool-size", type=int, default=20, help="with --mix: connections in each asyncpg pool")
    parser.add_argument("--only", choices=["llm-do", "pydantic-ai"], help="with --mix: measure one variant only")
    parser.add_argument("--trace", action="store_true", help="with --mix: also trace memory (tracemalloc; slower)")
    arguments = parser.parse_args()
    if arguments.mix:
        if arguments.trace:
            tracemalloc.start()
        run_mix(arguments)
    else:
        asyncio.run(main(arguments.runs, arguments.checkpoints))
