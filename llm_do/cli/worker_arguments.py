"""The arguments of `llm-do worker`, kept apart from the worker so that parsing imports nothing heavy."""

from __future__ import annotations

import argparse

__all__ = ["worker_arguments"]


def worker_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `worker` command's arguments to its parser."""
    parser.add_argument("target", metavar="PROJECT_OR_MODULE", help="a project, or module[:attribute] of a JobQueue")
    parser.add_argument("--concurrency", type=int, metavar="N", help="jobs run at once (LLM_DO_WORKER_CONCURRENCY)")
    parser.add_argument("--name", help="the worker's name in logs and results (default: host:pid)")
    parser.add_argument("--app-dir", default=".", metavar="DIR", help="import the module from DIR (default: .)")
    parser.add_argument("-m", "--model", help="a project's model for workers that name none")
    parser.add_argument(
        "--otel", action="store_true", help="export traces (OTEL_EXPORTER_OTLP_*); runs continue the job's trace"
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="-v: info logs; -vv: debug logs")
    parser.add_argument("--debug", action="store_true", help="print tracebacks")
