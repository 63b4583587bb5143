"""Tracing as an observer: the spans of a run and its calls, and llm-do's events on them.

A run whose runtime has a tracer gets one `TracingObserver`. It opens the run's span when the run
starts and a span per call (each current in its call's context, so pydantic-ai's spans nest
under it), puts approvals, handles and teardown errors as events on the span current where they
happen, and ends each span with its outcome and usage.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import Tracer
from pydantic_ai.models import Model

from ..events import (
    AgentStarted,
    ApprovalDecided,
    ApprovalRequested,
    CallEnded,
    CallStarted,
    Event,
    HandleClosed,
    HandleOpened,
    HandleRolledBack,
    RunEnded,
    RunStarted,
)
from ..scopes import FinalizerFailed
from . import CURRENT, SpanScope, add_event, start_call, start_run

__all__ = ["TracingObserver"]


class TracingObserver:
    """The spans of one run: the run's, and one per call while it runs."""

    __slots__ = ("_spans", "tracer")

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self._spans: dict[str | None, SpanScope] = {}

    def notify(self, event: Event) -> None:
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def _run_started(self, event: RunStarted) -> None:
        self._spans[None] = start_run(self.tracer, event.entry, None)

    def _run_ended(self, event: RunEnded) -> None:
        span = self._spans.pop(None, None)
        if span is not None:
            span.end(event.outcome, event.error, event.usage)

    def _call_started(self, event: CallStarted) -> None:
        call = event.call
        self._spans[call.id] = start_call(
            self.tracer, call.id, call.depth, call.entry, call.parent, event.toolsets, event.attachments
        )

    def _call_ended(self, event: CallEnded) -> None:
        span = self._spans.pop(event.call.id, None)
        if span is not None:
            span.end(event.outcome, event.error, event.usage)

    def _agent_started(self, event: AgentStarted) -> None:
        span = CURRENT.get()
        if span is not None:
            span.set_attribute("llm_do.model", _model_name(event.model))

    def _approval_requested(self, event: ApprovalRequested) -> None:
        request = event.request
        _add(
            "approval.asked",
            {
                **_where(event),
                "llm_do.approval.verdict": event.decision,
                "llm_do.approval.reason": request.reason,
            },
        )

    def _approval_decided(self, event: ApprovalDecided) -> None:
        decided: dict[str, Any] = {**_where(event), "llm_do.approval.approved": event.approved}
        if event.why is not None:
            decided["llm_do.approval.why"] = event.why
        _add("approval.decided", decided, event.error)

    def _handle_opened(self, event: HandleOpened) -> None:
        _add("handle.opened", {"llm_do.handle": event.handle})

    def _handle_closed(self, event: HandleClosed) -> None:
        _add("handle.closed", {"llm_do.handle": event.handle})

    def _handle_rolled_back(self, event: HandleRolledBack) -> None:
        _add("handle.rolled_back", {"llm_do.handle": event.handle}, event.error)

    def _finalizer_failed(self, event: FinalizerFailed) -> None:
        _add("teardown.error", {"llm_do.finalizer": event.label}, event.error)


_HANDLERS: dict[type, Any] = {
    RunStarted: TracingObserver._run_started,
    RunEnded: TracingObserver._run_ended,
    CallStarted: TracingObserver._call_started,
    CallEnded: TracingObserver._call_ended,
    AgentStarted: TracingObserver._agent_started,
    ApprovalRequested: TracingObserver._approval_requested,
    ApprovalDecided: TracingObserver._approval_decided,
    HandleOpened: TracingObserver._handle_opened,
    HandleClosed: TracingObserver._handle_closed,
    HandleRolledBack: TracingObserver._handle_rolled_back,
    FinalizerFailed: TracingObserver._finalizer_failed,
}


def _add(name: str, attributes: dict[str, Any], error: BaseException | None = None) -> None:
    """An event on the llm-do span current where it happened (the call's, else the run's)."""
    span = CURRENT.get()
    if span is not None:
        add_event(span, name, attributes, error)


def _where(event: ApprovalRequested | ApprovalDecided) -> dict[str, Any]:
    return {"llm_do.toolset": event.request.toolset, "llm_do.tool": event.request.tool}


def _model_name(model: Model | str | None) -> str:
    if isinstance(model, Model):
        return f"{model.system}:{model.model_name}"
    return model or "none"
