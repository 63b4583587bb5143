"""What tracing costs a run: llm-do with tracing off against the same runs traced, measured side by side.

The runs are those of `bench_scopes.py` (one scripted agent run with a tool call and three per-call
toolsets; and a parent agent calling a child agent as a tool). The baseline is llm-do with no tracer
provider, as most users run it. The traced variants record spans with the OpenTelemetry SDK and a
`BatchSpanProcessor` whose exporter drops the spans (so no I/O is measured): llm-do's own spans,
pydantic-ai's instrumentation alone, and both (one trace). The "no agent" variants time llm-do's
own machinery alone (a run with one call and three per-call toolsets), where the cost of its spans
shows best. Rounds interleave the variants; the report gives the median time per run and the ratio
to the baseline: the process's CPU time (`time.process_time`, the exporter's thread included), which
a busy machine disturbs far less than wall-clock time, or with `--wall` the wall-clock time. With
`--count-calls` it counts Python function calls per run instead (cProfile; the exporter's thread is
not counted).

    python benchmarks/bench_tracing.py [--rounds 15] [--runs 100] [--wall | --count-calls]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable, Sequence

from bench_scopes import PER_CALL, Variant, count_calls, measure, parent_script, report, report_calls, script
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from pydantic_ai import Agent, InstrumentationSettings
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from llm_do import AgentEntry, CallScope, Runtime, entry

ScriptFunction = Callable[[list[ModelMessage], AgentInfo], ModelResponse]


class Discard(SpanExporter):
    """Receives every finished span and keeps none."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


def agent(function: ScriptFunction, instrument: InstrumentationSettings | None) -> Agent[None, str]:
    made: Agent[None, str] = Agent(FunctionModel(function))
    if instrument is not None:
        made.instrument = instrument
    return made


MODES = {
    "tracing off (baseline)": (False, False),
    "llm-do's spans": (True, False),
    "pydantic-ai's spans only": (False, True),
    "llm-do's and pydantic-ai's spans": (True, True),
}


def variants(provider: TracerProvider, runtimes: list[Runtime], *, nested: bool) -> dict[str, Variant]:
    settings = InstrumentationSettings(tracer_provider=provider)
    found: dict[str, Variant] = {}
    for label, (ours, theirs) in MODES.items():
        instrument = settings if theirs else None
        child = AgentEntry(agent(script, instrument), name="child", toolsets=["a", "b", "c"])
        entries = [child]
        if nested:
            parent = agent(parent_script, instrument)
            entries.append(AgentEntry(parent, name="parent", toolsets=["a", "b", "c", "child"]))
        runtime = Runtime(None, entries=entries, toolsets=PER_CALL, tracer_provider=provider if ours else None)
        runtimes.append(runtime)
        name = "parent" if nested else "child"
        found[label] = lambda runtime=runtime, name=name: runtime.run(name, "go")  # type: ignore[misc]
    return found


def machinery_variants(provider: TracerProvider, runtimes: list[Runtime]) -> dict[str, Variant]:
    """No agent: a run whose one call resolves, enters and tears down three per-call toolsets."""

    @entry(toolsets=["a", "b", "c"])
    async def noop(scope: CallScope, input_data: str) -> None:
        return None

    found: dict[str, Variant] = {}
    for label, traced in (("tracing off (baseline)", False), ("llm-do's spans", True)):
        runtime = Runtime(None, entries=[noop], toolsets=PER_CALL, tracer_provider=provider if traced else None)
        runtimes.append(runtime)
        found[label] = lambda runtime=runtime: runtime.run("noop", "go")  # type: ignore[misc]
    return found


async def measure_cpu(variants: dict[str, Variant], rounds: int, runs: int) -> dict[str, float]:
    """Median CPU time per run of each variant, rounds interleaved, after a warm-up."""
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
    return {name: statistics.median(values) for name, values in samples.items()}


async def main(rounds: int, runs: int, counting: bool, wall: bool) -> None:
    exporter = Discard()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    runtimes: list[Runtime] = []
    flat, nested = variants(provider, runtimes, nested=False), variants(provider, runtimes, nested=True)
    machinery = machinery_variants(provider, runtimes)
    if counting:
        report_calls("One agent run: Python function calls", await count_calls(flat, runs))
        report_calls("Nested: Python function calls", await count_calls(nested, runs))
        report_calls("No agent: Python function calls", await count_calls(machinery, runs))
    else:
        timed = measure if wall else measure_cpu
        flat_times, nested_times = await timed(flat, rounds, runs), await timed(nested, rounds, runs)
        print(f"{rounds} rounds x {runs} runs, median {'wall-clock' if wall else 'CPU'} time per run")
        report("One agent run: one tool call, then text; three toolsets", flat_times)
        report("Nested: a parent agent calls a child agent as a tool", nested_times)
        report("No agent: llm-do's own machinery, a run with one call", await timed(machinery, rounds, runs * 5))
    for runtime in runtimes:
        await runtime.aclose()
    provider.shutdown()
    print(f"\nspans exported (and dropped): {exporter.spans}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--runs", type=int, default=100)
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--wall", action="store_true", help="measure wall-clock time instead of CPU time")
    how.add_argument("--count-calls", action="store_true", help="count Python function calls per run instead")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rounds, arguments.runs, arguments.count_calls, arguments.wall))
