"""A worker's journal writes: the rows its jobs hand over while a write is under way go in the next one.

Each job's `Journal` writes its responses in order, one batch at a time (`PostgresJournal.write`); the
batches of every job of the worker meet here, and those that arrive while one write is under way are sent
together: one connection from the pool, one pipeline, one round trip. A busy worker thus spends one
statement's overhead on many rows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import OperationalError
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ..scopes import system_task

__all__ = ["DROP", "WRITE", "JournalRows", "JournalWriter"]

WRITE = """
INSERT INTO llm_do_journal (queue, job_id, call_path, position, key, response, attempt)
VALUES (%s, %s, %s, %s, %s, %s::json, %s)
ON CONFLICT (queue, job_id, call_path, position) DO UPDATE SET
    key = EXCLUDED.key, response = EXCLUDED.response, attempt = EXCLUDED.attempt, written_at = now()
"""

DROP = "DELETE FROM llm_do_journal WHERE queue = %s AND job_id = %s AND call_path = %s AND position >= %s"


@dataclass(frozen=True, slots=True)
class JournalRows:
    """Journal rows to write: values for `DROP` (run first), then for `WRITE`, in order."""

    rows: Sequence[tuple[Any, ...]]
    stale: Sequence[tuple[Any, ...]] = ()

    def __bool__(self) -> bool:
        return bool(self.rows or self.stale)


@dataclass(slots=True)
class _Batch:
    rows: Sequence[tuple[Any, ...]]
    """Values for `WRITE`, in order."""
    stale: Sequence[tuple[Any, ...]]
    """Values for `DROP`, run before the rows."""
    done: asyncio.Future[None]


class JournalWriter:
    """Writes journal rows through `pool`: what is handed over while a write is under way goes in the next one."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self.pool = pool
        self._pending: list[_Batch] = []
        self._task: asyncio.Task[None] | None = None

    async def write(self, rows: Sequence[tuple[Any, ...]], stale: Sequence[tuple[Any, ...]] = ()) -> None:
        """Run `DROP` for each of `stale`, then upsert `rows`; return once they are written (or raise why not)."""
        loop = asyncio.get_running_loop()
        batch = _Batch(rows, stale, loop.create_future())
        self._pending.append(batch)
        if self._task is None or self._task.done():
            self._task = system_task(self._write_pending)  # nothing of the writing run's context
        await batch.done

    async def _write_pending(self) -> None:
        batches: list[_Batch] = []
        try:
            while self._pending:
                batches, self._pending = self._pending, []
                await self._write(batches)
        except BaseException:  # cancelled (the loop is closing): nobody waits forever
            for batch in (*batches, *self._pending):
                batch.done.cancel()
            raise

    async def _write(self, batches: list[_Batch]) -> None:
        try:
            await self._send(batches)
        except Exception as error:
            if len(batches) == 1 or _unreachable(error):  # alone, they would wait for the database too
                _settle(batches, error)
                return
            for index, batch in enumerate(batches):  # each alone, so rows PostgreSQL refuses cost no other job
                try:
                    await self._send([batch])
                except Exception as alone:
                    _settle(batches[index:] if _unreachable(alone) else [batch], alone)
                    if _unreachable(alone):
                        return
                else:
                    _settle([batch], None)
        else:
            _settle(batches, None)

    async def _send(self, batches: Sequence[_Batch]) -> None:
        rows = [row for batch in batches for row in batch.rows]
        stale = [values for batch in batches for values in batch.stale]
        async with self.pool.connection() as conn:
            if len(rows) == 1 and not stale:
                await conn.execute(WRITE, rows[0])
                return
            async with conn.pipeline():  # one round trip; each job's drops come before its rows
                for values in stale:
                    await conn.execute(DROP, values)
                await conn.cursor().executemany(WRITE, rows)


def _unreachable(error: Exception) -> bool:
    return isinstance(error, OperationalError | PoolTimeout)


def _settle(batches: Sequence[_Batch], error: Exception | None) -> None:
    for batch in batches:
        if batch.done.done():  # its job stopped waiting (cancelled)
            continue
        if error is None:
            batch.done.set_result(None)
        else:
            batch.done.set_exception(error)
