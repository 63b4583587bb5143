"""Waking a queue's workers for a job queued again: a decided parked job, a dead worker's job.

procrastinate's workers listen for its notifications (PostgreSQL `LISTEN`), but its trigger sends one only when a
job is inserted: a job queued again by an update (`retry_job`) would wait for the workers' next poll
(`WorkerOptions.poll_interval`, 1 s). This sends the notification procrastinate's trigger sends for an insert, on the
same channels, from the transaction that queues the job: PostgreSQL delivers it when that transaction commits, and
not at all if it rolls back.
"""

from __future__ import annotations

import json
from typing import Any

from procrastinate.manager import get_channel_for_queues
from psycopg import AsyncConnection

__all__ = ["wake_workers"]

_NOTIFY = "SELECT pg_notify(%s, %s), pg_notify(%s, %s)"


async def wake_workers(conn: AsyncConnection[Any], queue: str, job_id: int) -> None:
    """Tell the workers of `queue` (and those listening to every queue) that job `job_id` can be taken, once the
    transaction of `conn` commits."""
    payload = json.dumps({"type": "job_inserted", "job_id": job_id})
    [own] = get_channel_for_queues([queue])
    [every] = get_channel_for_queues(None)
    await conn.execute(_NOTIFY, (own, payload, every, payload))
