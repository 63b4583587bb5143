"""`llm-do run --otel` and `llm-do worker --otel`: the trace reaches an OTLP/HTTP collector on loopback; without
the SDK, a clear error."""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from llm_do.jobs import JobQueue

from ..attachment_files import png
from ..cli_projects import hello_project, llm_do
from ..jobs_support import Worker, eventually, fresh_database
from ..postgres import PostgresServer


class Collector(ThreadingHTTPServer):
    """A minimal OTLP/HTTP trace receiver: keeps every export request posted to /v1/traces."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Receive)
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Receive(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.paths.append(self.path)
        self.server.requests.append(ExportTraceServiceRequest.FromString(body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[Collector]:
    server = Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def exported(collector: Collector) -> list[Span]:
    return [
        span
        for request in collector.requests
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]


def test_run_otel_exports_one_trace_over_otlp(tmp_path: Path, collector: Collector) -> None:
    project = hello_project(tmp_path / "hello")
    done = llm_do("run", project, "Hi!", "--otel", env={"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "success (no tool calls)\n"
    assert set(collector.paths) == {"/v1/traces"}
    spans = []
    services = set()
    for request in collector.requests:
        for resource_spans in request.resource_spans:
            for attribute in resource_spans.resource.attributes:
                if attribute.key == "service.name":
                    services.add(attribute.value.string_value)
            for scope_spans in resource_spans.scope_spans:
                spans.extend(scope_spans.spans)
    names = {span.name for span in spans}
    assert {"llm_do.run hello", "llm_do.call hello", "invoke_agent hello"} <= names
    assert len({span.trace_id for span in spans}) == 1
    assert services == {"llm-do"}
    by_id = {span.span_id: span for span in spans}
    agent = next(span for span in spans if span.name == "invoke_agent hello")
    assert by_id[agent.parent_span_id].name == "llm_do.call hello"


def test_run_otel_never_exports_an_attached_files_bytes(tmp_path: Path, collector: Collector) -> None:
    """pydantic-ai's spans record a prompt's binary content (base64) unless told not to: a tracing backend is read
    by more people than the file was given to."""
    project = hello_project(tmp_path / "hello")
    chart = project / "chart.png"
    chart.write_bytes(png(width=64, height=64))
    done = llm_do(
        "run", project, "Hi!", "--attach", chart, "--otel", env={"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint}
    )
    assert done.returncode == 0, done.stderr
    spans = exported(collector)
    assert any(span.name == "chat test" for span in spans)  # the model request was traced, content included
    payload = b"".join(request.SerializeToString() for request in collector.requests)
    assert base64.b64encode(chart.read_bytes()) not in payload and chart.read_bytes() not in payload
    assert b"Hi!" in payload


def test_run_otel_without_the_sdk_names_the_extra(tmp_path: Path) -> None:
    project = hello_project(tmp_path / "hello")
    code = (
        "import sys; sys.modules['opentelemetry.sdk'] = None\n"  # as if the otel extra were not installed
        "from llm_do.cli.main import main\n"
        f"sys.exit(main(['run', {str(project)!r}, 'Hi!', '--otel']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "pip install 'llm-do[otel]'" in done.stderr
    assert done.stdout == ""


async def test_worker_otel_exports_each_jobs_run_in_the_jobs_trace_while_it_runs(
    tmp_path: Path, collector: Collector, postgres: PostgresServer
) -> None:
    trace_id, parent = "ab" * 16, "cd" * 8
    async with fresh_database(postgres) as dsn, JobQueue(dsn, entries=["traced"]) as queue:
        await queue.apply_schema()
        job_id = await queue.defer("traced", None, traceparent=f"00-{trace_id}-{parent}-01")
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "200"}
        worker = Worker("tests.jobs_app:queue", dsn, tmp_path / "worker.log", env=env, args=("--otel",))
        try:
            async with asyncio.timeout(30):
                record = await queue.wait(job_id, interval=0.05)

            async def run_span_exported() -> bool:  # by the batch processor, the worker still running
                return any(span.name == "llm_do.run traced" for span in exported(collector))

            await eventually(run_span_exported, "the job's run span reached the collector")
        finally:
            assert worker.stop() == 0, worker.output()
    assert record.status == "succeeded" and record.output["trace_id"] == trace_id, record
    [run] = [span for span in exported(collector) if span.name == "llm_do.run traced"]
    assert run.trace_id.hex() == trace_id and run.parent_span_id.hex() == parent
