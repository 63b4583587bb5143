"""Sync tools off the event loop: does the loop stay free, and what does the hop to the run's thread cost?

Two questions, each measured side by side with plain pydantic-ai, rounds interleaving the variants so that
machine noise hits them alike (each round starts one variant further on), medians reported:

1. The loop during a slow sync tool. A ticker task wakes every 10 ms and counts its wake-ups while a 0.3 s sync
   tool runs (`time.sleep`, standing for a blocking client or a CPU-bound step): llm-do's `Toolset` sync tool (on
   its run's own thread), the same tool declared `@tool(thread=False)` (on the loop, as every sync tool ran
   before), and pydantic-ai's own `FunctionToolset` sync tool (in its worker threads), the baseline. A free loop
   ticks about 30 times; a blocked one only before and after the tool.
2. What the hop costs a quick sync tool (it returns its argument). A run whose scripted model (an `async`
   function: no hop of its own) calls the tool once, then answers: the tool on its run's thread against the same
   tool on the loop, and pydantic-ai's `FunctionToolset` sync tool, which hops to its worker threads, against the
   same function made `async`. Then each further call, without a model: an `@entry` that calls the tool 1 or 51
   times (`scope.call_tool`), on its run's thread against on the loop; the difference per call is the hop.

With `--cpu-time` the timings are of the CPU this process uses, in all its threads (the hop's work on both sides of
it), not of the clock on the wall, which the other work of a busy machine stretches.

    python benchmarks/bench_sync_tools.py [--rounds 15] [--runs 100] [--tick-rounds 5] [--cpu-time]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from llm_do import AgentEntry, CallScope, Runtime, Toolset, entry, tool

Variant = Callable[[], Awaitable[Any]]
SLOW = 0.3
TICK = 0.01


def calling(name: str) -> FunctionModel:
    """A scripted model (async: pydantic-ai runs it on the loop) that calls tool `name` once, then answers."""

    async def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart(name, {"key": "k"})])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(script)


# -- 1. the loop during a slow sync tool ------------------------------------------------------------

inside = threading.Event()
"""Set while the slow tool runs: the ticker counts only then."""


def slow_body(key: str) -> str:
    inside.set()
    try:
        time.sleep(SLOW)
    finally:
        inside.clear()
    return key


class SlowOffLoop(Toolset):
    @tool(read_only=True)
    def slow(self, key: str) -> str:
        """Work for 0.3 s."""
        return slow_body(key)


class SlowOnLoop(Toolset):
    @tool(read_only=True, thread=False)
    def slow(self, key: str) -> str:
        """Work for 0.3 s."""
        return slow_body(key)


def slow(key: str) -> str:
    """Work for 0.3 s."""
    return slow_body(key)


def slow_variants(runtimes: list[Runtime]) -> dict[str, Variant]:
    plain = Agent(calling("slow"), name="job", toolsets=[FunctionToolset([slow])])
    off = Runtime(
        None, entries=[AgentEntry(Agent(calling("slow")), name="job", toolsets=["t"])], toolsets={"t": SlowOffLoop}
    )
    on = Runtime(
        None, entries=[AgentEntry(Agent(calling("slow")), name="job", toolsets=["t"])], toolsets={"t": SlowOnLoop}
    )
    runtimes += [off, on]
    return {
        "pydantic-ai, FunctionToolset sync tool (baseline)": lambda: plain.run("go"),
        "llm-do Toolset sync tool, on its run's thread": lambda: off.run("job", "go"),
        "llm-do Toolset sync tool, thread=False (on the loop)": lambda: on.run("job", "go"),
    }


async def ticks_during(variant: Variant) -> int:
    """How often a 10 ms ticker woke up while the slow tool of one run of `variant` ran."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(TICK)
            if inside.is_set():
                ticks += 1

    ticking = asyncio.create_task(ticker())
    try:
        await variant()
    finally:
        ticking.cancel()
    return ticks


async def measure_ticks(variants: dict[str, Variant], rounds: int) -> dict[str, float]:
    samples: dict[str, list[int]] = {name: [] for name in variants}
    names = list(variants)
    for round_ in range(rounds):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(await ticks_during(variants[name]))
    return {name: statistics.median(values) for name, values in samples.items()}


# -- 2. what the hop costs a quick sync tool --------------------------------------------------------


class QuickOffLoop(Toolset):
    @tool(read_only=True)
    def quick(self, key: str) -> str:
        """Return the key."""
        return key


class QuickOnLoop(Toolset):
    @tool(read_only=True, thread=False)
    def quick(self, key: str) -> str:
        """Return the key."""
        return key


def quick(key: str) -> str:
    """Return the key."""
    return key


async def quick_async(key: str) -> str:
    """Return the key."""
    return key


def quick_variants(runtimes: list[Runtime]) -> dict[str, Variant]:
    plain_async = Agent(calling("quick_async"), name="job", toolsets=[FunctionToolset([quick_async])])
    plain_sync = Agent(calling("quick"), name="job", toolsets=[FunctionToolset([quick])])
    job = AgentEntry(Agent(calling("quick")), name="job", toolsets=["t"])
    on = Runtime(None, entries=[job], toolsets={"t": QuickOnLoop})
    off = Runtime(None, entries=[job], toolsets={"t": QuickOffLoop})
    runtimes += [on, off]
    return {
        "llm-do, sync tool thread=False (on the loop) (baseline)": lambda: on.run("job", "go"),
        "pydantic-ai, async function tool (baseline)": lambda: plain_async.run("go"),
        "llm-do, sync tool on its run's thread": lambda: off.run("job", "go"),
        "pydantic-ai, sync function tool (its worker threads)": lambda: plain_sync.run("go"),
    }


def hop_variants(runtimes: list[Runtime]) -> dict[str, Variant]:
    @entry(toolsets=["t"])
    async def calls(scope: CallScope, times: int) -> None:
        for _ in range(times):
            await scope.call_tool("quick", {"key": "k"})

    on = Runtime(None, entries=[calls], toolsets={"t": QuickOnLoop})
    off = Runtime(None, entries=[calls], toolsets={"t": QuickOffLoop})
    runtimes += [on, off]
    return {
        "1 call, on the loop (baseline)": lambda: on.run("calls", 1),
        "1 call, on its run's thread (started for it)": lambda: off.run("calls", 1),
        "51 calls, on the loop": lambda: on.run("calls", 51),
        "51 calls, on its run's thread": lambda: off.run("calls", 51),
    }


async def measure(
    variants: dict[str, Variant], rounds: int, runs: int, clock: Callable[[], float] = time.perf_counter
) -> dict[str, float]:
    for variant in variants.values():  # warm up: schemas, imports, caches
        for _ in range(20):
            await variant()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for round_ in range(rounds):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            variant = variants[name]
            start = clock()
            for _ in range(runs):
                await variant()
            samples[name].append((clock() - start) / runs)
    return {name: statistics.median(values) for name, values in samples.items()}


def report(title: str, unit: str, values: dict[str, float], shown: Callable[[float], str], baselines: int = 1) -> None:
    """Each variant's value and its ratio to each of the first `baselines` variants."""
    bases = list(values.values())[:baselines]
    print(f"\n{title}")
    heads = " ".join(f"{'ratio' if baselines == 1 else f'vs #{i + 1}':>7}" for i in range(baselines))
    print(f"{'variant':58} {unit:>11} {heads}")
    for name, value in values.items():
        ratios = " ".join(f"{value / base:7.3f}" if base > 0 else " " * 7 for base in bases)
        print(f"{name:58} {shown(value):>11} {ratios}")


async def main(rounds: int, runs: int, tick_rounds: int, cpu_time: bool) -> None:
    runtimes: list[Runtime] = []
    clock = time.process_time if cpu_time else time.perf_counter
    ticks = await measure_ticks(slow_variants(runtimes), tick_rounds)
    quick_runs = await measure(quick_variants(runtimes), rounds, runs, clock)
    hops = await measure(hop_variants(runtimes), rounds, max(1, runs // 5), clock)
    for runtime in runtimes:
        await runtime.aclose()
    what = "CPU time (all threads)" if cpu_time else "time"
    print(f"ticks: {tick_rounds} rounds, median; timings: {rounds} rounds x {runs} runs, median {what} per run")
    report(f"Ticks of a {TICK * 1000:.0f} ms ticker during a {SLOW} s sync tool", "ticks", ticks, lambda v: f"{v:.0f}")
    in_us: Callable[[float], str] = lambda value: f"{value * 1e6:9.1f}us"  # noqa: E731
    report("One agent run: a quick sync tool called once, then text", "per run", quick_runs, in_us, 2)
    report("No model: an @entry calling a quick sync tool (scope.call_tool)", "per run", hops, in_us)
    on = (hops["51 calls, on the loop"] - hops["1 call, on the loop (baseline)"]) / 50
    off = (hops["51 calls, on its run's thread"] - hops["1 call, on its run's thread (started for it)"]) / 50
    first = hops["1 call, on its run's thread (started for it)"] - hops["1 call, on the loop (baseline)"]
    print(
        f"\nper further call: {on * 1e6:.1f}us on the loop, {off * 1e6:.1f}us on its run's thread "
        f"(the hop: {(off - on) * 1e6:.1f}us, x{off / on:.2f}); a run's first sync tool call adds {first * 1e6:.1f}us "
        "(the thread started and ended)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--tick-rounds", type=int, default=5)
    parser.add_argument(
        "--cpu-time", action="store_true", help="time this process's CPU (all its threads), not the clock on the wall"
    )
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rounds, arguments.runs, arguments.tick_rounds, arguments.cpu_time))
