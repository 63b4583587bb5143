"""Per-run state and the result of a run: usage, call records, the message log."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.usage import RunUsage

__all__ = ["CallRecord", "LogEntry", "RunReport", "RunResult", "RunState", "attach_report", "run_report", "usage_of"]

_NOTHING: Mapping[str, Any] = MappingProxyType({})
_REPORT = "llm_do_run_report"

Outcome = Literal["ok", "error", "cancelled"]


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One entry invocation of a run."""

    id: str
    parent: str | None
    entry: str
    depth: int
    toolsets: tuple[str, ...]
    outcome: Outcome
    usage: RunUsage
    """Requests and tokens of this call's own model responses (children not included).

    Zero for a call whose agent run failed: pydantic-ai returns no messages then; the run's
    total (`RunResult.usage`) still counts them."""


@dataclass(frozen=True, slots=True)
class LogEntry:
    """The messages one call exchanged with its model."""

    call_id: str
    parent: str | None
    entry: str
    depth: int
    messages: tuple[ModelMessage, ...]


class RunState:
    """State shared by every call of one run. Declared per run (`ContextLocalSingleton`)."""

    def __init__(self) -> None:
        self.usage = RunUsage()
        self.calls: list[CallRecord] = []
        self.log: list[LogEntry] = []
        self._ids = itertools.count(1)

    def next_call_id(self) -> str:
        return f"call_{next(self._ids)}"

    def calls_in_order(self) -> tuple[CallRecord, ...]:
        """The finished calls in the order they started (records are added as calls finish)."""
        return tuple(sorted(self.calls, key=lambda record: int(record.id.removeprefix("call_"))))


@dataclass(frozen=True, slots=True, weakref_slot=True)
class RunResult:
    """What `Runtime.run` returns."""

    output: Any
    usage: RunUsage
    """Usage summed over every call of the run."""
    messages: list[ModelMessage]
    """The top-level call's conversation; pass it as `message_history` to continue."""
    calls: tuple[CallRecord, ...]
    """Every call of the run, in the order they started."""
    log: tuple[LogEntry, ...] = field(default=())
    per_run: Mapping[str, Any] = field(default_factory=lambda: _NOTHING)
    """The run's per-run objects by provider name (`result.per_run["audit"]`), after their teardown."""


@dataclass(frozen=True, slots=True, weakref_slot=True)
class RunReport:
    """What a failed or cancelled run leaves for its caller; see `run_report`."""

    outcome: Outcome
    usage: RunUsage
    calls: tuple[CallRecord, ...]
    log: tuple[LogEntry, ...]
    per_run: Mapping[str, Any]
    """The run's per-run objects by provider name, after their teardown."""


def run_report(error: BaseException) -> RunReport | None:
    """The report of the run that raised `error` from `Runtime.run`, or None if no run raised it.

    ```python
    try:
        result = await runtime.run("clerk", prompt)
    except Exception as error:
        audit = run_report(error).per_run["audit"]
    ```
    """
    report = getattr(error, _REPORT, None)
    return report if isinstance(report, RunReport) else None


def attach_report(error: BaseException, report: RunReport) -> None:
    """Attach a run's report to the exception it raised (the exception is otherwise unchanged)."""
    with contextlib.suppress(AttributeError):  # a type without a __dict__: the report is lost, not the error
        setattr(error, _REPORT, report)


def usage_of(messages: list[ModelMessage] | tuple[ModelMessage, ...]) -> RunUsage:
    """Requests and tokens of the model responses among `messages`."""
    usage = RunUsage()
    for message in messages:
        if isinstance(message, ModelResponse):
            usage.requests += 1
            usage.incr(message.usage)
    return usage
