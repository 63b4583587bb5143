"""What an MCP tool call costs through llm-do, against plain pydantic-ai with the same MCPToolset shared.

A real stdio MCP server (tests/mcp_servers/counter_server.py, fastmcp) answers every call. Variants:

- pydantic-ai: one `MCPToolset`, entered once, shared by every run (`Agent(toolsets=[it])`): the baseline;
- llm-do, global: the same kind of `MCPToolset` from a `Singleton` provider (owned and supervised by llm-do);
- llm-do, per call: a `Factory` provider, so each call starts (and ends) its own server process.

Each run is one agent run whose scripted model makes `--calls` tool calls (`read_count`), one per model
request, then answers. Rounds alternate the shared variants so noise hits them alike; medians are
reported, per run and per tool call. The per-call variant is timed on fewer runs: its cost is the
server's start-up and shutdown.

With `--count-calls` it also counts the Python function calls of this process per run (cProfile, every
task of the loop included: the client's session tasks too), which the machine's load does not change.

    python benchmarks/bench_mcp.py [--rounds 9] [--runs 20] [--calls 10] [--per-call-runs 5] [--count-calls]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from dependency_injector import containers, providers
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llm_do import AgentEntry, Runtime  # noqa: E402

SERVER = ROOT / "tests" / "mcp_servers" / "counter_server.py"


def model(calls: int) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(isinstance(message, ModelResponse) for message in messages)
        if done < calls:
            return ModelResponse(parts=[ToolCallPart("read_count", {})])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond)


def toolset() -> MCPToolset[Any]:
    return MCPToolset(SERVER)


class Servers(containers.DeclarativeContainer):
    shared = providers.Singleton(toolset)
    fresh = providers.Factory(toolset)


async def timed(runs: int, once: Any) -> float:
    started = time.perf_counter()
    for _ in range(runs):
        await once()
    return (time.perf_counter() - started) / runs


async def count_calls(runs: int, once: Any) -> float:
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(runs):
        await once()
    profile.disable()
    return float(pstats.Stats(profile).total_calls) / runs  # type: ignore[attr-defined]


async def main(rounds: int, runs: int, calls: int, per_call_runs: int, counting: bool) -> None:
    plain_toolset = toolset()
    plain = Agent(model(calls), toolsets=[plain_toolset])
    runtime = Runtime(
        Servers(),
        entries=[
            AgentEntry(Agent(model(calls)), name="global", toolsets=["shared"]),
            AgentEntry(Agent(model(calls)), name="per_call", toolsets=["fresh"]),
        ],
    )
    samples: dict[str, list[float]] = {"pydantic-ai": [], "llm-do global": []}
    async with plain_toolset, runtime:
        variants = {
            "pydantic-ai": lambda: plain.run("go"),
            "llm-do global": lambda: runtime.run("global", "go"),
        }
        for once in variants.values():  # warm up: both servers started, schemas cached
            await timed(3, once)
        for index in range(rounds):
            order = list(variants) if index % 2 == 0 else list(reversed(variants))
            for name in order:
                samples[name].append(await timed(runs, variants[name]))
        counts = {name: await count_calls(runs, once) for name, once in variants.items()} if counting else {}
        per_call = await timed(per_call_runs, lambda: runtime.run("per_call", "go"))
    base = statistics.median(samples["pydantic-ai"])
    print(f"{rounds} rounds x {runs} runs of {calls} MCP tool calls each (stdio server); medians")
    print(f"{'variant':<42}{'per run':>12}{'per tool call':>16}{'ratio':>8}")
    for name, values in samples.items():
        value = statistics.median(values)
        print(f"{name:<42}{value * 1e3:>10.2f}ms{value / calls * 1e3:>14.3f}ms{value / base:>8.3f}")
    ratios = [llm / plain_ for llm, plain_ in zip(samples["llm-do global"], samples["pydantic-ai"], strict=True)]
    print(f"per-round ratios llm-do global / pydantic-ai: {', '.join(f'{r:.3f}' for r in ratios)}")
    print(f"{'llm-do per call (a server per call)':<42}{per_call * 1e3:>10.2f}ms{'':>16}{per_call / base:>8.1f}")
    print(f"start-up and shutdown of a per-call stdio server: about {(per_call - base) * 1e3:.0f} ms per call")
    if counts:
        print(f"\nPython function calls per run ({runs} runs each)")
        for name, count in counts.items():
            print(f"{name:<42}{count:>12.0f}{count / counts['pydantic-ai']:>8.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--per-call-runs", type=int, default=5)
    parser.add_argument("--count-calls", action="store_true", help="also count Python function calls per run")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.runs, args.calls, args.per_call_runs, args.count_calls))
