"""llm-do's table of job results, beside procrastinate's tables, read and written with psycopg.

procrastinate keeps each job's status; llm-do keeps what its last finished run left (output, usage,
calls, error) in `llm_do_job_results`, one row per job, written by the worker that ran it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow, dict_row
from psycopg.types.json import Json
from psycopg_pool import AsyncConnectionPool

from .journal_writer import DROP, JournalRows
from .parking import AWAITING_SQL
from .pgtext import add_missing_column, storable_text, store_json_as_text
from .records import JobRecord

__all__ = ["RESULTS_TABLE", "create_results_table", "fetch_records", "write_result"]

RESULTS_TABLE = "llm_do_job_results"

_CREATE = """
CREATE TABLE IF NOT EXISTS llm_do_job_results (
    job_id bigint PRIMARY KEY,
    entry text NOT NULL,
    outcome text NOT NULL CHECK (outcome IN ('ok', 'error', 'cancelled')),
    output json,
    usage json NOT NULL,
    calls json NOT NULL,
    error text,
    attempt integer NOT NULL,
    worker text,
    started_at timestamptz NOT NULL,
    finished_at timestamptz NOT NULL
)
"""

_WRITE = """
INSERT INTO llm_do_job_results
    (job_id, entry, outcome, output, usage, calls, error, attempt, worker, started_at, finished_at, journal)
VALUES (%(job_id)s, %(entry)s, %(outcome)s, %(output)s, %(usage)s, %(calls)s, %(error)s, %(attempt)s,
        %(worker)s, %(started_at)s, %(finished_at)s, %(journal)s)
ON CONFLICT (job_id) DO UPDATE SET
    entry = EXCLUDED.entry, outcome = EXCLUDED.outcome, output = EXCLUDED.output, usage = EXCLUDED.usage,
    calls = EXCLUDED.calls, error = EXCLUDED.error, attempt = EXCLUDED.attempt, worker = EXCLUDED.worker,
    started_at = EXCLUDED.started_at, finished_at = EXCLUDED.finished_at, journal = EXCLUDED.journal
"""

_WRITE_WITH_JOURNAL = (
    """
WITH journal AS (
    INSERT INTO llm_do_journal (queue, job_id, call_path, position, key, response, attempt)
    SELECT queue, job_id, call_path, position, key, response::json, attempt
      FROM unnest(%(j_queue)s::text[], %(j_job_id)s::bigint[], %(j_call)s::text[], %(j_position)s::integer[],
                  %(j_key)s::text[], %(j_response)s::text[], %(j_attempt)s::integer[])
           AS given (queue, job_id, call_path, position, key, response, attempt)
    ON CONFLICT (queue, job_id, call_path, position) DO UPDATE SET
        key = EXCLUDED.key, response = EXCLUDED.response, attempt = EXCLUDED.attempt, written_at = now()
)"""
    + _WRITE
)
"""The result, and the journal rows its run had not written yet, in one statement (one transaction)."""

_JOURNAL_COLUMNS = ("j_queue", "j_job_id", "j_call", "j_position", "j_key", "j_response", "j_attempt")

_SELECT = """
SELECT j.id, j.task_name, {status} AS status, j.attempts, j.args - 'attachments' AS args,
       (SELECT jsonb_agg(a - 'data') FROM jsonb_array_elements(j.args->'attachments') AS a) AS attachments,
       j.abort_requested,
       r.outcome, r.output, r.usage, r.calls, r.error, r.worker, r.started_at, r.finished_at, r.journal
  FROM procrastinate_jobs j
  LEFT JOIN llm_do_job_results r ON r.job_id = j.id
 WHERE j.queue_name = %(queue)s AND j.task_name = ANY(%(tasks)s)
"""


async def create_results_table(conn: AsyncConnection[Any]) -> None:
    await conn.execute(_CREATE)
    await add_missing_column(conn, RESULTS_TABLE, "journal", "json")  # tables made before the journal existed
    await store_json_as_text(conn, RESULTS_TABLE, "output", "usage", "calls", "journal")


async def write_result(
    pool: AsyncConnectionPool[Any],
    *,
    job_id: int,
    entry: str,
    outcome: str,
    output: Any,
    usage: dict[str, int],
    calls: list[dict[str, Any]],
    error: str | None,
    attempt: int,
    worker: str | None,
    started_at: datetime,
    finished_at: datetime,
    journal: dict[str, Any] | None = None,
    journal_rows: JournalRows | None = None,
) -> None:
    """Store what a run left for `job_id`, replacing what an earlier attempt left; with `journal_rows` (what its
    journal had not written yet), in the same round trip and transaction."""
    values = {
        "job_id": job_id,
        "entry": entry,
        "outcome": outcome,
        "output": Json(output),
        "usage": Json(usage),
        "calls": Json(calls),
        "error": None if error is None else storable_text(error),
        "attempt": attempt,
        "worker": worker,
        "started_at": started_at,
        "finished_at": finished_at,
        "journal": None if journal is None else Json(journal),
    }
    async with pool.connection() as conn:
        if not journal_rows:
            await conn.execute(_WRITE, values)
            return
        columns = zip(*journal_rows.rows, strict=True) if journal_rows.rows else [()] * len(_JOURNAL_COLUMNS)
        values.update((name, list(column)) for name, column in zip(_JOURNAL_COLUMNS, columns, strict=True))
        if not journal_rows.stale:
            await conn.execute(_WRITE_WITH_JOURNAL, values)
            return
        async with conn.pipeline():  # the stale rows go first (a call's rows from there on are replaced)
            for dropped in journal_rows.stale:
                await conn.execute(DROP, dropped)
            await conn.execute(_WRITE_WITH_JOURNAL, values)


async def fetch_records(
    pool: AsyncConnectionPool[Any],
    queue: str,
    tasks: dict[str, str],
    *,
    job_id: int | None = None,
    statuses: Sequence[str] | None = None,
    entries: Iterable[str] | None = None,
    limit: int = 100,
) -> list[JobRecord]:
    """Jobs of the queue `queue` and the tasks `tasks` (procrastinate task name -> entry), newest first.

    Both filters are needed: procrastinate's task names are global to a database, so two queues that
    declare the same entry share its task name."""
    names = list(tasks) if entries is None else [name for name, entry in tasks.items() if entry in set(entries)]
    query = _SELECT.format(status=AWAITING_SQL)
    values: dict[str, Any] = {"queue": queue, "tasks": names, "limit": limit}
    if job_id is not None:
        query += " AND j.id = %(job_id)s"
        values["job_id"] = job_id
    if statuses is not None:
        query += f" AND {AWAITING_SQL} = ANY(%(statuses)s)"
        values["statuses"] = list(statuses)
    query += " ORDER BY j.id DESC LIMIT %(limit)s"
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(query, values)
        rows = await cursor.fetchall()
    return [_record(row, tasks) for row in rows]


def _record(row: DictRow, tasks: dict[str, str]) -> JobRecord:
    args = row["args"] or {}
    return JobRecord(
        id=row["id"],
        entry=tasks[row["task_name"]],
        status=row["status"],
        attempts=row["attempts"],
        input=args.get("input"),
        traceparent=args.get("traceparent"),
        attachments=tuple(row["attachments"] or ()),
        cancel_requested=bool(row["abort_requested"]) and row["status"] == "doing",
        outcome=row["outcome"],
        output=row["output"],
        usage=row["usage"] or {},
        calls=tuple(row["calls"] or ()),
        error=row["error"],
        worker=row["worker"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        journal=row["journal"],
        session=args.get("session"),
    )
