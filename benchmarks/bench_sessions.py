"""What sessions cost, and what 10,000 of them leave behind once idle.

Each session is opened by its own id, runs one scripted agent run (one tool call of a per-session
toolset, then text) and idles out. After a warm-up of 200 sessions it records the objects the
garbage collector tracks and the memory `tracemalloc` traces, runs `--sessions` more, waits until
every one has closed, and reports the growth: flat means nothing of a session outlives it. The
history store keeps no conversation (`InMemoryHistoryStore(limit=0)`), so what is measured is the
sessions themselves; the default store keeps each conversation for the runtime's life, which the
last line reports per conversation.

It also times a run in a session (opened, one run, closed) against a run given no session, side by
side, round by round.

    python benchmarks/bench_sessions.py [--sessions 10000] [--rounds 5] [--runs 200]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
import tracemalloc
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from llm_do import (
    AgentEntry,
    InMemoryHistoryStore,
    Runtime,
    RuntimeConfig,
    Scope,
    ToolPolicy,
    Toolset,
    ToolsetSpec,
    tool,
)


def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("note", {"text": "n"})])
    return ModelResponse(parts=[TextPart("done")])


class Notes(Toolset):
    """Per session."""

    default_policy = ToolPolicy()  # its calls run without asking

    def __init__(self) -> None:
        self.notes: list[str] = []

    @tool
    def note(self, text: str) -> str:
        """Keep a note."""
        self.notes.append(text)
        return text


def runtime(store: Any) -> Runtime:
    clerk = AgentEntry(Agent(FunctionModel(script)), name="clerk", toolsets=["notes"])
    return Runtime(
        None,
        entries=[clerk],
        toolsets={"notes": ToolsetSpec(Notes, Scope.PER_SESSION)},
        config=RuntimeConfig(session_idle_timeout=0.01),
        history_store=store,
    )


async def sessions(served: Runtime, first: int, count: int) -> None:
    opened = []
    for number in range(first, first + count):
        session = await served.session(f"user-{number}")
        await session.run("clerk", "go")
        opened.append(session)
    await asyncio.gather(*(session.wait_closed() for session in opened))
    opened.clear()
    for _ in range(3):
        gc.collect()
        await asyncio.sleep(0)


async def memory(count: int) -> None:
    async with runtime(InMemoryHistoryStore(limit=0)) as served:
        await sessions(served, 0, 200)
        tracemalloc.start()
        gc.collect()
        objects, (traced, _) = len(gc.get_objects()), tracemalloc.get_traced_memory()
        await sessions(served, 200, count)
        gc.collect()
        grown_objects, (grown, _) = len(gc.get_objects()) - objects, tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"after {count:,} sessions idled out: {grown_objects:+,} objects, {grown - traced:+,} bytes traced")
        print(f"open sessions: {len(served.sessions)}")
    store = InMemoryHistoryStore()
    async with runtime(store) as served:
        tracemalloc.start()
        before, _ = tracemalloc.get_traced_memory()
        await sessions(served, 0, 1000)
        after, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"the default store keeps about {(after - before) / 1000:,.0f} bytes per conversation of one run")


async def timing(rounds: int, runs: int) -> None:
    async with runtime(InMemoryHistoryStore(limit=0)) as served:
        counter = iter(range(10**9))

        async def in_a_session() -> None:
            session = await served.session(f"s-{next(counter)}")
            await session.run("clerk", "go")
            await session.aclose()

        async def alone() -> None:
            await served.run("clerk", "go")

        variants = {"a run given no session (baseline)": alone, "a session: opened, one run, closed": in_a_session}
        for variant in variants.values():
            for _ in range(20):
                await variant()
        samples: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(rounds):
            for name, variant in variants.items():
                start = time.process_time()
                for _ in range(runs):
                    await variant()
                samples[name].append((time.process_time() - start) / runs)
        baseline = statistics.median(samples[next(iter(variants))])
        print(f"\n{rounds} rounds x {runs} runs, median CPU time per run")
        for name, values in samples.items():
            median = statistics.median(values)
            print(f"{name:40} {median * 1e3:8.3f} ms {median / baseline:7.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=200)
    arguments = parser.parse_args()
    asyncio.run(memory(arguments.sessions))
    asyncio.run(timing(arguments.rounds, arguments.runs))
