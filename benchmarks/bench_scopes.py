"""What per-call isolation costs: llm-do runs against bare pydantic-ai runs, measured side by side.

The agent variants run the same scripted agent (one tool call, then text) with three toolsets of
one tool each; the two "no agent" variants isolate llm-do's own machinery (a run in its own task
and context, a CallScope resolving, entering and tearing down three per-call toolsets). Rounds
interleave the variants so machine noise hits all of them alike; the report gives the median
time per run and the ratio to the bare pydantic-ai baseline.

    python benchmarks/bench_scopes.py [--rounds 15] [--runs 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from llm_do import AgentEntry, CallScope, Runtime, Toolset, entry, tool


def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("read_a", {"key": "k"})])
    return ModelResponse(parts=[TextPart("done")])


def make_tools(suffix: str) -> Callable[..., Any]:
    def read(key: str) -> str:
        """Read a key."""
        return key

    read.__name__ = f"read_{suffix}"
    return read


class ToolsA(Toolset):
    @tool
    def read_a(self, key: str) -> str:
        """Read a key."""
        return key


class ToolsB(Toolset):
    @tool
    def read_b(self, key: str) -> str:
        """Read a key."""
        return key


class ToolsC(Toolset):
    @tool
    def read_c(self, key: str) -> str:
        """Read a key."""
        return key


async def main(rounds: int, runs: int) -> None:
    agent = Agent(FunctionModel(script))
    shared = [FunctionToolset([make_tools(s)]) for s in "abc"]

    async def bare_shared() -> None:
        await agent.run("go", toolsets=shared)

    shared_classes = [ToolsA(), ToolsB(), ToolsC()]

    async def bare_shared_toolset_classes() -> None:
        await agent.run("go", toolsets=shared_classes)

    async def bare_fresh_function_toolsets() -> None:
        await agent.run("go", toolsets=[FunctionToolset([make_tools(s)]) for s in "abc"])

    runtime = Runtime(
        None,
        entries=[AgentEntry(agent, name="job", toolsets=["a", "b", "c"])],
        toolsets={"a": ToolsA, "b": ToolsB, "c": ToolsC},
    )

    async def llm_do_per_call() -> None:
        await runtime.run("job", "go")

    @entry(toolsets=["a", "b", "c"])
    async def noop(scope: CallScope, input_data: str) -> None:
        return None

    scoped = Runtime(None, entries=[noop], toolsets={"a": ToolsA, "b": ToolsB, "c": ToolsC})

    async def by_hand() -> None:
        ToolsA(), ToolsB(), ToolsC()

    async def llm_do_scope_only() -> None:
        await scoped.run("noop", "go")

    variants: dict[str, Callable[[], Awaitable[None]]] = {
        "pydantic-ai, shared toolsets (baseline)": bare_shared,
        "pydantic-ai, fresh FunctionToolsets per run": bare_fresh_function_toolsets,
        "pydantic-ai, shared llm_do.Toolset instances": bare_shared_toolset_classes,
        "llm-do Runtime.run, fresh Toolsets per call": llm_do_per_call,
        "no agent: three Toolsets built by hand": by_hand,
        "no agent: llm-do run + scope, three Toolsets": llm_do_scope_only,
    }
    for variant in variants.values():  # warm up: schemas, imports, caches
        for _ in range(20):
            await variant()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, variant in variants.items():
            start = time.perf_counter()
            for _ in range(runs):
                await variant()
            samples[name].append((time.perf_counter() - start) / runs)
    await runtime.aclose()
    await scoped.aclose()
    baseline = statistics.median(samples["pydantic-ai, shared toolsets (baseline)"])
    print(f"{rounds} rounds x {runs} runs, median per run")
    print(f"{'variant':48} {'per run':>10} {'ratio':>7}")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"{name:48} {median * 1e6:8.1f}us {median / baseline:7.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--runs", type=int, default=200)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rounds, arguments.runs))
