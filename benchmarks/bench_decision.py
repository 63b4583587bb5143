"""How soon an approved call runs: from a decision to the tool's body, llm-do's gate against gates written by hand.

Every variant runs one scripted agent (one tool call, then text) whose only tool needs an approval,
and waits until the question is pending and the event loop is idle. Then the decision is made (a
future an approver awaits is resolved, or `LiveRun.decide` is called) and the probe counts, until
the tool's body starts: the event loop's turns, the Python function calls (cProfile, builtins
included) and the wall time. The baselines are the two gates a pydantic-ai user writes by hand: a
wrapper toolset whose `call_tool` awaits the decision before calling the tool (the floor: one
turn), and pydantic-ai's own deferral (`ApprovalRequiredToolset` with a `HandleDeferredToolCalls`
handler that awaits the decision), whose approved call pydantic-ai runs again in a task of its
own. llm-do defers as the second does when a call's toolsets can ask (a model's calls), and
decides in place otherwise (a call made from Python, a tool that asks while it runs).

The latency is measured on an idle loop and again with `--load` other live runs streaming in the
process (each loop turn then waits for their work); turns and calls are counted on the idle loop.

    python benchmarks/bench_decision.py [--rounds 10] [--decisions 20] [--load 20]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import bench_scopes
import bench_stream
from bench_scopes import PER_CALL
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults
from pydantic_ai.toolsets import ApprovalRequiredToolset, FunctionToolset, ToolsetTool, WrapperToolset

from llm_do import AgentEntry, Approval, ApprovalRequest, CallScope, Runtime, ToolPolicy, Toolset, entry, tool
from llm_do.events import ApprovalRequested


@dataclass
class Probe:
    """Counts the loop's turns, and while `counting`, Python calls, from `start` (the decision) to `stop` (the tool)."""

    loop: asyncio.AbstractEventLoop
    counting: bool = False
    turns: int = 0
    samples: list[tuple[float, int]] = field(default_factory=list)
    profile: cProfile.Profile = field(default_factory=cProfile.Profile)
    _started: tuple[float, int] | None = None

    def __post_init__(self) -> None:
        run_once = self.loop._run_once  # type: ignore[attr-defined]

        def counted() -> None:
            self.turns += 1
            run_once()

        self.loop._run_once = counted  # type: ignore[attr-defined]

    def start(self) -> None:
        self._started = (time.perf_counter(), self.turns)
        if self.counting:
            self.profile.enable()

    def stop(self) -> None:
        if self._started is None:
            return  # the tool ran without a decision (a warm-up of another variant)
        if self.counting:
            self.profile.disable()
        started, turns = self._started
        self._started = None
        self.samples.append((time.perf_counter() - started, self.turns - turns))

    def calls(self) -> int:
        return pstats.Stats(self.profile).total_calls  # type: ignore[attr-defined,no-any-return]

    def reset(self, counting: bool) -> None:
        self.counting = counting
        self.samples = []
        self.profile = cProfile.Profile()


PROBE: Probe | None = None


def reached() -> None:
    assert PROBE is not None
    PROBE.stop()


async def idle() -> None:
    """Let the loop settle: whatever the question set going is done before the decision is made."""
    for _ in range(10):
        await asyncio.sleep(0)


def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("act", {"key": "k"})])
    return ModelResponse(parts=[TextPart("done")])


async def act(key: str) -> str:
    """Act on a key."""
    reached()
    return key


class Acts(Toolset):
    @tool
    async def act(self, key: str) -> str:
        """Act on a key."""
        reached()
        return key


class AsksWhileRunning(Toolset):
    default_policy = ToolPolicy()  # only the tool's own ApprovalRequired asks

    @tool
    async def act(self, ctx: RunContext[Any], key: str) -> str:
        """Act on a key; it asks for approval while it runs."""
        if not ctx.tool_call_approved:
            raise ApprovalRequired()
        reached()
        return key


Decide = Callable[[], Awaitable[None]]
"""One decided call: start the run, wait for its question, decide it (probed), wait for the run's end."""


class Decisions:
    """Questions waiting for a decision: the approver (or a gate) puts a future, the driver resolves it."""

    def __init__(self) -> None:
        self.asked: asyncio.Queue[asyncio.Future[Any]] = asyncio.Queue()

    async def wait(self, answer: Any) -> Any:
        decision = asyncio.get_running_loop().create_future()
        self.asked.put_nowait(decision)
        await decision
        return answer

    async def drive(self, run: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(run)
        decision = await self.asked.get()
        await idle()
        assert PROBE is not None
        PROBE.start()
        decision.set_result(None)
        await task


class HandWrittenGate(WrapperToolset[Any]):
    """The floor: a gate that awaits the decision in the tool call's own task, then calls the tool."""

    decisions: Decisions

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        await self.decisions.wait(True)
        return await super().call_tool(name, tool_args, ctx, tool)


def variants(runtimes: list[Runtime]) -> dict[str, Decide]:
    decisions = Decisions()
    model = FunctionModel(script)

    gate = HandWrittenGate(FunctionToolset([act]))
    gate.decisions = decisions
    by_hand = Agent(model, toolsets=[gate])

    async def resolve(ctx: RunContext[Any], requests: DeferredToolRequests) -> DeferredToolResults:
        await decisions.wait(None)
        return requests.build_results(approve_all=True)

    deferring = Agent(
        model,
        toolsets=[ApprovalRequiredToolset(FunctionToolset([act]))],
        capabilities=[HandleDeferredToolCalls(handler=resolve)],
    )

    async def approver(request: ApprovalRequest) -> Approval:
        return await decisions.wait(Approval.approve())  # type: ignore[no-any-return]

    @entry(toolsets=["acts"])
    async def from_python(scope: CallScope, input_data: str) -> Any:
        return await scope.call_tool("act", {"key": "k"})

    asked = Runtime(
        None,
        entries=[AgentEntry(Agent(model), name="job", toolsets=["acts"]), from_python],
        toolsets={"acts": Acts},
        policies={"acts": ToolPolicy(default="ask")},
        approver=approver,
    )
    asking_tool = Runtime(
        None,
        entries=[AgentEntry(Agent(model), name="job", toolsets=["acts"])],
        toolsets={"acts": AsksWhileRunning},
        approver=approver,
    )
    runtimes += [asked, asking_tool]

    async def live() -> None:
        async with asked.stream("job", "go", model_events=False) as run:
            async for event in run:
                if isinstance(event, ApprovalRequested):
                    await idle()
                    assert PROBE is not None
                    PROBE.start()
                    run.decide(event.request.approval_id, "approve")

    return {
        "hand-written gate in the tool's call (baseline)": lambda: decisions.drive(by_hand.run("go")),
        "pydantic-ai ApprovalRequiredToolset + HandleDeferredToolCalls": lambda: decisions.drive(deferring.run("go")),
        "llm-do, a model's call (deferred), async approver": lambda: decisions.drive(asked.run("job", "go")),
        "llm-do, a model's call (deferred), LiveRun.decide": live,
        "llm-do, scope.call_tool from Python, async approver": lambda: decisions.drive(asked.run("from_python", "go")),
        "llm-do, a tool that asks while it runs, async approver": lambda: decisions.drive(asking_tool.run("job", "go")),
    }


async def measure(
    probe: Probe, cases: dict[str, Decide], rounds: int, decisions: int, *, counting: bool = False
) -> dict[str, tuple[float, float, float]]:
    """Per variant: the median latency (s) and turns per decision, and calls per decision (when counting). Rounds
    interleave the variants, so that a change of the machine's load hits them alike."""
    for decide in cases.values():
        for _ in range(10):  # warm up: schemas, imports, caches
            await decide()
    samples: dict[str, list[tuple[float, int]]] = {name: [] for name in cases}
    calls = dict.fromkeys(cases, 0)
    for _ in range(rounds):
        for name, decide in cases.items():
            probe.reset(counting)
            for _ in range(decisions):
                await decide()
            assert len(probe.samples) == decisions, f"{name}: {len(probe.samples)} of {decisions} reached the tool"
            samples[name] += probe.samples
            calls[name] += probe.calls() if counting else 0
    return {
        name: (
            statistics.median(seconds for seconds, _ in found),
            statistics.median(turns for _, turns in found),
            calls[name] / len(found),
        )
        for name, found in samples.items()
    }


async def load(streams: int, runtimes: list[Runtime]) -> list[asyncio.Task[None]]:
    """`streams` live runs streaming over and over (bench_stream's flat run), to keep the loop busy."""
    model = FunctionModel(bench_scopes.script, stream_function=bench_stream.script)
    runtime = Runtime(None, entries=[AgentEntry(Agent(model), name="job", toolsets=["a", "b", "c"])], toolsets=PER_CALL)
    runtimes.append(runtime)

    async def forever() -> None:
        while True:
            await bench_stream.drain_llm_do(runtime, "job")

    tasks = [asyncio.create_task(forever()) for _ in range(streams)]
    await asyncio.sleep(0.2)
    return tasks


async def main(rounds: int, decisions: int, streams: int) -> None:
    global PROBE
    probe = PROBE = Probe(asyncio.get_running_loop())
    runtimes: list[Runtime] = []
    cases = variants(runtimes)
    counted = await measure(probe, cases, 1, decisions, counting=True)
    idle = await measure(probe, cases, rounds, decisions)
    background = await load(streams, runtimes)
    loaded = await measure(probe, cases, rounds, decisions)
    for task in background:
        task.cancel()
    for task in background:
        with suppress(asyncio.CancelledError):
            await task
    for runtime in runtimes:
        await runtime.aclose()
    print(f"{rounds} rounds x {decisions} decisions per variant, median; calls counted by cProfile on the idle loop")
    print(f"\n{'from the decision to the tool':62} {'turns':>5} {'calls':>6} {'idle':>9} {f'{streams} streams':>11}")
    for name, (latency, turns, _) in idle.items():
        busy, busy_turns, _ = loaded[name]
        assert busy_turns == turns, f"{name}: {busy_turns} turns under load, {turns} idle"
        print(f"{name:62} {turns:5.0f} {counted[name][2]:6.0f} {latency * 1e3:7.3f}ms {busy * 1e3:9.3f}ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--decisions", type=int, default=20, help="decisions per variant and round")
    parser.add_argument("--load", type=int, default=20, help="live runs streaming beside the measured runs")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rounds, arguments.decisions, arguments.load))
