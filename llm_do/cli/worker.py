"""`llm-do worker TARGET`: a worker process that runs agent jobs (see docs/jobs.md).

TARGET is a project (directory, project.toml or .worker file: every entry may run as a job), or a
Python module holding a `llm_do.jobs.JobQueue` (`package.module` or `package.module:attribute`).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Run a worker until it is stopped (SIGTERM, SIGINT, SIGHUP: running jobs get the shutdown timeout,
    then are cancelled and torn down, and the runtime closes); 0 once it has stopped that way."""
    err = Console(stderr=True, emoji=False)
    try:
        from ..jobs import JobQueue, WorkerOptions, run_worker
    except ImportError as error:
        raise RuntimeError(f"the worker needs the jobs extra: pip install 'llm-do[jobs]' ({error})") from None
    if args.concurrency is not None and args.concurrency < 1:
        raise ValueError(f"--concurrency must be at least 1, got {args.concurrency}")
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    queue = _queue(args, JobQueue)
    options = WorkerOptions.from_settings(concurrency=args.concurrency, name=args.name)
    err.print(f"llm-do worker: entries {', '.join(queue.entries)}; concurrency {options.concurrency}")
    stop_exporting = None
    if args.otel:
        from .otel import start_exporting

        stop_exporting = start_exporting()
    try:
        asyncio.run(run_worker(queue, options))
    finally:
        if stop_exporting is not None:
            stop_exporting()
    return 0


def _queue(args: argparse.Namespace, kind: type[Any]) -> Any:
    target: str = args.target
    if Path(target).exists():
        from ..project import load_project

        project = load_project(target, model=args.model)
        return kind(entries=list(project.entries), runtime=lambda: project.runtime)
    module_name, _, attribute = target.partition(":")
    sys.path.insert(0, str(Path(args.app_dir).resolve()))
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise ValueError(
            f"{target!r} is neither a project path nor an importable module ({error}); "
            "give a project directory, or module[:attribute] with --app-dir DIR"
        ) from None
    if attribute:
        found = getattr(module, attribute, None)
        if not isinstance(found, kind):
            raise ValueError(f"{module_name}.{attribute} is not a JobQueue (got {type(found).__name__})")
        return found
    queues = {name: value for name, value in vars(module).items() if isinstance(value, kind)}
    if len(queues) != 1:
        names = ", ".join(queues) or "none"
        raise ValueError(
            f"module {module_name} must hold exactly one JobQueue (found: {names}); name it as {target}:NAME"
        )
    return next(iter(queues.values()))
