"""The journal of a job's model responses in PostgreSQL (`llm_do_journal`, beside procrastinate's tables).

Each response a job's run receives is written as it arrives, keyed by (queue, job id, call path,
position in the call); when the job runs again (a worker's death, a shutdown, a retry), its requests
are answered from those rows while they match exactly (see `llm_do.models.journal`). The journal of a
finished job is removed once the retention period (`LLM_DO_JOBS_JOURNAL_RETENTION`) has passed since
its end, by the workers' housekeeping (`llm_do.jobs.remove_old_journals`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

from psycopg import AsyncConnection, OperationalError
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from pydantic_ai import Agent
from pydantic_ai.models import Model, infer_model

from .. import AgentEntry, Runtime
from ..guards import GuardedModel
from ..models.journal import Journal, JournalEntry, JournalModel, JournalUnreachable
from ..models.recording import RecordedResponse
from .journal_writer import JournalRows, JournalWriter
from .pgtext import store_json_as_text
from .records import FINAL_STATUSES

__all__ = [
    "JOURNAL_TABLE",
    "LIVE_SUFFIX",
    "JobJournals",
    "PostgresJournal",
    "create_journal_table",
    "delete_old_journals",
]

JOURNAL_TABLE = "llm_do_journal"
LIVE_SUFFIX = ":live"
"""Where live runs journaled before they were jobs from their first request (an earlier llm-do: under the queue's name
with this suffix until they parked); the workers' housekeeping removes what their dead processes left."""

_CREATE = """
CREATE TABLE IF NOT EXISTS llm_do_journal (
    queue text NOT NULL,
    job_id bigint NOT NULL,
    call_path text NOT NULL,
    position integer NOT NULL,
    key text NOT NULL,
    response json NOT NULL,
    attempt integer NOT NULL,
    written_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, job_id, call_path, position)
)
"""

_LOAD = "SELECT call_path, position, response FROM llm_do_journal WHERE queue = %s AND job_id = %s"

_REMOVE = """
DELETE FROM llm_do_journal j
 WHERE j.queue = %(queue)s
   AND (NOT EXISTS (SELECT 1 FROM procrastinate_jobs p WHERE p.id = j.job_id)
        OR EXISTS (SELECT 1 FROM procrastinate_jobs p LEFT JOIN llm_do_job_results r ON r.job_id = p.id
                    WHERE p.id = j.job_id AND p.status::text = ANY(%(final)s)
                      AND GREATEST(r.finished_at, (SELECT max(e.at) FROM procrastinate_events e WHERE e.job_id = p.id))
                          < now() - make_interval(secs => %(retention)s)
                      AND NOT EXISTS (SELECT 1 FROM llm_do_approvals a
                                       WHERE a.queue = j.queue AND a.job_id = j.job_id AND a.choice IS NULL)))
"""
"""A job's end is its last status change (procrastinate's events), or its result's end if later: a job that
ended without storing a result (cancelled while parked or queued again, aborted as stalled) ends all the same."""


_REMOVE_LIVE = """
DELETE FROM llm_do_journal WHERE queue = %(live)s AND written_at < now() - make_interval(secs => %(retention)s)
"""
"""The journals of live runs that neither parked nor ended (their process died), once as old as the retention."""


async def create_journal_table(conn: AsyncConnection[Any]) -> None:
    await conn.execute(_CREATE)
    await store_json_as_text(conn, JOURNAL_TABLE, "response")


class PostgresJournal:
    """The rows of one job's journal: the `JournalStore` a job's `Journal` writes through."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        queue: str,
        job_id: int,
        attempt: int,
        writer: JournalWriter | None = None,
    ) -> None:
        self.pool = pool
        self.queue = queue
        self.job_id = job_id
        self.attempt = attempt
        self.writer = writer if writer is not None else JournalWriter(pool)
        """Shared by the jobs of a worker (`JobJournals`): their rows go to PostgreSQL together."""

    async def write(self, entries: Sequence[JournalEntry], stale: Sequence[tuple[str, int]] = ()) -> None:
        """Drop the `stale` rows, then upsert `entries`, through the writer (in one round trip)."""
        rows = self.rows(entries, stale)
        try:
            await self.writer.write(rows.rows, rows.stale)
        except (OperationalError, PoolTimeout) as error:
            raise JournalUnreachable(f"job {self.job_id}'s journal: PostgreSQL is unreachable ({error})") from error

    def rows(self, entries: Sequence[JournalEntry], stale: Sequence[tuple[str, int]] = ()) -> JournalRows:
        """`entries` and `stale` as the statements' values (`WRITE`, `DROP`), to write with other statements."""
        dropped = [(self.queue, self.job_id, call, position) for call, position in stale]
        return JournalRows([self._row(entry) for entry in entries], dropped)

    def _row(self, entry: JournalEntry) -> tuple[Any, ...]:
        recorded = entry.recorded
        return (
            self.queue,
            self.job_id,
            entry.call,
            entry.position,
            recorded.key,
            recorded.to_json_text(),
            self.attempt,
        )

    async def entries(self) -> list[JournalEntry]:
        """What earlier attempts of the job journaled."""
        async with self.pool.connection() as conn:
            rows = await (await conn.execute(_LOAD, (self.queue, self.job_id))).fetchall()
        where = f"job {self.job_id}'s journal"
        return [
            JournalEntry(call, position, RecordedResponse.from_json(data, f"{where}: {call} #{position}"))
            for call, position, data in rows
        ]


class JobJournals:
    """A worker's journals: one per job of a journaled entry, installed on the agents the entry's run reaches.

    Each `AgentEntry` agent of the runtime (the entry's, those it calls as tools, those a tool calls) gets,
    for the job's run only (`Agent.override`, a context variable), a `JournalModel` around the model
    it would use: its own, else the runtime's."""

    def __init__(self, pool: AsyncConnectionPool[Any], queue: str) -> None:
        self.pool = pool
        self.queue = queue
        self._plans: dict[tuple[int, str], list[tuple[Agent[Any, Any], Model]]] = {}
        self._writer = JournalWriter(pool)

    async def open(self, job_id: int, attempt: int) -> Journal:
        """The journal of job `job_id`, with what its earlier attempts recorded (a first attempt has none: it
        is not read)."""
        store = PostgresJournal(self.pool, self.queue, job_id, attempt, self._writer)
        entries = await store.entries() if attempt > 1 else ()
        return Journal(store, entries, source=f"job {job_id}'s journal")

    @contextmanager
    def installed(self, runtime: Runtime, entry: str, journal: Journal) -> Iterator[None]:
        """Inside the block, the model requests of a run of `entry` on `runtime` go through `journal`."""
        with ExitStack() as stack:
            for agent, model in self._plan(runtime, entry):
                # the guard's model layer outside the journal's: an override wins over the model the entry's run
                # passes, which carries the run's limits (max_tokens, request_timeout) and names a dead endpoint
                stack.enter_context(agent.override(model=GuardedModel(JournalModel(model, journal))))
            yield

    def _plan(self, runtime: Runtime, entry: str) -> list[tuple[Agent[Any, Any], Model]]:
        key = (id(runtime), entry)
        found = self._plans.get(key)
        if found is None:
            found = self._plans[key] = list(_agents(runtime, entry))
        return found


def _agents(runtime: Runtime, name: str) -> Iterator[tuple[Agent[Any, Any], Model]]:
    """The agents of every entry of the runtime (a run of `name` reaches those it calls as tools, and a tool can
    call any entry), `name`'s first, each with the model it uses (models named by a string are built once here).
    An agent a call makes in the run takes the model its maker's run uses, this journal's."""
    agents: set[int] = set()
    for current in sorted(runtime.entries.values(), key=lambda each: each.name != name):
        if not isinstance(current, AgentEntry) or id(current.agent) in agents:
            continue
        model = current.agent.model if current.agent.model is not None else runtime.config.model
        if model is None:
            continue  # pydantic-ai says so when the run starts
        agents.add(id(current.agent))
        yield current.agent, model if isinstance(model, Model) else infer_model(model)


async def delete_old_journals(pool: AsyncConnectionPool[Any], queue: str, retention: float) -> int:
    """Delete the journal rows of `queue`'s jobs that finished more than `retention` seconds ago, of jobs that no
    longer exist, and of live runs whose process died before they parked or ended (`LIVE_SUFFIX`) written that long
    ago; how many rows went."""
    values = {"queue": queue, "final": sorted(FINAL_STATUSES), "retention": retention, "live": queue + LIVE_SUFFIX}
    async with pool.connection() as conn:
        cursor = await conn.execute(_REMOVE, values)
        removed = int(cursor.rowcount)
        cursor = await conn.execute(_REMOVE_LIVE, values)
        return removed + int(cursor.rowcount)
