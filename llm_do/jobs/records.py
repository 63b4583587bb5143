"""What a job leaves: its status and, once a run finished, output, usage, call tree and error."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

from pydantic_core import to_jsonable_python

from ..errors import LlmDoError
from ..results import CallRecord

__all__ = [
    "FINAL_STATUSES",
    "STATUSES",
    "InvalidJobRequest",
    "JobNotFound",
    "JobRecord",
    "JobStatus",
    "calls_json",
    "checked_job_id",
    "output_json",
    "usage_json",
]

JobStatus = Literal["todo", "doing", "succeeded", "failed", "cancelled", "aborted", "awaiting_approval"]
"""procrastinate's job statuses: `todo` (queued, or waiting for a retry), `doing` (a worker runs it),
`succeeded`, `failed` (the run raised), `cancelled` (cancelled before it started), `aborted`
(cancelled while it ran, or stopped by a worker's shutdown); and llm-do's `awaiting_approval` (parked until
a person decides: see `JobQueue.decide`)."""

STATUSES: frozenset[str] = frozenset(get_args(JobStatus))
FINAL_STATUSES: frozenset[str] = frozenset({"succeeded", "failed", "cancelled", "aborted"})


class JobNotFound(LlmDoError, LookupError):
    """No job of this queue has that id."""

    def __init__(self, job_id: int) -> None:
        super().__init__(f"no llm-do job with id {job_id}; list them with JobQueue.list()")
        self.job_id = job_id


class InvalidJobRequest(LlmDoError, ValueError):
    """A `JobQueue` call given an argument that cannot be right: a job id that is not an int, an unknown status,
    a decision other than `approve` or `deny`."""


def checked_job_id(job_id: object) -> int:
    """`job_id` if it is an int (the id `JobQueue.defer` returned); `InvalidJobRequest` otherwise."""
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise InvalidJobRequest(
            f"a job id is the int JobQueue.defer returned, got {job_id!r} ({type(job_id).__name__}); "
            "convert the id you read (a URL, a form) with int() first"
        )
    return job_id


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job as stored in PostgreSQL: procrastinate's row joined with llm-do's result row."""

    id: int
    entry: str
    status: JobStatus
    attempts: int
    """Runs of this job that ended so far (procrastinate's count): 1 once a run finished, +1 per retry."""
    input: Any
    traceparent: str | None = None
    """The W3C trace context the job was deferred with; its run continues that trace."""
    attachments: tuple[Mapping[str, Any], ...] = ()
    """The files handed to the job's run: name, media type, size and digest (the job holds their bytes too)."""
    cancel_requested: bool = False
    """A cancellation was asked for while the job ran; the worker cancels the run."""
    outcome: Literal["ok", "error", "cancelled"] | None = None
    """How the last finished run ended, or None if no run finished yet."""
    output: Any = None
    """The run's output as JSON (pydantic models as their JSON form)."""
    usage: Mapping[str, int] = field(default_factory=dict)
    """Requests, tool calls and tokens of the last finished run."""
    calls: tuple[Mapping[str, Any], ...] = ()
    """Every call of the last finished run (id, parent, entry, depth, toolsets, outcome, usage), in start order."""
    error: str | None = None
    """The last failed run's exception, `Type: message`."""
    worker: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    journal: Mapping[str, Any] | None = None
    """What the journal did in the last finished run: `replayed` (requests answered from what earlier runs of
    the job journaled), `sent` (requests sent to the model) and `live_from` (each call that stopped replaying:
    `call` path, `position` of the request, `reason`: `differs` or `ends`), and `unsaved` when some responses
    could not be written; None when the entry opts out."""
    session: str | None = None
    """The session the job's run belongs to: the job is a live run of that session (`LiveParking`), live in a web
    process, parked, or taken over by a worker when that process died; its run continues the session's
    conversation. None for a job deferred with `defer`."""

    @property
    def done(self) -> bool:
        """Whether the job reached a final status (no run will start again)."""
        return self.status in FINAL_STATUSES


def output_json(output: Any) -> Any:
    """The output as JSON-compatible data; what JSON cannot hold is stored as its `repr`."""
    return to_jsonable_python(output, fallback=repr)


_USAGE_ALWAYS = ("requests", "tool_calls", "input_tokens", "output_tokens")


def usage_json(usage: Any) -> dict[str, int]:
    """Requests, tool calls and tokens; the other counters only when not zero."""
    data = to_jsonable_python(usage, fallback=repr)
    return {
        key: value
        for key, value in data.items()
        if isinstance(value, int) and not isinstance(value, bool) and (value or key in _USAGE_ALWAYS)
    }


def calls_json(calls: tuple[CallRecord, ...]) -> list[dict[str, Any]]:
    return [
        {
            "id": call.id,
            "parent": call.parent,
            "entry": call.entry,
            "depth": call.depth,
            "toolsets": list(call.toolsets),
            "outcome": call.outcome,
            "usage": usage_json(call.usage),
            **({"attachments": [info.to_json() for info in call.attachments]} if call.attachments else {}),
        }
        for call in calls
    ]
