"""What per-call isolation costs: llm-do runs against plain pydantic-ai runs, measured side by side.

Every agent variant runs the same scripted agent (one tool call, then text) with three tools of its
own. Two baselines: the fairest plain pydantic-ai a user could write, sharing the same
`llm_do.Toolset` objects across runs (no isolation at all), and the natural one, pydantic-ai as its
docs show it, the three tools registered on the agent (`tools=`). The nested variants run a parent
agent that calls a child agent as a tool, llm-do's agent-as-tool against the same nesting written by
hand (a tool of the parent that runs the child with `usage=ctx.usage`): with the shared toolsets, and
naturally (`@agent.tool` on the parent, both agents' tools registered on them). A third baseline is the
natural one given the limits llm-do holds every agent run to by default (`max_tokens`, `request_timeout`,
a request limit and a run `timeout`, as pydantic-ai's own settings): the same work, like for like. The "no agent"
variants isolate llm-do's own machinery: a run (its own task and context) with one call, and each
further call of that run, each call resolving, entering, lending and tearing down three per-call
toolsets. Rounds interleave the variants so machine noise hits all of them alike, each round starting
one variant further on (a variant runs after another's leftovers: its cancelled timers, its garbage);
the report gives the median time per run and its ratio to each baseline.

With `--count-calls` it reports instead the Python function calls per run (cProfile), which no
machine noise changes: a cross-check of the timings on a busy machine. With `--cpu-time` it times
the CPU this process uses (in all its threads) instead of the clock on the wall, so that the time
other work on the machine takes between rounds does not count. With `--alone VARIANT` it runs one variant
(a part of its name) `--runs` times after a warm-up, measuring nothing: run it under
`valgrind --tool=callgrind --instr-atstart=no`, and it turns callgrind's counting on for those runs only,
for the machine instructions a run costs, which no machine noise changes either (divide by `--runs`).

    python benchmarks/bench_scopes.py [--rounds 15] [--runs 200] [--count-calls | --cpu-time | --alone VARIANT]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import statistics
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import UsageLimits

from llm_do import AgentEntry, CallScope, Runtime, Toolset, entry, tool

Variant = Callable[[], Awaitable[Any]]


def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("read_a", {"key": "k"})])
    return ModelResponse(parts=[TextPart("done")])


def parent_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("child", {"input": "go"})])
    return ModelResponse(parts=[TextPart("done")])


def make_tools(suffix: str) -> Callable[..., Any]:
    def read(key: str) -> str:
        """Read a key."""
        return key

    read.__name__ = f"read_{suffix}"
    return read


class ToolsA(Toolset):
    @tool(read_only=True)  # reads: runs without asking, as the baselines' tools do
    def read_a(self, key: str) -> str:
        """Read a key."""
        return key


class ToolsB(Toolset):
    @tool(read_only=True)  # reads: runs without asking, as the baselines' tools do
    def read_b(self, key: str) -> str:
        """Read a key."""
        return key


class ToolsC(Toolset):
    @tool(read_only=True)  # reads: runs without asking, as the baselines' tools do
    def read_c(self, key: str) -> str:
        """Read a key."""
        return key


PER_CALL = {"a": ToolsA, "b": ToolsB, "c": ToolsC}


SAME_LIMITS: dict[str, Any] = {
    "model_settings": {"max_tokens": 8192, "request_timeout": 600.0},
    "usage_limits": UsageLimits(request_limit=50),
    "timeout": 3600.0,
}
"""What llm-do holds every agent run to by default (docs/local-models.md), written as pydantic-ai's own settings:
a third baseline, the natural one doing the same work."""


def flat_variants(runtimes: list[Runtime]) -> dict[str, Variant]:
    agent = Agent(FunctionModel(script), name="job")  # named, as llm-do's entry names its agent
    natural = Agent(FunctionModel(script), name="job", tools=[make_tools(s) for s in "abc"])
    shared_toolsets = [ToolsA(), ToolsB(), ToolsC()]
    shared_functions = [FunctionToolset([make_tools(s)]) for s in "abc"]
    job = AgentEntry(Agent(FunctionModel(script)), name="job", toolsets=["a", "b", "c"])
    runtime = Runtime(None, entries=[job], toolsets=PER_CALL)
    runtimes.append(runtime)
    return {
        "pydantic-ai, shared Toolset objects (baseline)": lambda: agent.run("go", toolsets=shared_toolsets),
        "pydantic-ai, tools on the agent (natural baseline)": lambda: natural.run("go"),
        "natural, with llm-do's default limits": lambda: natural.run("go", **SAME_LIMITS),
        "pydantic-ai, shared FunctionToolsets": lambda: agent.run("go", toolsets=shared_functions),
        "pydantic-ai, fresh FunctionToolsets per run": lambda: agent.run(
            "go", toolsets=[FunctionToolset([make_tools(s)]) for s in "abc"]
        ),
        "llm-do Runtime.run, fresh Toolsets per call": lambda: runtime.run("job", "go"),
    }


def nested_variants(runtimes: list[Runtime]) -> dict[str, Variant]:
    child = Agent(FunctionModel(script), name="child")
    shared_toolsets = [ToolsA(), ToolsB(), ToolsC()]

    async def ask_child(ctx: RunContext[None], input: str) -> str:
        """Ask the child agent."""
        return (await child.run(input, toolsets=shared_toolsets, usage=ctx.usage)).output

    by_hand = Agent(FunctionModel(parent_script), tools=[Tool(ask_child, name="child", takes_ctx=True)])

    natural_child = Agent(FunctionModel(script), name="child", tools=[make_tools(s) for s in "abc"])
    natural = Agent(FunctionModel(parent_script), name="parent", tools=[make_tools(s) for s in "abc"])

    @natural.tool(name="child")
    async def ask_natural_child(ctx: RunContext[object], input: str) -> str:
        """Ask the child agent."""
        settings = SAME_LIMITS["model_settings"] if ctx.deps == "limited" else None
        return (await natural_child.run(input, usage=ctx.usage, model_settings=settings)).output

    parent = AgentEntry(Agent(FunctionModel(parent_script)), name="parent", toolsets=["a", "b", "c", "child"])
    child_entry = AgentEntry(Agent(FunctionModel(script)), name="child", toolsets=["a", "b", "c"])
    runtime = Runtime(None, entries=[parent, child_entry], toolsets=PER_CALL)
    runtimes.append(runtime)
    return {
        "pydantic-ai, nested by hand, shared Toolsets (baseline)": lambda: by_hand.run("go", toolsets=shared_toolsets),
        "pydantic-ai, nested with @agent.tool (natural baseline)": lambda: natural.run("go"),
        "natural, with llm-do's default limits": lambda: natural.run("go", deps="limited", **SAME_LIMITS),
        "llm-do agent-as-tool, fresh Toolsets per call": lambda: runtime.run("parent", "go"),
    }


def machinery_variants(runtimes: list[Runtime]) -> dict[str, Variant]:
    @entry(toolsets=["a", "b", "c"])
    async def noop(scope: CallScope, input_data: int) -> None:
        for _ in range(input_data):
            await scope._call_child("noop", 0)  # the machinery alone, past the gate

    runtime = Runtime(None, entries=[noop], toolsets=PER_CALL)
    runtimes.append(runtime)

    async def by_hand() -> None:
        ToolsA(), ToolsB(), ToolsC()

    return {
        "three Toolsets built by hand (baseline)": by_hand,
        "llm-do run with one call": lambda: runtime.run("noop", 0),
        "llm-do run with eleven calls": lambda: runtime.run("noop", 10),
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


async def count_calls(variants: dict[str, Variant], runs: int) -> dict[str, float]:
    """Python function calls per run of each variant, after a warm-up."""
    counts: dict[str, float] = {}
    for name, variant in variants.items():
        for _ in range(20):
            await variant()
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(runs):
            await variant()
        profile.disable()
        counts[name] = pstats.Stats(profile).total_calls / runs  # type: ignore[attr-defined]
    return counts


def report_calls(title: str, counts: dict[str, float], baselines: int = 1) -> None:
    """Calls per run of each variant and its ratio to each of the first `baselines` variants."""
    _table(title, "calls/run", {name: f"{count:11.0f}" for name, count in counts.items()}, counts, baselines)


def report(title: str, medians: dict[str, float], baselines: int = 1) -> None:
    """Median time per run of each variant and its ratio to each of the first `baselines` variants."""
    times = {name: f"{median * 1e6:9.1f}us" for name, median in medians.items()}
    _table(title, "per run", times, medians, baselines)


def _table(title: str, unit: str, shown: dict[str, str], values: dict[str, float], baselines: int) -> None:
    bases = list(values.values())[:baselines]
    print(f"\n{title}")
    heads = " ".join(f"{'ratio' if baselines == 1 else f'vs #{i + 1}':>7}" for i in range(baselines))
    print(f"{'variant':58} {unit:>11} {heads}")
    for name, value in values.items():
        ratios = " ".join(f"{value / base:7.3f}" if base > 1e-5 else " " * 7 for base in bases)
        print(f"{name:58} {shown[name]:>11} {ratios}")


async def run_alone(part: str, runs: int) -> None:
    """Run the variant named `part` (or whose name holds it), `runs` times, with callgrind counting (if it runs under
    it). The nested variants' names start with "nested: "."""
    runtimes: list[Runtime] = []
    variants = {**flat_variants(runtimes), **{f"nested: {k}": v for k, v in nested_variants(runtimes).items()}}
    found = [part] if part in variants else [name for name in variants if part in name]
    if len(found) != 1:
        raise SystemExit(f"--alone {part!r} names {len(found)} variants: {found or list(variants)}")
    variant = variants[found[0]]
    for _ in range(20):
        await variant()
    _callgrind("on")
    for _ in range(runs):
        await variant()
    _callgrind("off")
    print(f"{found[0]}: {runs} runs")
    for runtime in runtimes:
        await runtime.aclose()


def _callgrind(switch: str) -> None:
    """Turn callgrind's counting on or off for this process, when it runs under callgrind."""
    if "valgrind" in os.environ.get("LD_PRELOAD", ""):
        subprocess.run(["callgrind_control", "-i", switch, str(os.getpid())], check=True, capture_output=True)


async def main_counting(runs: int) -> None:
    runtimes: list[Runtime] = []
    report_calls("One agent run: Python function calls", await count_calls(flat_variants(runtimes), runs), 3)
    report_calls("Nested: Python function calls", await count_calls(nested_variants(runtimes), runs), 3)
    for runtime in runtimes:
        await runtime.aclose()


async def main(rounds: int, runs: int, cpu_time: bool) -> None:
    runtimes: list[Runtime] = []
    clock = time.process_time if cpu_time else time.perf_counter
    flat = await measure(flat_variants(runtimes), rounds, runs, clock)
    nested = await measure(nested_variants(runtimes), rounds, runs, clock)
    machinery = await measure(machinery_variants(runtimes), rounds, runs * 5, clock)
    for runtime in runtimes:
        await runtime.aclose()
    print(f"{rounds} rounds x {runs} runs, median {'CPU time' if cpu_time else 'time'} per run")
    report("One agent run: one tool call, then text; three tools", flat, 3)
    report("Nested: a parent agent calls a child agent as a tool", nested, 3)
    report("No agent: llm-do's own machinery, three per-call toolsets per call", machinery)
    one, eleven = machinery["llm-do run with one call"], machinery["llm-do run with eleven calls"]
    print(f"\nper further call: {(eleven - one) / 10 * 1e6:.1f}us; run overhead beyond its first call: see above")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--count-calls", action="store_true", help="count Python function calls per run instead")
    parser.add_argument(
        "--cpu-time", action="store_true", help="time this process's CPU (all its threads), not the clock on the wall"
    )
    parser.add_argument("--alone", metavar="VARIANT", help="run one variant (a part of its name), for callgrind")
    arguments = parser.parse_args()
    if arguments.alone:
        asyncio.run(run_alone(arguments.alone, arguments.runs))
    elif arguments.count_calls:
        asyncio.run(main_counting(arguments.runs))
    else:
        asyncio.run(main(arguments.rounds, arguments.runs, arguments.cpu_time))
