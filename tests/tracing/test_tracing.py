"""Tracing: run and call spans in one trace with pydantic-ai's own, llm-do's events, outcomes, and the
W3C trace context carried to another process. Spans are read back from the SDK's in-memory exporter. (A tracer
that fails, like any observer that raises, never breaks a run: tests/scopes/test_observer_isolation.py.)"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import (
    ProxyTracerProvider,
    StatusCode,
)
from pydantic_ai import Agent, InstrumentationSettings
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from containers import AgentContainer
from llm_do import (
    AgentEntry,
    Approval,
    ApprovalRequest,
    CallScope,
    Handles,
    RunLocalSingleton,
    Runtime,
    RuntimeConfig,
    ToolPolicy,
    Toolset,
    continue_trace,
    current_traceparent,
    entry,
    inject_trace_context,
    tool,
)
from llm_do.testing import Step, Turn, answering, assert_no_leaks, settle, tool_call, track_leaks
from llm_do.tracing import current_span

from ..counter import Counter
from ..scopes.test_leaks import App, cancel_a_hanging_run, worker

pytestmark = pytest.mark.usefixtures("tools_without_a_policy_run")  # not about approvals: undeclared tools run


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


def instrumented(provider: TracerProvider, model: FunctionModel, **kwargs: Any) -> Agent[Any, str]:
    agent: Agent[Any, str] = Agent(model, **kwargs)
    agent.instrument = InstrumentationSettings(tracer_provider=provider)
    return agent


def named(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, f"{len(found)} spans named {name!r} among {[span.name for span in spans]}"
    return found[0]


def ancestry(spans: Sequence[ReadableSpan], span: ReadableSpan) -> list[str]:
    """Names from `span` up to the root, following parent ids among `spans`."""
    by_id = {s.context.span_id: s for s in spans}
    names = [span.name]
    parent = span.parent
    while parent is not None:
        assert parent.span_id in by_id, f"{names[-1]!r} has a parent that was not exported"
        span = by_id[parent.span_id]
        names.append(span.name)
        parent = span.parent
    return names


def events(span: ReadableSpan) -> list[tuple[str, dict[str, Any]]]:
    return [(event.name, dict(event.attributes or {})) for event in span.events if event.name.startswith("llm_do.")]


# -- one trace --------------------------------------------------------------------------


async def test_a_nested_run_is_one_trace_with_pydantic_ais_spans(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    helper = AgentEntry(
        Agent(answering(lambda turn: tool_call("add", amount=2) if turn.step == 0 else "added")),
        name="helper",
        toolsets=["counter"],
    )
    boss = AgentEntry(
        Agent(answering(lambda turn: tool_call("helper", input="add two") if turn.step == 0 else "done")),
        name="boss",
        toolsets=["helper"],
    )
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    try:
        async with Runtime(
            None, entries=[boss, helper], toolsets={"counter": Counter}, tracer_provider=provider
        ) as runtime:
            result = await runtime.run("boss", "go")
    finally:
        Agent.instrument_all(False)
    assert result.output == "done"
    spans = exporter.get_finished_spans()
    assert len({span.context.trace_id for span in spans}) == 1
    assert ancestry(spans, named(spans, "execute_tool add")) == [
        "execute_tool add",
        "invoke_agent helper",
        "llm_do.call helper",
        "execute_tool helper",
        "invoke_agent boss",
        "llm_do.call boss",
        "llm_do.run boss",
    ]
    records = {record.entry: record for record in result.calls}
    for name, parent, depth, toolsets in (("boss", None, 0, ("helper",)), ("helper", "call_1", 1, ("counter",))):
        span = named(spans, f"llm_do.call {name}")
        record = records[name]
        attributes = dict(span.attributes or {})
        assert attributes.pop("llm_do.model").startswith("function:")
        expected = {
            "llm_do.entry": name,
            "llm_do.call.id": record.id,
            "llm_do.call.depth": depth,
            "llm_do.toolsets": toolsets,
            "llm_do.outcome": "ok",
            "llm_do.usage.requests": 2,
            "llm_do.usage.tool_calls": 1,  # boss's call to helper; helper's call to add
            "llm_do.usage.input_tokens": record.usage.input_tokens,
            "llm_do.usage.output_tokens": record.usage.output_tokens,
        }
        if parent is not None:
            expected["llm_do.call.parent"] = parent
        assert attributes == expected
        assert span.status.status_code is StatusCode.UNSET
    run = dict(named(spans, "llm_do.run boss").attributes or {})
    assert run == {
        "llm_do.entry": "boss",
        "llm_do.outcome": "ok",
        "llm_do.usage.requests": 4,
        "llm_do.usage.tool_calls": 2,
        "llm_do.usage.input_tokens": result.usage.input_tokens,
        "llm_do.usage.output_tokens": result.usage.output_tokens,
    }
    assert named(spans, "invoke_agent helper").attributes["gen_ai.agent.name"] == "helper"  # type: ignore[index]


async def test_a_function_entry_calls_nest_under_its_call_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    echo = AgentEntry(instrumented(provider, answering(lambda turn: turn.prompt.upper())), name="echo")

    @entry(toolsets=["echo"])
    async def pipeline(scope: CallScope, input_data: str) -> Any:
        return await scope.call_agent("echo", input_data)

    async with Runtime(None, entries=[pipeline, echo], tracer_provider=provider) as runtime:
        assert (await runtime.run("pipeline", "hi")).output == "HI"
    spans = exporter.get_finished_spans()
    assert ancestry(spans, named(spans, "invoke_agent echo")) == [
        "invoke_agent echo",
        "llm_do.call echo",
        "llm_do.call pipeline",
        "llm_do.run pipeline",
    ]
    assert "llm_do.model" not in (named(spans, "llm_do.call pipeline").attributes or {})


async def test_agent_spans_carry_the_entry_name_whatever_the_agent_is_called(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    shared = instrumented(provider, answering(lambda turn: "ok"))
    alpha = AgentEntry(shared, name="alpha")
    beta = AgentEntry(shared, name="beta")
    custom = instrumented(provider, answering(lambda turn: "ok"), name="custom")
    clerk = AgentEntry(custom, name="clerk")
    async with Runtime(None, entries=[alpha, beta, clerk], tracer_provider=provider) as runtime:
        for name in ("alpha", "beta", "clerk", "alpha"):
            await runtime.run(name, "hi")
    names = [span.name for span in exporter.get_finished_spans() if span.name.startswith("invoke_agent")]
    assert names == ["invoke_agent alpha", "invoke_agent beta", "invoke_agent clerk", "invoke_agent alpha"]
    assert (shared.name, custom.name) == ("alpha", "custom")  # an unnamed agent took its first entry's name


# -- events -------------------------------------------------------------------------------


class Txn:
    def __init__(self, log: list[str], name: str, *, fail: bool = False) -> None:
        self.log, self.name, self.fail = log, name, fail

    def rollback(self) -> None:
        self.log.append(f"rollback {self.name}")
        if self.fail:
            raise ConnectionError("connection lost")


class Bank(Toolset):
    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.txns: Handles[Txn] = Handles("txn")

    @tool
    def begin(self, name: str, fail_rollback: bool = False) -> str:
        """Open a transaction."""
        return self.txns.open(Txn(self.log, name, fail=fail_rollback))

    @tool
    def commit(self, handle: str) -> str:
        """Commit a transaction."""
        self.log.append(f"commit {self.txns.pop(handle).name}")
        return "committed"

    @tool
    def wipe(self) -> str:
        """Wipe everything (asks for approval)."""
        self.log.append("wipe")
        span = current_span()
        assert span is not None
        span.add_event("llm_do.test.wiped")
        return "wiped"

    def cleanup(self) -> None:
        raise OSError("disk gone")


def bank_script(turn: Turn) -> Step:
    if turn.step == 0:
        return [
            tool_call("begin", name="a"),
            tool_call("begin", name="b"),
            tool_call("begin", name="c", fail_rollback=True),
        ]
    if turn.step == 1:
        first = turn.returns[0]
        return [tool_call("commit", handle=first)]
    if turn.step == 2:
        return tool_call("wipe")
    if turn.step == 3:
        return tool_call("wipe")
    return "done"


async def test_the_call_span_records_approvals_handles_and_teardown_errors(
    provider: TracerProvider, exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    log: list[str] = []
    answers = iter([Approval.approve(), Approval.deny("not today")])
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Approval:
        asked.append(request)
        return next(answers)

    clerk = AgentEntry(instrumented(provider, answering(bank_script)), name="clerk", toolsets=["bank"])
    async with Runtime(
        None,
        entries=[clerk],
        toolsets={"bank": lambda: Bank(log)},
        policies={"bank": ToolPolicy(tools={"wipe": "ask"})},
        approver=approver,
        tracer_provider=provider,
    ) as runtime:
        result = await runtime.run("clerk", "go")
    assert result.output == "done"
    assert len(asked) == 2
    assert log == ["commit a", "wipe", "rollback c", "rollback b"]
    spans = exporter.get_finished_spans()
    span = named(spans, "llm_do.call clerk")
    recorded = events(span)
    opened = [attributes["llm_do.handle"] for name, attributes in recorded if name == "llm_do.handle.opened"]
    assert len(opened) == 3
    where = {"llm_do.toolset": "bank", "llm_do.tool": "wipe"}
    asked_event = {**where, "llm_do.approval.verdict": "ask", "llm_do.approval.reason": asked[0].reason}
    assert recorded[3:] == [
        ("llm_do.handle.closed", {"llm_do.handle": opened[0]}),
        ("llm_do.approval.asked", asked_event),
        ("llm_do.approval.decided", {**where, "llm_do.approval.approved": True}),
        ("llm_do.test.wiped", {}),  # the tool's own event, on its call's span
        ("llm_do.approval.asked", asked_event),
        (
            "llm_do.approval.decided",
            {**where, "llm_do.approval.approved": False, "llm_do.approval.why": "the approver denied it: not today"},
        ),
        (
            "llm_do.handle.rolled_back",
            {
                "llm_do.handle": opened[2],
                "exception.type": "ConnectionError",
                "exception.message": "connection lost",
            },
        ),
        ("llm_do.handle.rolled_back", {"llm_do.handle": opened[1]}),
        (
            "llm_do.teardown.error",
            {
                "llm_do.finalizer": "toolset 'bank' (per_call) of entry 'clerk'",
                "exception.type": "OSError",
                "exception.message": "disk gone",
            },
        ),
    ]
    assert dict(span.attributes or {})["llm_do.outcome"] == "ok"  # teardown errors never change the outcome
    for other in spans:  # the events are on the call span, not on pydantic-ai's tool spans
        if other is not span:
            assert events(other) == []


class Ledger(Toolset):
    def __init__(self) -> None:
        self.txns: Handles[Txn] = Handles("txn")
        self.log: list[str] = []

    @tool
    def begin(self) -> str:
        """Open a run-wide transaction."""
        return self.txns.open(Txn(self.log, "run-wide"))


class LedgerApp(AgentContainer):
    ledger = RunLocalSingleton(Ledger)


async def test_a_per_run_toolsets_forgotten_handle_is_rolled_back_on_the_run_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    clerk = AgentEntry(
        Agent(answering(lambda turn: tool_call("begin") if turn.step == 0 else "done")),
        name="clerk",
        toolsets=["ledger"],
    )
    async with Runtime(LedgerApp(), entries=[clerk], tracer_provider=provider) as runtime:
        result = await runtime.run("clerk", "go")
    assert result.per_run["ledger"].log == ["rollback run-wide"]
    spans = exporter.get_finished_spans()
    [opened] = events(named(spans, "llm_do.call clerk"))
    assert opened[0] == "llm_do.handle.opened"
    assert events(named(spans, "llm_do.run clerk")) == [("llm_do.handle.rolled_back", opened[1])]


# -- outcomes -----------------------------------------------------------------------------


async def test_a_failed_run_records_the_error_on_its_spans(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ValueError("model exploded")

    helper = AgentEntry(instrumented(provider, FunctionModel(broken)), name="helper")
    boss = AgentEntry(
        instrumented(provider, answering(lambda turn: tool_call("helper", input="x") if turn.step == 0 else "done")),
        name="boss",
        toolsets=["helper"],
    )
    async with Runtime(None, entries=[boss, helper], tracer_provider=provider) as runtime:
        with pytest.raises(ValueError, match="model exploded"):
            await runtime.run("boss", "go")
    spans = exporter.get_finished_spans()
    for name in ("llm_do.call helper", "llm_do.call boss", "llm_do.run boss"):
        span = named(spans, name)
        assert (span.attributes or {})["llm_do.outcome"] == "error"
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "ValueError: model exploded"
        [exception] = [event for event in span.events if event.name == "exception"]
        assert (exception.attributes or {})["exception.type"] == "ValueError"


async def test_a_cancelled_run_records_cancelled(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    started = asyncio.Event()

    class Waiter(Toolset):
        @tool
        async def wait(self) -> str:
            """Wait forever."""
            started.set()
            await asyncio.Event().wait()
            return "never"

    clerk = AgentEntry(
        instrumented(provider, answering(lambda turn: tool_call("wait") if turn.step == 0 else "done")),
        name="clerk",
        toolsets=["waiter"],
    )
    async with Runtime(None, entries=[clerk], toolsets={"waiter": Waiter}, tracer_provider=provider) as runtime:
        task = asyncio.create_task(runtime.run("clerk", "go"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    spans = exporter.get_finished_spans()
    for name in ("llm_do.call clerk", "llm_do.run clerk"):
        span = named(spans, name)
        assert (span.attributes or {})["llm_do.outcome"] == "cancelled"
        assert (span.status.status_code, span.status.description) == (StatusCode.ERROR, "cancelled")


async def test_a_depth_error_before_any_agent_runs_still_ends_both_spans(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    @entry(toolsets=["loop"])
    async def loop(scope: CallScope, input_data: str) -> Any:
        return await scope.call_agent("loop", input_data)

    config = RuntimeConfig(max_depth=1)
    async with Runtime(None, entries=[loop], config=config, tracer_provider=provider) as runtime:
        with pytest.raises(Exception, match="max_depth"):
            await runtime.run("loop", "x")
    spans = exporter.get_finished_spans()
    assert sorted(span.name for span in spans) == ["llm_do.call loop", "llm_do.call loop", "llm_do.run loop"]
    assert all((span.attributes or {})["llm_do.outcome"] == "error" for span in spans)


# -- tracing off ------------------------------------------------------------------------------


async def test_without_a_tracer_provider_llm_do_records_nothing(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    assert isinstance(trace.get_tracer_provider(), ProxyTracerProvider), "a test set a global tracer provider"
    seen: list[Any] = []

    class Probe(Toolset):
        @tool
        def look(self) -> str:
            """Look at the tracing state."""
            seen.extend([current_span(), inject_trace_context()])
            return "seen"

    # pydantic-ai's spans are recorded (the agent has its own provider); llm-do's are not.
    clerk = AgentEntry(
        instrumented(provider, answering(lambda turn: tool_call("look") if turn.step == 0 else "done")),
        name="clerk",
        toolsets=["probe"],
    )
    async with Runtime(None, entries=[clerk], toolsets={"probe": Probe}) as runtime:
        assert (await runtime.run("clerk", "go")).output == "done"
    names = sorted(span.name for span in exporter.get_finished_spans())
    assert names == ["chat answering", "chat answering", "execute_tool look", "invoke_agent clerk"]
    assert seen[0] is None
    assert seen[1] == {"traceparent": seen[1]["traceparent"]}  # pydantic-ai's tool span, not ours


async def test_with_llm_do_tracing_off_a_run_still_continues_its_remote_parent(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    assert isinstance(trace.get_tracer_provider(), ProxyTracerProvider), "a test set a global tracer provider"
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    clerk = AgentEntry(instrumented(provider, answering(lambda turn: "ok")), name="clerk")
    async with Runtime(None, entries=[clerk]) as runtime:
        await runtime.run("clerk", "a", trace_parent=traceparent)
        await runtime.run("clerk", "b")
    first, second = (span for span in exporter.get_finished_spans() if span.name == "invoke_agent clerk")
    assert first.parent is not None and first.parent.is_remote
    assert (f"{first.context.trace_id:032x}", f"{first.parent.span_id:016x}") == (
        "0af7651916cd43dd8448eb211c80319c",
        "b7ad6b7169203331",
    )
    assert second.parent is None  # the remote parent was the first run's only


# -- across processes ---------------------------------------------------------------------------


async def test_a_run_continues_a_remote_parent(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    clerk = AgentEntry(Agent(answering(lambda turn: "ok")), name="clerk")
    tracer = provider.get_tracer("web")
    with tracer.start_as_current_span("POST /jobs") as request:
        carrier = inject_trace_context()
        traceparent = current_traceparent()
    context = request.get_span_context()
    assert (
        carrier["traceparent"]
        == traceparent
        == f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
    )
    async with Runtime(None, entries=[clerk], tracer_provider=provider) as runtime:
        await runtime.run("clerk", "a", trace_parent=carrier)
        await runtime.run("clerk", "b", trace_parent=traceparent)
        await runtime.run("clerk", "c", trace_parent="00-not-a-traceparent")
        with pytest.raises(TypeError, match="traceparent"):
            await runtime.run("clerk", "d", trace_parent=42)  # type: ignore[arg-type]
    runs = [span for span in exporter.get_finished_spans() if span.name == "llm_do.run clerk"]
    assert len(runs) == 3
    for run in runs[:2]:
        assert run.parent is not None and run.parent.is_remote
        assert (run.context.trace_id, run.parent.span_id) == (context.trace_id, context.span_id)
    assert runs[2].parent is None and runs[2].context.trace_id != context.trace_id


def test_continue_trace_makes_the_remote_span_current() -> None:
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert current_traceparent() is None
    with continue_trace(traceparent) as context:
        assert current_traceparent() == traceparent
        assert trace.get_current_span(context).get_span_context().is_remote
    assert current_traceparent() is None


CHILD = """
import asyncio, os, sys

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

from llm_do import AgentEntry, Runtime

out = open(sys.argv[1], "w")
provider = TracerProvider()
provider.add_span_processor(
    SimpleSpanProcessor(ConsoleSpanExporter(out=out, formatter=lambda span: span.to_json(indent=None) + "\\n"))
)
trace.set_tracer_provider(provider)  # the global provider: the runtime is given none

worker = AgentEntry(Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("done")]))), name="worker")


async def main():
    async with Runtime(None, entries=[worker]) as runtime:
        print((await runtime.run("worker", "job", trace_parent=os.environ["JOB_TRACEPARENT"])).output)


asyncio.run(main())
provider.shutdown()
out.close()
"""


def test_the_trace_context_travels_to_a_worker_process(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    with provider.get_tracer("web").start_as_current_span("POST /jobs") as request:
        traceparent = current_traceparent()
    assert traceparent is not None
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    spans_file = tmp_path / "spans.jsonl"
    done = subprocess.run(
        [sys.executable, str(script), str(spans_file)],
        env={"JOB_TRACEPARENT": traceparent, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (0, "done\n"), done.stderr
    spans = {span["name"]: span for span in map(json.loads, spans_file.read_text().splitlines())}
    assert set(spans) == {"llm_do.run worker", "llm_do.call worker"}
    context = request.get_span_context()
    run, call_ = spans["llm_do.run worker"], spans["llm_do.call worker"]
    assert run["context"]["trace_id"] == call_["context"]["trace_id"] == f"0x{context.trace_id:032x}"
    assert run["parent_id"] == f"0x{context.span_id:016x}"
    assert call_["parent_id"] == run["context"]["span_id"]
    assert call_["attributes"]["llm_do.outcome"] == "ok"


# -- concurrent runs --------------------------------------------------------------------


class Gate(Toolset):
    """`hold` waits until `runs` calls are inside it at once: the runs are all in flight together."""

    def __init__(self, runs: int) -> None:
        self.runs, self.inside, self.open = runs, 0, asyncio.Event()

    @tool(read_only=True)
    async def hold(self) -> str:
        """Wait for the other runs."""
        self.inside += 1
        if self.inside == self.runs:
            self.open.set()
        await self.open.wait()
        return "held"


def boss_of(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Calls `helper` N times, N the prompt's last word; each request costs 1000 * N input tokens."""
    n = int(str(messages[0].parts[-1].content).split()[-1])
    asked = sum(1 for message in messages for part in message.parts if isinstance(part, ToolCallPart))
    usage = RequestUsage(input_tokens=1000 * n, output_tokens=n)
    if asked < n:
        return ModelResponse(parts=[ToolCallPart("helper", {"input": str(n)})], usage=usage)
    return ModelResponse(parts=[TextPart(f"done {n}")], usage=usage)


def helper_of(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Holds once, then answers; each request costs N input tokens, N its input."""
    n = int(str(messages[0].parts[-1].content))
    usage = RequestUsage(input_tokens=n, output_tokens=1)
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("hold", {})], usage=usage)
    return ModelResponse(parts=[TextPart("held")], usage=usage)


async def test_runs_at_once_each_trace_and_report_hold_that_runs_usage_and_calls_only(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    sizes = (1, 2, 3)
    gate = Gate(len(sizes))
    boss = AgentEntry(instrumented(provider, FunctionModel(boss_of)), name="boss", toolsets=["helper"])
    helper = AgentEntry(instrumented(provider, FunctionModel(helper_of)), name="helper", toolsets=["gate"])
    async with Runtime(
        None, entries=[boss, helper], toolsets={"gate": lambda: gate}, tracer_provider=provider
    ) as runtime:
        results = await asyncio.gather(*(runtime.run("boss", f"go {n}") for n in sizes))
    traces: dict[int, list[ReadableSpan]] = {}
    for span in exporter.get_finished_spans():
        traces.setdefault(span.context.trace_id, []).append(span)
    assert len(traces) == len(sizes)
    by_run = {
        named(spans, "llm_do.run boss").attributes["llm_do.usage.input_tokens"]: spans for spans in traces.values()
    }  # type: ignore[index]
    for n, result in zip(sizes, results, strict=True):
        assert result.output == f"done {n}"
        expected = (n + 1 + 2 * n, 2 * n, 1000 * n * (n + 1) + 2 * n * n, n * (n + 1) + 2 * n)
        assert (
            result.usage.requests,
            result.usage.tool_calls,
            result.usage.input_tokens,
            result.usage.output_tokens,
        ) == expected
        assert [call.entry for call in result.calls] == ["boss", *["helper"] * n]
        spans = by_run[expected[2]]
        run = dict(named(spans, "llm_do.run boss").attributes or {})
        assert (run["llm_do.usage.requests"], run["llm_do.usage.tool_calls"], run["llm_do.usage.output_tokens"]) == (
            expected[0],
            expected[1],
            expected[3],
        )
        calls = {
            span.attributes["llm_do.call.id"]: dict(span.attributes)
            for span in spans
            if span.name.startswith("llm_do.call")
        }  # type: ignore[index, arg-type]
        assert sorted(calls) == sorted(call.id for call in result.calls)
        for call in result.calls:
            attributes = calls[call.id]
            assert attributes["llm_do.entry"] == call.entry
            assert attributes.get("llm_do.call.parent") == call.parent
            assert (
                attributes["llm_do.usage.requests"],
                attributes["llm_do.usage.tool_calls"],
                attributes["llm_do.usage.input_tokens"],
                attributes["llm_do.usage.output_tokens"],
            ) == (call.usage.requests, call.usage.tool_calls, call.usage.input_tokens, call.usage.output_tokens)
        helper_spans = [span for span in spans if span.name == "invoke_agent helper"]
        assert len(helper_spans) == n


# -- nothing outlives a traced run ----------------------------------------------------------------


@pytest.mark.long
async def test_a_traced_run_leaves_nothing_behind_whatever_the_outcome(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    try:
        with track_leaks() as leaks:
            async with Runtime(App(), entries=[worker()], tracer_provider=provider) as runtime:
                assert (await runtime.run("worker", "deep")).output == "done"
                await asyncio.gather(*(runtime.run("worker", "ok") for _ in range(5)))
                with pytest.raises(ValueError, match="tool failed"):
                    await runtime.run("worker", "fail")
                await cancel_a_hanging_run(runtime)
            await settle()
            assert_no_leaks()
        assert leaks.leaks() == []
    finally:
        Agent.instrument_all(False)
    runs = [span for span in exporter.get_finished_spans() if span.name == "llm_do.run worker"]
    outcomes = sorted(str((span.attributes or {})["llm_do.outcome"]) for span in runs)
    assert outcomes == ["cancelled", "error", *["ok"] * 6]
    rolled_back = [
        name
        for span in exporter.get_finished_spans()
        for name, _ in events(span)
        if name == "llm_do.handle.rolled_back"
    ]
    assert len(rolled_back) == 9  # the forgotten file handle of each of the 9 calls
