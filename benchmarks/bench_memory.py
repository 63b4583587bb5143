"""Does a long-lived Runtime grow per run? Memory after many runs, against plain pydantic-ai.

Each variant runs the same scripted agent (one tool call, then text) many times on one long-lived
object (a `Runtime` with per-run and per-call resources and a global pool that re-arms an idle
timer from a tool, as asyncpg does; or a plain `Agent`). After a warm-up it records the memory
traced by `tracemalloc` and the number of objects the garbage collector tracks at checkpoints, and
reports the growth per run from the middle checkpoint to the last. Flat means no growth.

    python benchmarks/bench_memory.py [--runs 20000] [--checkpoints 5]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

from dependency_injector import providers
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from containers import AgentContainer
from llm_do import AgentEntry, RunLocalSingleton, Runtime, Toolset, tool


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
    print(f"\n{name}")
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


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=20000)
    parser.add_argument("--checkpoints", type=int, default=5)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.runs, arguments.checkpoints))
