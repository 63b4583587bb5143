"""Per-run state and the result of a run: usage, call records, the message log."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from pydantic_ai.messages import ModelMessage
from pydantic_ai.usage import RunUsage

if TYPE_CHECKING:
    from .files._attachments import AttachmentInfo

__all__ = [
    "CallRecord",
    "LogEntry",
    "RunReport",
    "RunResult",
    "RunState",
    "attach_report",
    "finished_report",
    "outcome_of",
    "run_report",
    "usage_json",
]

_NOTHING: Mapping[str, Any] = MappingProxyType({})
_REPORT = "llm_do_run_report"

Outcome = Literal["ok", "error", "cancelled"]


def outcome_of(error: BaseException | None) -> Outcome:
    """How a run or call ended, from the exception it ended with (None: it ended well)."""
    return "ok" if error is None else "cancelled" if isinstance(error, asyncio.CancelledError) else "error"


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
    """Requests, tokens and tool calls of this call's own agent run (children not included), from
    its messages; a failed or cancelled run counts what it did up to the failure.

    `tool_calls` counts what pydantic-ai counts in `RunUsage.tool_calls`: the call's tool calls that
    ran and returned (a tool that asks for another agent counts once here, and the child counts its
    own). Failed, retried and denied calls and output tools do not count, nor do direct
    `CallScope.call_tool` calls, which pydantic-ai does not see either."""
    attachments: tuple[AttachmentInfo, ...] = ()
    """The files the call received: name, media type, size and digest (never their bytes)."""
    warnings: tuple[str, ...] = ()
    """What its model's replies looked like when they were not what they seemed: a tool call written as text, an
    echoed prompt, a reply cut off at its token limit, a written call that was run (see docs/local-models.md)."""


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
    """The top-level call's whole conversation: the `message_history` it was given, then this run's
    messages. Pass it as the next run's `message_history` to continue. Empty when the top-level entry
    is an `@entry` function (its child calls' messages are in `log`)."""
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


def finished_report(result: RunResult) -> RunReport:
    """The report of a run that finished (outcome `ok`) although its caller was cancelled meanwhile."""
    return RunReport("ok", result.usage, result.calls, result.log, result.per_run)


def run_report(error: BaseException) -> RunReport | None:
    """The report of the run that raised `error` from `Runtime.run`, or None if no run raised it.

    A caller cancelled just as its run finished gets `CancelledError` with a report whose outcome
    is `ok`: the run did all it set out to do (a commit included) before the cancellation landed.

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


def usage_json(usage: RunUsage) -> dict[str, int]:
    """Requests, tool calls and tokens, as the command's `--json` and the web stream write them."""
    return {
        "requests": usage.requests,
        "tool_calls": usage.tool_calls,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
    }
