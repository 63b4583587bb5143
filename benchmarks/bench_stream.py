"""What a live run costs: `Runtime.stream` against pydantic-ai's own `Agent.run_stream_events`, side by side.

Both stream the same scripted agent (one tool call, then a short text, the model's responses
streamed) with three toolsets of one tool each, and the consumer reads every event. The baseline
is plain pydantic-ai streaming with the same `llm_do.Toolset` objects shared by every run (no
isolation); llm-do's live run gives each call fresh toolsets and tags every event with its call,
plus llm-do's own events (call started and ended). The nested pair streams a parent agent that
calls a child agent as a tool: pydantic-ai's stream carries only the parent's events (a nested
agent's are not forwarded), so the child's are read by an `event_stream_handler` of its own;
llm-do's stream carries the whole tree's. Rounds interleave the variants; the report gives the
median per run and the ratio to the baseline.

With `--count-calls` it reports instead the Python function calls per run (cProfile), which no
machine noise changes.

    python benchmarks/bench_stream.py [--rounds 15] [--runs 100] [--count-calls]
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import bench_scopes
from bench_scopes import PER_CALL, ToolsA, ToolsB, ToolsC, Variant, count_calls, measure, report, report_calls
from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.messages import AgentStreamEvent, ModelMessage
from pydantic_ai.models.function import AgentInfo, DeltaToolCalls, FunctionModel

from llm_do import AgentEntry, Runtime


async def script(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    if len(messages) == 1:
        yield {0: _call("read_a", '{"key": "k"}')}
    else:
        for word in ("all", " done", " now"):
            yield word


async def parent_script(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    if len(messages) == 1:
        yield {0: _call("child", '{"input": "go"}')}
    else:
        yield "done"


def _call(name: str, args: str) -> Any:
    from pydantic_ai.models.function import DeltaToolCall

    return DeltaToolCall(name, args)


async def drain_pydantic_ai(agent: Agent[Any, Any], toolsets: list[Any]) -> None:
    async with agent.run_stream_events("go", toolsets=toolsets) as events:
        async for _ in events:
            pass


async def drain_llm_do(runtime: Runtime, name: str) -> None:
    async with runtime.stream(name, "go") as run:
        async for _ in run:
            pass


def flat_variants(runtimes: list[Runtime]) -> dict[str, Variant]:
    # The baseline's own agent: llm-do's entry wraps another (named as the entry names its agent).
    agent = Agent(FunctionModel(bench_scopes.script, stream_function=script), name="job")
    shared = [ToolsA(), ToolsB(), ToolsC()]
    job = Agent(FunctionModel(bench_scopes.script, stream_function=script))
    runtime = Runtime(None, entries=[AgentEntry(job, name="job", toolsets=["a", "b", "c"])], toolsets=PER_CALL)
    runtimes.append(runtime)
    return {
        "pydantic-ai run_stream_events, shared Toolsets (baseline)": lambda: drain_pydantic_ai(agent, shared),
        "llm-do Runtime.stream, fresh Toolsets per call": lambda: drain_llm_do(runtime, "job"),
        "llm-do Runtime.run (not streamed), for reference": lambda: runtime.run("job", "go"),
    }


def nested_variants(runtimes: list[Runtime]) -> dict[str, Variant]:
    child_model = FunctionModel(bench_scopes.script, stream_function=script)
    child = Agent(child_model, name="child")  # the baseline's own, like the flat one's
    shared = [ToolsA(), ToolsB(), ToolsC()]

    async def ask_child(ctx: RunContext[None], input: str) -> str:
        """Ask the child agent."""
        return (await child.run(input, toolsets=shared, usage=ctx.usage, event_stream_handler=consume)).output

    async def consume(ctx: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
        async for _ in events:  # the child's events, read as a consumer of the whole tree would
            pass

    by_hand = Agent(
        FunctionModel(bench_scopes.parent_script, stream_function=parent_script),
        tools=[Tool(ask_child, name="child", takes_ctx=True)],
    )
    parent = AgentEntry(
        Agent(FunctionModel(bench_scopes.parent_script, stream_function=parent_script)),
        name="parent",
        toolsets=["child"],
    )
    runtime = Runtime(
        None,
        entries=[parent, AgentEntry(Agent(child_model), name="child", toolsets=["a", "b", "c"])],
        toolsets=PER_CALL,
    )
    runtimes.append(runtime)
    return {
        "pydantic-ai run_stream_events, nested by hand (baseline)": lambda: drain_pydantic_ai(by_hand, shared),
        "llm-do Runtime.stream, agent-as-tool (the whole tree)": lambda: drain_llm_do(runtime, "parent"),
    }


async def main(rounds: int, runs: int, counting: bool) -> None:
    runtimes: list[Runtime] = []
    flat, nested = flat_variants(runtimes), nested_variants(runtimes)
    if counting:
        report_calls("One agent run, streamed: Python function calls", await count_calls(flat, runs))
        report_calls("Nested, streamed: Python function calls", await count_calls(nested, runs))
    else:
        print(f"{rounds} rounds x {runs} runs, median per run")
        report("One agent run, streamed: one tool call, then text; three toolsets", await measure(flat, rounds, runs))
        report("Nested, streamed: a parent agent calls a child agent as a tool", await measure(nested, rounds, runs))
    for runtime in runtimes:
        await runtime.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--count-calls", action="store_true", help="count Python function calls per run instead")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rounds, arguments.runs, arguments.count_calls))
