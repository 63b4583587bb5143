"""Agent runs as background jobs on procrastinate (a PostgreSQL task queue). See docs/jobs.md.

Needs the `jobs` extra (`pip install 'llm-do[jobs]'`); llm-do's core never imports this package.

```python
queue = JobQueue("postgresql://...", entries=["clerk"], runtime=lambda: Runtime(App(), entries=[clerk]))
async with queue:
    job_id = await queue.defer("clerk", "Move 10 from A to B")
    record = await queue.get(job_id)     # status, output, usage, calls, error
await run_worker(queue, WorkerOptions(concurrency=10))   # or: llm-do worker module:queue
```

`JobQueue(..., approvals="park")` parks a job whose call needs a person's decision (`awaiting_approval`,
holding no worker) until `queue.decide(job_id, approval_id, "approve" | "deny")`. `LiveParking(queue, runtime)`
streams a session's live runs that park the same way when a question waits longer than `LLM_DO_JOBS_PARK_AFTER`.

May import: errors, scopes, files, approvals, di, guards, results, sessions, tracing, run, models, process.
"""

from procrastinate import RetryStrategy

from .context import JobInfo, current_job
from .live import LiveParking, LiveRunParked, LiveRunTakenOver, SessionJob
from .parking import DecisionRefused, PendingApproval, RunParked
from .queue import JobEntry, JobQueue, RuntimeFactory
from .records import FINAL_STATUSES, InvalidJobRequest, JobNotFound, JobRecord, JobStatus
from .retry import WorkerShutdown
from .rounds import ParkingDiverged
from .settings import JobSettings
from .worker import WorkerOptions, expire_approvals, recover_stalled_jobs, remove_old_journals, run_worker

__all__ = [
    "FINAL_STATUSES",
    "DecisionRefused",
    "InvalidJobRequest",
    "JobEntry",
    "JobInfo",
    "JobNotFound",
    "JobQueue",
    "JobRecord",
    "JobSettings",
    "JobStatus",
    "LiveParking",
    "LiveRunParked",
    "LiveRunTakenOver",
    "ParkingDiverged",
    "PendingApproval",
    "RetryStrategy",
    "RunParked",
    "RuntimeFactory",
    "SessionJob",
    "WorkerOptions",
    "WorkerShutdown",
    "current_job",
    "expire_approvals",
    "recover_stalled_jobs",
    "remove_old_journals",
    "run_worker",
]
