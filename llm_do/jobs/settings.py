"""Settings of the jobs database and of workers (`LLM_DO_*` variables, like llm-do's own)."""

from __future__ import annotations

from pydantic import Field, SecretStr

from .. import LlmDoSettings

__all__ = ["JobSettings"]


class JobSettings(LlmDoSettings):
    """llm-do's settings plus the jobs database and the worker's defaults."""

    jobs_database_url: SecretStr | None = None
    """The database procrastinate's queue lives in (`LLM_DO_JOBS_DATABASE_URL`); unset: `LLM_DO_DATABASE_URL`."""
    jobs_journal_retention: float = Field(default=7 * 24 * 3600.0, ge=0)
    """Seconds a finished job's journal of model responses is kept before the workers remove it
    (`LLM_DO_JOBS_JOURNAL_RETENTION`; default 7 days; 0: at the next housekeeping after the job ends)."""
    jobs_approval_expiry: float = Field(default=7 * 24 * 3600.0, gt=0)
    """Seconds a parked job's question waits for a decision before the workers deny it, and the job goes on
    reading the denial (`LLM_DO_JOBS_APPROVAL_EXPIRY`; default 7 days)."""
    jobs_parking_rounds: int = Field(default=3, ge=0)
    """How many times in a row a parked job's resumed run may go live before its question (a request differed from
    the journal: a tool's result changed) and park again; the next time the job fails, naming the tool
    (`LLM_DO_JOBS_PARKING_ROUNDS`; default 3)."""
    jobs_park_after: float = Field(default=300.0, gt=0)
    """Seconds a question of a live run started through a `LiveParking` (a session's run, with a queue the
    application gives) waits for a person before the run parks as a job of that queue, freeing what it holds
    (`LLM_DO_JOBS_PARK_AFTER`; default 300; below `LLM_DO_APPROVAL_TIMEOUT`, which would deny it first). Live
    runs started without a `LiveParking` never park."""
    worker_concurrency: int = Field(default=10, ge=1)
    """Jobs one worker process runs at once (`LLM_DO_WORKER_CONCURRENCY`; `--concurrency` wins)."""
    worker_heartbeat: float = Field(default=5.0, gt=0)
    """Seconds between a worker's heartbeats (`LLM_DO_WORKER_HEARTBEAT`)."""
    worker_stalled_timeout: float = Field(default=30.0, gt=0)
    """Seconds without a heartbeat after which a worker counts as dead and its running jobs are run
    again by another worker (`LLM_DO_WORKER_STALLED_TIMEOUT`); keep it several heartbeats long."""
    worker_shutdown_timeout: float = Field(default=30.0, ge=0)
    """On SIGTERM or SIGINT, seconds the running jobs may take to finish before they are cancelled."""
    worker_database_timeout: float = Field(default=30.0, gt=0)
    """Seconds a worker waits for a database connection before it treats PostgreSQL as gone, stops
    taking jobs and reconnects (`LLM_DO_WORKER_DATABASE_TIMEOUT`); shorter outages only delay jobs."""
