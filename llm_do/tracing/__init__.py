"""Tracing with OpenTelemetry's API: a span per run and per call, llm-do's facts as attributes and events,
and the W3C trace context that carries a trace from one process to another.

Only `opentelemetry-api` is used here. With no tracer provider set (the API's default), a run asks
once whether tracing is on and does nothing more. Install the SDK (the `otel` extra) and set a
provider, or pass `Runtime(tracer_provider=...)`, to record spans.

Helpers for carrying a trace across processes (a web request that defers a job, the worker that runs it):

    carrier = inject_trace_context()          # {"traceparent": "00-...", ...}: store it with the job
    await runtime.run("clerk", prompt, trace_parent=carrier)   # in the worker: the run continues the trace

May import: scopes, events.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any, Protocol

from opentelemetry import context as otel_context, trace
from opentelemetry.context import Context
from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider, Span, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = [
    "CURRENT",
    "SpanScope",
    "TraceParent",
    "Tracing",
    "add_event",
    "continue_trace",
    "current_span",
    "current_traceparent",
    "extract_trace_context",
    "inject_trace_context",
    "start_call",
    "start_run",
]

TraceParent = str | Mapping[str, str]
"""A W3C `traceparent` header value, or a carrier mapping holding `traceparent` (and `tracestate`)."""

CURRENT: ContextVar[Span | None] = ContextVar("llm_do_span", default=None)
"""The innermost llm-do span (a call's, else the run's) of the current context; None when tracing is off."""

_PROPAGATOR = TraceContextTextMapPropagator()
_SCOPE = "llm_do"


# -- across processes ----------------------------------------------------------------


def inject_trace_context(carrier: dict[str, str] | None = None) -> dict[str, str]:
    """The W3C trace context of the current span, as `{"traceparent": ..., "tracestate": ...}`.

    Store it with a job so the run that handles the job continues this trace. Empty when no span is
    being recorded (tracing off, or no span current). `carrier`, when given, is filled and returned.
    """
    carrier = {} if carrier is None else carrier
    _PROPAGATOR.inject(carrier)
    return carrier


def current_traceparent() -> str | None:
    """The W3C `traceparent` of the current span, or None when there is none to continue."""
    return inject_trace_context().get("traceparent")


def extract_trace_context(trace_parent: TraceParent | None) -> Context:
    """An OpenTelemetry context whose current span is the remote parent named by `trace_parent`.

    A malformed or missing value gives a context without a parent (the run starts a new trace).
    """
    if trace_parent is None:
        return Context()
    carrier = {"traceparent": trace_parent} if isinstance(trace_parent, str) else trace_parent
    if not isinstance(carrier, Mapping):
        raise TypeError(
            f"trace_parent must be a W3C traceparent string or a mapping holding one, got {type(trace_parent).__name__}"
        )
    return _PROPAGATOR.extract(carrier, context=Context())


@contextmanager
def continue_trace(trace_parent: TraceParent | None) -> Iterator[Context]:
    """Make the remote span named by `trace_parent` the current parent inside the block.

    For code around a run (a worker's own spans); `Runtime.run(..., trace_parent=...)` does this itself.
    """
    ctx = extract_trace_context(trace_parent)
    token = otel_context.attach(ctx)
    try:
        yield ctx
    finally:
        otel_context.detach(token)


# -- spans of runs and calls -----------------------------------------------------------


def current_span() -> Span | None:
    """The span of the llm-do call running here (in a tool too), else of the run; None when tracing is off.

    Add your own events or attributes to it: `current_span().add_event("cache miss", {...})`.
    """
    return CURRENT.get()


class Tracing:
    """A runtime's tracer: from its own provider, else the global one; None while no provider is set."""

    __slots__ = ("_provider", "_source", "_tracer")

    def __init__(self, provider: trace.TracerProvider | None = None) -> None:
        self._provider = provider
        self._source: trace.TracerProvider | None = None
        self._tracer: Tracer | None = None

    def tracer(self) -> Tracer | None:
        provider = self._provider
        if provider is None:
            provider = trace.get_tracer_provider()
            if isinstance(provider, ProxyTracerProvider | NoOpTracerProvider):
                return None
        if provider is not self._source:
            self._tracer = provider.get_tracer(_SCOPE)
            self._source = provider
        return self._tracer


class _Usage(Protocol):
    requests: int
    tool_calls: int
    input_tokens: int
    output_tokens: int


class SpanScope:
    """A span that is current (for OpenTelemetry and as `CURRENT`) from its start until `end`."""

    __slots__ = ("_otel_token", "_token", "span")

    def __init__(self, span: Span) -> None:
        self.span = span
        self._otel_token = otel_context.attach(trace.set_span_in_context(span))
        self._token: Token[Span | None] = CURRENT.set(span)

    def end(self, outcome: str, error: BaseException | None, usage: _Usage | None) -> None:
        """Record the outcome (and usage), end the span and restore the context it replaced."""
        span = self.span
        try:
            if span.is_recording():
                attributes: dict[str, Any] = {"llm_do.outcome": outcome}
                if usage is not None:
                    attributes.update(
                        {
                            "llm_do.usage.requests": usage.requests,
                            "llm_do.usage.tool_calls": usage.tool_calls,
                            "llm_do.usage.input_tokens": usage.input_tokens,
                            "llm_do.usage.output_tokens": usage.output_tokens,
                        }
                    )
                span.set_attributes(attributes)
                if outcome == "cancelled":
                    span.set_status(Status(StatusCode.ERROR, "cancelled"))
                elif error is not None:
                    span.record_exception(error)
                    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            span.end()
        finally:
            CURRENT.reset(self._token)
            otel_context.detach(self._otel_token)


def start_run(tracer: Tracer, entry: str, parent: Context | None) -> SpanScope:
    """Start (and make current) the span of a run of `entry`, under `parent` when given."""
    span = tracer.start_span(f"llm_do.run {entry}", context=parent, attributes={"llm_do.entry": entry})
    return SpanScope(span)


class _File(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def media_type(self) -> str: ...
    @property
    def size(self) -> int: ...


def start_call(
    tracer: Tracer,
    call_id: str,
    depth: int,
    entry: str,
    parent: str | None,
    toolsets: tuple[str, ...],
    attachments: Sequence[_File] = (),
) -> SpanScope:
    """Start (and make current) the span of one call, under whatever span is current."""
    attributes: dict[str, Any] = {
        "llm_do.entry": entry,
        "llm_do.call.id": call_id,
        "llm_do.call.depth": depth,
        "llm_do.toolsets": toolsets,
    }
    if parent is not None:
        attributes["llm_do.call.parent"] = parent
    if attachments:
        attributes["llm_do.attachments.names"] = [item.name for item in attachments]
        attributes["llm_do.attachments.media_types"] = [item.media_type for item in attachments]
        attributes["llm_do.attachments.sizes"] = [item.size for item in attachments]
    return SpanScope(tracer.start_span(f"llm_do.call {entry}", attributes=attributes))


def add_event(span: Span, name: str, attributes: Mapping[str, Any], error: BaseException | None = None) -> None:
    """Add the event `llm_do.<name>` to `span`; `error`, when given, as `exception.type` and `exception.message`."""
    if error is not None:
        attributes = {**attributes, "exception.type": type(error).__qualname__, "exception.message": str(error)}
    span.add_event(f"llm_do.{name}", attributes)
