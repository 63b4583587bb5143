"""The job a run belongs to, readable from inside the run (`current_job()`)."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["JobInfo", "current_job"]


@dataclass(frozen=True, slots=True)
class JobInfo:
    """The job a worker is running: what a tool needs for an idempotency key or a log line."""

    id: int
    entry: str
    attempt: int
    """Which run of the job this is: 1 for the first, 2, 3, ... for each retry (configured, after a worker's
    shutdown or after its death). Once this run ended, `JobRecord.attempts` is this number."""
    worker: str | None
    traceparent: str | None
    """The W3C trace context the job was deferred with, if any."""


_current: ContextVar[JobInfo | None] = ContextVar("llm_do_job", default=None)


def current_job() -> JobInfo | None:
    """The job whose run is calling, or None outside a job (a direct `Runtime.run`)."""
    return _current.get()


def set_current(info: JobInfo | None) -> object:
    """Set the job of the current context; returns the token `reset_current` takes."""
    return _current.set(info)


def reset_current(token: object) -> None:
    _current.reset(token)  # type: ignore[arg-type]
