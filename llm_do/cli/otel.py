"""`llm-do run --otel`: export the run's trace through the standard `OTEL_EXPORTER_OTLP_*` environment."""

from __future__ import annotations

import os
from collections.abc import Callable

__all__ = ["MISSING_SDK", "start_exporting"]

MISSING_SDK = (
    "--otel needs the OpenTelemetry SDK and OTLP exporter: pip install 'llm-do[otel]' "
    "(opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http)"
)


def start_exporting() -> Callable[[], None]:
    """Set a global tracer provider that exports over OTLP/HTTP, and instrument pydantic-ai's agents with it,
    so that llm-do's spans and pydantic-ai's form one trace. Returns what flushes and stops the export.

    The exporter reads `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
    `OTEL_EXPORTER_OTLP_HEADERS` and the rest; `OTEL_SERVICE_NAME` names the service (`llm-do` by default).
    Raises `ImportError` with `MISSING_SDK` as its message when the `otel` extra is not installed.
    """
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as error:
        raise ImportError(MISSING_SDK) from error
    from pydantic_ai import Agent, InstrumentationSettings

    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: "llm-do"}
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    # Prompts and answers are recorded (pydantic-ai's default); attached files' bytes are not.
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider, include_binary_content=False))
    return provider.shutdown
