"""`cancelled_run_report`: cancel a run once it has started, and read what its cancellation carries."""

from __future__ import annotations

import asyncio
from typing import Any

from llm_do import RunReport, Runtime, run_report

__all__ = ["cancelled_run_report"]


async def cancelled_run_report(runtime: Runtime, entry: str, input_data: Any, started: asyncio.Event) -> RunReport:
    """Run `entry`, cancel the run once `started` is set, and return the report its `CancelledError` carries.

    A tool of the entry sets `started` when the run has got where the test wants to cancel it (`started` is
    cleared first). The run must end cancelled, with a report: anything else raises `AssertionError`.
    """
    started.clear()
    task = asyncio.create_task(runtime.run(entry, input_data))
    await started.wait()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError as cancelled:
        report = run_report(cancelled)
    else:
        raise AssertionError(f"the run of {entry!r} was not cancelled: it ended with {task.result()!r}")
    if report is None or report.outcome != "cancelled":
        raise AssertionError(f"the cancelled run of {entry!r} carries {report!r}, not a cancelled run's report")
    return report
