"""What an evaluation's cases cost: N cases, each with its own database, run three ways, side by side.

- **at once, overrides**: one runtime; each case's run gets its database with `runtime.run(..., overrides=...)`
  (what `llm_do.testing.EntryTask` does), all cases at once;
- **at once, runtime per case**: what a user writes without per-run overrides and still right with cases at once:
  a container and a `Runtime` per case, the database overridden in that container, all cases at once;
- **one at a time**: one runtime and dependency-injector's own (process-wide) override, case after case (right
  only because nothing runs beside it).

Every case reads its own database (a SQLite file seeded per case) through a per-call toolset, with a scripted
model (one tool call, then its result as the answer); each variant checks that every case read its own. Rounds
interleave the variants, each starting one further on; the report gives the median time per case and the peak
of memory one variant's round allocated (tracemalloc), each with its ratio to "at once, overrides".

With `--latency 0.05` each model request waits 50 ms, as a real model's does: what running cases at once is for.

    python benchmarks/bench_evals.py [--cases 20] [--rounds 9] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path

from dependency_injector import providers
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from containers import AgentContainer
from llm_do import AgentEntry, Runtime, Toolset, tool


class Accounts:
    def __init__(self, path: str) -> None:
        self.path = path

    def balance(self, name: str) -> int:
        with sqlite3.connect(self.path) as conn:
            row = conn.execute("SELECT balance FROM accounts WHERE name = ?", (name,)).fetchone()
        return 0 if row is None else int(row[0])


class Teller(Toolset):
    def __init__(self, accounts: Accounts) -> None:
        self.accounts = accounts

    @tool(read_only=True)
    async def balance(self, name: str) -> int:
        """The balance of `name`."""
        await asyncio.sleep(0)  # the cases interleave here
        return self.accounts.balance(name)


class Bank(AgentContainer):
    accounts = providers.Singleton(Accounts, path=":memory:")
    teller = providers.Factory(Teller, accounts=accounts)


LATENCY = [0.0]
"""Seconds each model request waits, as a real model's answer does (`--latency`)."""


async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if LATENCY[0]:
        await asyncio.sleep(LATENCY[0])
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("balance", {"name": "alice"})])
    returned = [part.content for part in messages[-1].parts if isinstance(part, ToolReturnPart)]
    return ModelResponse(parts=[TextPart(str(returned[0]))])


teller = AgentEntry(Agent(FunctionModel(respond)), name="teller", toolsets=["teller"])


def seed(directory: Path, cases: int) -> list[Accounts]:
    made = []
    for index in range(cases):
        path = directory / f"case{index}.sqlite3"
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE accounts (name TEXT PRIMARY KEY, balance INTEGER)")
            conn.execute("INSERT INTO accounts VALUES ('alice', ?)", (index,))
        made.append(Accounts(str(path)))
    return made


async def at_once_overrides(databases: list[Accounts]) -> list[str]:
    async with Runtime(Bank(), entries=[teller]) as runtime:
        results = await asyncio.gather(
            *(runtime.run("teller", "balance?", overrides={Bank.accounts: db}) for db in databases)
        )
    return [str(result.output) for result in results]


async def at_once_runtime_per_case(databases: list[Accounts]) -> list[str]:
    async def case(db: Accounts) -> str:
        container = Bank()
        container.accounts.override(db)
        async with Runtime(container, entries=[teller]) as runtime:
            return str((await runtime.run("teller", "balance?")).output)

    return list(await asyncio.gather(*(case(db) for db in databases)))


async def one_at_a_time(databases: list[Accounts]) -> list[str]:
    container = Bank()
    outputs = []
    async with Runtime(container, entries=[teller]) as runtime:
        for db in databases:
            with container.accounts.override(db):
                outputs.append(str((await runtime.run("teller", "balance?")).output))
    return outputs


VARIANTS: dict[str, Callable[[list[Accounts]], Awaitable[list[str]]]] = {
    "at once, overrides": at_once_overrides,
    "at once, runtime per case": at_once_runtime_per_case,
    "one at a time": one_at_a_time,
}


async def measure(cases: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        databases = seed(Path(directory), cases)
        expected = [str(index) for index in range(cases)]
        times: dict[str, list[float]] = {name: [] for name in VARIANTS}
        peaks: dict[str, list[int]] = {name: [] for name in VARIANTS}
        names = list(VARIANTS)
        for name in names:  # warm-up, and each variant right
            assert await VARIANTS[name](databases) == expected, name
        for round_ in range(rounds):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                tracemalloc.start()
                started = time.perf_counter()
                outputs = await VARIANTS[name](databases)
                elapsed = time.perf_counter() - started
                peaks[name].append(tracemalloc.get_traced_memory()[1])
                tracemalloc.stop()
                assert outputs == expected, name
                times[name].append(elapsed / cases)
    base_time = statistics.median(times[names[0]])
    base_peak = statistics.median(peaks[names[0]])
    latency = f", {LATENCY[0] * 1000:.0f} ms per model request" if LATENCY[0] else ", the model answering at once"
    print(f"{cases} cases{latency}, {rounds} rounds (median per case; peak memory of a round, tracemalloc)")
    print(f"{'variant':28} {'ms/case':>8} {'ratio':>6} {'peak KiB':>9} {'ratio':>6}")
    for name in names:
        per_case, peak = statistics.median(times[name]), statistics.median(peaks[name])
        print(
            f"{name:28} {per_case * 1000:8.2f} {per_case / base_time:6.2f} {peak / 1024:9.0f} {peak / base_peak:6.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cases", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each model request waits")
    arguments = parser.parse_args()
    LATENCY[0] = arguments.latency
    asyncio.run(measure(arguments.cases, arguments.rounds))


if __name__ == "__main__":
    main()
