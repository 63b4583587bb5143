"""An observer that raises never breaks a run: a tracer whose spans fail to record, or a span processor that
fails as spans end, is logged on the `llm_do` logger and hears nothing more of that run, and the run (its cleanups
included) goes on as if nobody observed it. Tracing is the observer here, with tracers and processors that fail."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import INVALID_SPAN_CONTEXT, NonRecordingSpan, NoOpTracer, Span
from pydantic_ai import Agent

from llm_do import AgentEntry, CallScope, Runtime, Toolset, entry
from llm_do.testing import answering, tool_call

pytestmark = pytest.mark.usefixtures("tools_without_a_policy_run")  # not about approvals: undeclared tools run


class FailingSpan(NonRecordingSpan):
    """A span whose events cannot be recorded (its backend is down): each attempt is noted, then raises."""

    def __init__(self, attempts: list[str]) -> None:
        super().__init__(INVALID_SPAN_CONTEXT)
        self.attempts = attempts

    def add_event(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.attempts.append(name)
        raise RuntimeError("tracing backend down")


class FailingTracer(NoOpTracer):
    def __init__(self, attempts: list[str]) -> None:
        self.attempts = attempts

    def start_span(self, *args: Any, **kwargs: Any) -> Span:
        return FailingSpan(self.attempts)


class FailingTracerProvider(trace.TracerProvider):
    """A user's tracer provider whose spans fail to record events."""

    def __init__(self) -> None:
        self.attempts: list[str] = []

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return FailingTracer(self.attempts)


class Tidy(Toolset):
    """Notes its cleanup in `log`; fails it when `fails`."""

    def __init__(self, name: str, log: list[str], *, fails: bool = False) -> None:
        self.name, self.log, self.fails = name, log, fails

    def cleanup(self) -> None:
        self.log.append(self.name)
        if self.fails:
            raise OSError(f"{self.name} is stuck")


async def test_a_tracer_that_raises_while_a_cleanup_failure_is_reported_skips_no_cleanup(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="llm_do")
    log: list[str] = []

    @entry(toolsets=["a", "b", "c"])
    async def job(scope: CallScope, input_data: str) -> str:
        return "done"

    toolsets = {
        "a": lambda: Tidy("a", log),
        "b": lambda: Tidy("b", log, fails=True),
        "c": lambda: Tidy("c", log, fails=True),
    }
    provider = FailingTracerProvider()
    async with Runtime(None, entries=[job], toolsets=toolsets, tracer_provider=provider) as runtime:
        for _ in range(2):
            assert (await runtime.run("job", "go")).output == "done"
    assert log == ["c", "b", "a"] * 2  # every cleanup ran, in reverse order, and the runs succeeded
    # the tracer raised reporting c's failure: it heard nothing more of that run (not b's), and the next
    # run was traced again
    assert provider.attempts == ["llm_do.teardown.error"] * 2
    dropped = [record for record in caplog.records if record.name == "llm_do" and "hears nothing" in record.message]
    assert len(dropped) == 2
    assert all(record.exc_info and "tracing backend down" in str(record.exc_info[1]) for record in dropped)
    failed = [record.message for record in caplog.records if record.message.startswith("cleanup of")]
    assert len(failed) == 4  # each failed cleanup is logged still


class FailingProcessor(SpanProcessor):
    """A span processor that fails as each span ends (an exporter without error handling)."""

    def __init__(self) -> None:
        self.ended = 0

    def on_end(self, span: ReadableSpan) -> None:
        self.ended += 1
        raise RuntimeError("exporter down")


async def test_a_span_processor_that_raises_never_changes_a_runs_outcome(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="llm_do")
    processor = FailingProcessor()
    provider = TracerProvider()
    provider.add_span_processor(processor)
    helper = AgentEntry(Agent(answering(lambda turn: "helped")), name="helper")
    boss = AgentEntry(
        Agent(answering(lambda turn: tool_call("helper", input="x") if turn.step == 0 else "done")),
        name="boss",
        toolsets=["helper"],
    )
    try:
        async with Runtime(None, entries=[boss, helper], tracer_provider=provider) as runtime:
            assert (await runtime.run("boss", "go")).output == "done"
    finally:
        provider.shutdown()
    assert processor.ended == 1  # the helper's call span: tracing was dropped for the rest of the run
    [dropped] = [record for record in caplog.records if "hears nothing" in record.message]
    assert dropped.name == "llm_do"
