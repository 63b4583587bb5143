"""Which failed runs are run again: the entry's own rule, plus every job a worker's shutdown stopped."""

from __future__ import annotations

import asyncio

from procrastinate import BaseRetryStrategy, RetryDecision
from procrastinate.jobs import Job
from procrastinate.retry import RetryValue, get_retry_strategy

from .parking import RunParked
from .rounds import ParkingDiverged

__all__ = ["JobRetry", "WorkerShutdown"]


class WorkerShutdown(Exception):
    """The worker stopped (SIGTERM past its shutdown timeout, or a lost database) while the run went on.

    The run was cancelled and torn down; the job is queued again at once, whatever the entry's retry rule.
    """


class JobRetry(BaseRetryStrategy):
    """The entry's retry rule for runs that raised; never for a cancelled or parked job, nor one whose resumed runs
    kept diverging before their question; always after a shutdown."""

    def __init__(self, retry: RetryValue) -> None:
        self.own = get_retry_strategy(retry)

    def get_retry_decision(self, *, exception: BaseException, job: Job) -> RetryDecision | None:
        if isinstance(exception, WorkerShutdown):
            return RetryDecision()
        if isinstance(exception, (asyncio.CancelledError, RunParked, ParkingDiverged)) or self.own is None:
            return None
        found = self.own.get_retry_exception(exception=exception, job=job)
        return None if found is None else found.retry_decision
