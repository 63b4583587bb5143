"""A conversation's run in flight found from every web process: its stream and its questions in PostgreSQL.

`PostgresRuns` is the chat router's `ChatRuns` when it is given a database (`chat_router(database_url=...)`). Each
run a process starts is encoded once into its `RunLog` (`chunklog`), which the process's own readers read, and
written to PostgreSQL as it goes by a writer task of the run's own:

- `llm_do_chat_runs`: the run in flight (its message id, its conversation, the person's message) and the process
  that runs it (the backend of that process's listening connection: a run whose process is gone is not listed);
- `llm_do_chat_run_chunks`: its stream, a row per batch of chunks (the chunks written while the last batch was
  being written, or within `linger` seconds: a question, its answer and the run's end are written at once), each
  batch announced with a `NOTIFY` on `channel`;
- `llm_do_chat_questions`: every question it asked, pending or not, written with the batch that shows it.

Another process finds the conversation's run there (`find`), reads its stream from the first chunk or from after
the one a reader had (`RemoteRun.chunks`), each batch as its `NOTIFY` comes (and every `poll` seconds, should a
notification be missed), and lists its open questions (`open_questions`): the inbox of any process (`LiveQuestions`,
which answers them through the decision relay). A run's rows stay `retention` seconds after it ended (a reader
behind it reads its end), then the next run's end deletes them. When the log merges deltas (`keep`), its rows are
written again, merged.

Needs asyncpg (the `postgres` extra), imported when it opens.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from .. import ApprovalChoice, ApprovalRequest, AttachmentInfo, LiveRun, Runtime
from ..errors import ConfigurationError
from ..sessions import OpenQuestion
from .chunklog import DONE, RunLog, Sent, record
from .relay import Relay
from .runs import LoggedRun, RunInFlight

if TYPE_CHECKING:
    import asyncpg

__all__ = ["LiveQuestions", "PostgresRuns", "RemoteRun"]

logger = logging.getLogger("llm_do")

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS llm_do_chat_runs (
        run_id text PRIMARY KEY,
        conversation_id text NOT NULL,
        prompt text,
        owner_pid integer NOT NULL,
        owner_started timestamptz,
        started_at timestamptz NOT NULL DEFAULT now(),
        ended_at timestamptz
    )""",
    "CREATE INDEX IF NOT EXISTS llm_do_chat_runs_in_flight ON llm_do_chat_runs (conversation_id) "
    "WHERE ended_at IS NULL",
    "CREATE INDEX IF NOT EXISTS llm_do_chat_runs_ended ON llm_do_chat_runs (ended_at) WHERE ended_at IS NOT NULL",
    """CREATE TABLE IF NOT EXISTS llm_do_chat_run_chunks (
        run_id text NOT NULL REFERENCES llm_do_chat_runs ON DELETE CASCADE,
        last_seq bigint NOT NULL,
        body text NOT NULL,
        PRIMARY KEY (run_id, last_seq)
    )""",
    """CREATE TABLE IF NOT EXISTS llm_do_chat_questions (
        run_id text NOT NULL REFERENCES llm_do_chat_runs ON DELETE CASCADE,
        approval_id text NOT NULL,
        conversation_id text NOT NULL,
        request json NOT NULL,
        pending boolean NOT NULL,
        asked_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        PRIMARY KEY (run_id, approval_id)
    )""",
    "CREATE INDEX IF NOT EXISTS llm_do_chat_questions_pending ON llm_do_chat_questions (conversation_id) WHERE pending",
)

_ALIVE = (
    "EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = r.owner_pid "
    "AND (a.backend_start IS NULL OR r.owner_started IS NULL OR a.backend_start = r.owner_started))"
)
"""The run's process is there: its listening connection is (its backend's start tells a reused pid apart)."""

_BATCH = """
WITH batch AS (INSERT INTO llm_do_chat_run_chunks (run_id, last_seq, body) VALUES ($1, $2, $3))
SELECT pg_notify($4, $1)
"""
_RUN = """
INSERT INTO llm_do_chat_runs (run_id, conversation_id, prompt, owner_pid, owner_started) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (run_id) DO UPDATE SET owner_pid = EXCLUDED.owner_pid, owner_started = EXCLUDED.owner_started
"""
_QUESTIONS = """
INSERT INTO llm_do_chat_questions (run_id, approval_id, conversation_id, request, pending)
SELECT $1, approval_id, $2, request::json, pending FROM unnest($3::text[], $4::text[], $5::bool[])
    AS asked(approval_id, request, pending)
ON CONFLICT (run_id, approval_id) DO UPDATE SET pending = EXCLUDED.pending
"""
_FIND = f"""
SELECT r.run_id, r.prompt,
       (SELECT json_agg(json_build_array(q.request, q.pending) ORDER BY q.asked_at, q.approval_id)
          FROM llm_do_chat_questions q WHERE q.run_id = r.run_id) AS questions
  FROM llm_do_chat_runs r
 WHERE r.conversation_id = $1 AND r.ended_at IS NULL AND r.owner_pid <> $2 AND {_ALIVE}
 ORDER BY r.started_at DESC LIMIT 1
"""
_OPEN = f"""
SELECT q.request, q.run_id, q.asked_at FROM llm_do_chat_questions q JOIN llm_do_chat_runs r USING (run_id)
 WHERE q.conversation_id = $1 AND q.pending AND r.ended_at IS NULL AND {_ALIVE}
 ORDER BY q.asked_at, q.approval_id
"""
_READ = "SELECT body FROM llm_do_chat_run_chunks WHERE run_id = $1 AND last_seq > $2 ORDER BY last_seq"
_PENDING = "SELECT request FROM llm_do_chat_questions WHERE run_id = $1 AND pending ORDER BY asked_at, approval_id"
_STATE = f"""
SELECT r.ended_at IS NOT NULL AS ended, {_ALIVE} AS alive,
       (SELECT c.body FROM llm_do_chat_run_chunks c WHERE c.run_id = r.run_id ORDER BY c.last_seq DESC LIMIT 1) AS last
  FROM llm_do_chat_runs r WHERE r.run_id = $1
"""
_SWEEP = f"""
DELETE FROM llm_do_chat_runs r
 WHERE r.ended_at < now() - make_interval(secs => $1) OR (r.ended_at IS NULL AND NOT {_ALIVE})
"""
_SWEEP_ENDED = "DELETE FROM llm_do_chat_runs WHERE ended_at < now() - make_interval(secs => $1)"

_ASKING = '{"type":"tool-approval-request"'
"""The chunk that shows a question first (its description, `Sent.asked`, follows)."""
_URGENT = (_ASKING, '{"type":"data-llm-do-approval"')
"""Chunks written at once: a question shown, its description, its answer."""

_GONE = (
    '{"type":"error","errorText":"the process running this conversation\'s answer stopped before it ended; '
    'reload the conversation: its answer may go on in a job, else send the message again"}'
)


def _line(chunk: Sent) -> str:
    """A chunk as a line of a stored batch: its number, what it is, its JSON (which holds no tab or newline)."""
    if chunk.cuts:
        flag = "m" + ";".join(f"{number},{offset}" for number, offset in chunk.cuts)
    elif chunk.asked is not None:
        flag = "a" + chunk.asked
    else:
        flag = "s" if chunk.start else "7" if chunk.sdk7 else ""
    return f"{chunk.seq}\t{flag}\t{chunk.data}"


def _chunk(line: str) -> Sent:
    number, flag, data = line.split("\t", 2)
    seq = int(number)
    if not flag:
        return Sent(seq, data)
    kind = flag[0]
    if kind == "m":
        cuts = tuple((int(a), int(b)) for a, b in (cut.split(",") for cut in flag[1:].split(";")))
        return Sent(seq, data, cuts=cuts)
    if kind == "a":
        return Sent(seq, data, asked=flag[1:])
    return Sent(seq, data, start=kind == "s", sdk7=kind == "7")


def _request_json(request: ApprovalRequest) -> str:
    return json.dumps(
        {
            "entry": request.entry,
            "depth": request.depth,
            "chain": list(request.chain),
            "toolset": request.toolset,
            "tool": request.tool,
            "args": to_jsonable_python(dict(request.args), fallback=repr),
            "reason": request.reason,
            "description": request.description,
            "approval_id": request.approval_id,
            "call_id": request.call_id,
            "tool_call_id": request.tool_call_id,
            "attachments": [info.to_json() for info in request.attachments],
            "session_id": request.session_id,
        },
        ensure_ascii=False,
    )


def _request(stored: Any) -> ApprovalRequest:
    data = json.loads(stored) if isinstance(stored, str) else dict(stored)
    return ApprovalRequest(
        entry=data["entry"],
        depth=data["depth"],
        chain=tuple(data["chain"]),
        toolset=data["toolset"],
        tool=data["tool"],
        args=data["args"],
        reason=data["reason"],
        description=data["description"],
        approval_id=data["approval_id"],
        call_id=data["call_id"],
        tool_call_id=data["tool_call_id"],
        attachments=tuple(AttachmentInfo(**info) for info in data["attachments"]),
        session_id=data["session_id"],
    )


@dataclass(slots=True, eq=False)
class _Published:
    """A run of this process, as its writer writes it."""

    conversation_id: str
    logged: _SharedRun
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    hurry: asyncio.Event = field(default_factory=asyncio.Event)
    """A question, its answer or the end is to be written: the batch waits no more."""
    written: int = 0
    """How many chunks of the log's list are written."""
    compactions: int = 0
    stored: bool = False
    """The run's row is written."""
    questions: dict[str, bool] = field(default_factory=dict)
    """Each question as written: pending or not."""
    ending: bool = False
    """The run has ended (`ended`): no process finds it any more, once that is written (`marked`)."""
    marked: asyncio.Event = field(default_factory=asyncio.Event)
    finished: bool = False
    """Its last chunk is written."""
    stored_seq: int = -1
    """The number of the last chunk written."""
    stored_grew: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def run_id(self) -> str:
        return self.logged.message_id

    def written_up_to(self, seq: int) -> None:
        self.stored_seq = seq
        grew, self.stored_grew = self.stored_grew, asyncio.Event()
        grew.set()

    async def read(self, seen: int, patience: float) -> AsyncIterator[Sent]:
        """The log after chunk `seen`; a question only once it is written (up to `patience` seconds), so that a page
        that saw it finds it again from any process."""
        async for chunk in self.logged.log.read(seen):
            if (chunk.asked is not None or chunk.data.startswith(_ASKING)) and self.stored_seq < chunk.seq:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(patience):
                        while self.stored_seq < chunk.seq:
                            await self.stored_grew.wait()
            yield chunk

    def wrote(self, chunk: Sent) -> None:
        if chunk.asked is not None or chunk.done or chunk.data.startswith(_URGENT):
            self.hurry.set()  # a question, its answer, the end: written at once
        self.wake.set()

    def urge(self) -> None:
        self.hurry.set()
        self.wake.set()


class PostgresRuns:
    """The runs in flight of every web process of a service, on one PostgreSQL database (see the module):
    `async with PostgresRuns(dsn) as runs`, then `chat_router(..., runs=runs)`, or `chat_router(database_url=...)`.

    `channel` (a plain identifier) is shared by every process of the service; `keep` bounds each run's log as
    `LocalRuns` does; `linger` is how long a batch waits for more chunks; `poll` how often a reader looks without a
    notification; `retention` how long an ended run's rows stay; `pool_size` the connections of its pool (one more
    listens)."""

    def __init__(
        self,
        dsn: str,
        *,
        channel: str = "llm_do_runs",
        keep: int = 10_000,
        linger: float = 0.02,
        poll: float = 1.0,
        retention: float = 60.0,
        pool_size: int = 4,
        timeout: float = 10.0,
        application_name: str = "llm-do runs",
    ) -> None:
        if not channel.isidentifier() or len(channel.encode()) > 63:
            raise ConfigurationError(
                f"PostgresRuns: channel {channel!r} must be a plain identifier of at most 63 bytes"
            )
        self.dsn = dsn
        self.channel = channel
        self.keep = keep
        self.linger = linger
        self.poll = poll
        self.retention = retention
        self.pool_size = pool_size
        self.timeout = timeout
        self.application_name = application_name
        self._pool: asyncpg.Pool[Any] | None = None
        self._listener: asyncpg.Connection[Any] | None = None
        self._owner: tuple[int, datetime | None] = (0, None)
        self._local: dict[str, _Published] = {}
        self._published: set[_Published] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._followers: dict[str, set[asyncio.Event]] = {}
        self._closing = False
        self._reconnecting: asyncio.Task[None] | None = None
        self._warned = False
        self.reconnects = 0
        """How many times the listening connection was opened again after it dropped."""

    # -- lifetime ---------------------------------------------------------------------------------------------

    async def __aenter__(self) -> PostgresRuns:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def open(self) -> None:
        """Open the pool, create the tables (under an advisory lock), listen, and delete what dead runs left."""
        import asyncpg

        settings = {"application_name": self.application_name}
        self._pool = await asyncpg.create_pool(
            self.dsn, min_size=1, max_size=self.pool_size, timeout=self.timeout, server_settings=settings
        )
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext('llm_do chat runs ' || current_schema()))")
                for statement in _SCHEMA:
                    await conn.execute(statement)
            await self._listen()
            await self._pool.execute(_SWEEP, self.retention)
        except BaseException:
            await self.aclose()
            raise

    async def _listen(self) -> None:
        import asyncpg

        conn: asyncpg.Connection[Any] = await asyncpg.connect(
            self.dsn, timeout=self.timeout, server_settings={"application_name": self.application_name + " listener"}
        )
        try:
            await conn.add_listener(self.channel, self._on_notify)
            found = await conn.fetchrow("SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()")
        except BaseException:
            await conn.close()
            raise
        assert found is not None
        self._owner = (int(found["pid"]), found["backend_start"])
        conn.add_termination_listener(self._on_lost)
        self._listener = conn
        for published in self._published:  # its runs are this listener's now: their rows say so at the next batch
            published.stored = False
            published.urge()
        for events in self._followers.values():  # what was announced meanwhile was not heard: look
            for event in events:
                event.set()

    def _on_lost(self, conn: object) -> None:
        if self._closing or conn is not self._listener:
            return
        self._listener = None
        logger.warning("chat runs: the listening connection to PostgreSQL dropped; reconnecting")
        if self._reconnecting is None or self._reconnecting.done():
            self._reconnecting = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        while not self._closing:
            await asyncio.sleep(0.5)
            try:
                await self._listen()
            except Exception as error:
                logger.warning("chat runs: listening again failed (%s); trying again", error)
                continue
            self.reconnects += 1
            return

    async def aclose(self) -> None:
        """Wait (up to `timeout` seconds) for the runs started here to be written to their end; then close."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=self.timeout)
        self._closing = True
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks))
        if self._reconnecting is not None:
            self._reconnecting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reconnecting
        listener, self._listener = self._listener, None
        if listener is not None and not listener.is_closed():
            await listener.close()
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    def _open_pool(self) -> asyncpg.Pool[Any]:
        if self._pool is None:
            raise ConfigurationError("PostgresRuns is not open: `async with PostgresRuns(dsn) as runs:` opens it")
        return self._pool

    def _spawn(self, work: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- ChatRuns ---------------------------------------------------------------------------------------------

    async def started(self, conversation_id: str, run: LiveRun, prompt: str) -> RunInFlight:
        self._open_pool()
        log = RunLog(self.keep)
        published = _Published(conversation_id, _SharedRun(run, prompt, log, self.timeout))
        published.logged.published = published
        log.listen(published.wrote)
        self._local[conversation_id] = published
        self._published.add(published)
        self._spawn(record(run, log))
        self._spawn(self._write(published))
        return published.logged

    async def ended(self, conversation_id: str, run: LiveRun) -> None:
        """No process finds the run any more, once written (waited for up to `timeout` seconds): its readers
        read on to its last chunk."""
        kept = self._local.get(conversation_id)
        if kept is None or kept.logged.run is not run:
            return
        del self._local[conversation_id]
        kept.ending = True
        kept.urge()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.timeout):
                await kept.marked.wait()

    async def find(self, runtime: Runtime, conversation_id: str) -> RunInFlight | None:
        """This process's run of the conversation, else the one another process runs, as PostgreSQL has it."""
        kept = self._local.get(conversation_id)
        if kept is not None:
            return kept.logged
        row = await self._open_pool().fetchrow(_FIND, conversation_id, self._owner[0])
        if row is None:
            return None
        questions = [(_request(request), bool(pending)) for request, pending in json.loads(row["questions"] or "[]")]
        return RemoteRun(self, row["run_id"], row["prompt"], questions)

    # -- the inbox --------------------------------------------------------------------------------------------

    async def open_questions(self, session_id: str) -> list[OpenQuestion]:
        """The questions of conversation `session_id`'s live runs that wait for an answer, in any process."""
        rows = await self._open_pool().fetch(_OPEN, session_id)
        return [
            OpenQuestion(_request(row["request"]), "live", run=row["run_id"], asked_at=row["asked_at"]) for row in rows
        ]

    # -- writing ----------------------------------------------------------------------------------------------

    async def _write(self, published: _Published) -> None:
        """Write the run's stream and questions as they come, in batches, until its last chunk is written."""
        import asyncpg

        failures = 0
        try:
            while not published.finished:
                await published.wake.wait()
                if self.linger > 0 and not published.hurry.is_set():
                    with contextlib.suppress(TimeoutError):  # more chunks join the batch meanwhile
                        async with asyncio.timeout(self.linger):
                            await published.hurry.wait()
                published.wake.clear()
                published.hurry.clear()
                try:
                    await self._flush(published)
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
                    failures += 1
                    if failures == 1:
                        logger.warning("chat runs: writing run %s failed (%s); trying again", published.run_id, error)
                    if isinstance(error, asyncpg.ForeignKeyViolationError):
                        published.stored = False  # its row was deleted meanwhile: write the run again, whole
                        published.compactions = -1
                    published.wake.set()
                    await asyncio.sleep(min(1.0, 0.05 * 2**failures))
                    continue
                failures = 0
        finally:
            self._published.discard(published)

    async def _flush(self, published: _Published) -> None:
        logged = published.logged
        log, run = logged.log, logged.run
        chunks = log.chunks  # what is written and what is asked, taken together: no await in between
        count = len(chunks)  # (the list grows meanwhile, or is merged into another: written again, whole)
        compactions = log.compactions
        again = compactions != published.compactions  # merged since: written again, whole
        batch = chunks[:count] if again else chunks[published.written : count]
        pending = {request.approval_id for request in run.pending}
        changed = [
            request
            for request in run.asked
            if published.questions.get(request.approval_id) != (request.approval_id in pending)
        ]
        done = bool(batch) and batch[-1].done  # the last chunk is in this batch
        mark = (done or published.ending) and not published.marked.is_set()
        if not batch and not changed and published.stored and not mark:
            return
        body = "\n".join(map(_line, batch))
        last = batch[-1].seq if batch else -1
        pool = self._open_pool()
        if published.stored and not again and not changed and not mark:
            await pool.execute(_BATCH, published.run_id, last, body, self.channel)
        else:
            async with pool.acquire() as conn, conn.transaction():
                if not published.stored:
                    owner_pid, owner_started = self._owner
                    await conn.execute(
                        _RUN, published.run_id, published.conversation_id, logged.prompt, owner_pid, owner_started
                    )
                if again:
                    await conn.execute("DELETE FROM llm_do_chat_run_chunks WHERE run_id = $1", published.run_id)
                if changed:
                    await conn.execute(
                        _QUESTIONS,
                        published.run_id,
                        published.conversation_id,
                        [request.approval_id for request in changed],
                        [_request_json(request) for request in changed],
                        [request.approval_id in pending for request in changed],
                    )
                if batch:
                    await conn.execute(
                        "INSERT INTO llm_do_chat_run_chunks (run_id, last_seq, body) VALUES ($1, $2, $3)",
                        published.run_id,
                        last,
                        body,
                    )
                if mark:
                    await conn.execute(
                        "UPDATE llm_do_chat_runs SET ended_at = now() WHERE run_id = $1", published.run_id
                    )
                    await conn.execute(_SWEEP_ENDED, self.retention)
                await conn.execute("SELECT pg_notify($1, $2)", self.channel, published.run_id)
        published.stored = True
        published.compactions = compactions
        published.written = count
        for request in changed:
            published.questions[request.approval_id] = request.approval_id in pending
        if mark:
            published.marked.set()
        if batch:
            published.written_up_to(last)
        published.finished = done

    # -- reading another process's runs -------------------------------------------------------------------------

    def _on_notify(self, conn: object, pid: int, channel: str, payload: object) -> None:
        for event in self._followers.get(str(payload), ()):
            event.set()

    @contextlib.contextmanager
    def _following(self, run_id: str) -> Any:
        event = asyncio.Event()
        self._followers.setdefault(run_id, set()).add(event)
        try:
            yield event
        finally:
            events = self._followers.get(run_id)
            if events is not None:
                events.discard(event)
                if not events:
                    del self._followers[run_id]

    async def _read(self, run_id: str, seen: int) -> list[str]:
        rows = await self._open_pool().fetch(_READ, run_id, seen)
        return [row["body"] for row in rows]

    async def _pending(self, run_id: str) -> tuple[ApprovalRequest, ...]:
        rows = await self._open_pool().fetch(_PENDING, run_id)
        return tuple(_request(row["request"]) for row in rows)

    async def _state(self, run_id: str) -> tuple[bool, bool]:
        """Whether the run's stream is written to its last chunk (a run whose rows are gone: so too), and whether
        its process is there."""
        row = await self._open_pool().fetchrow(_STATE, run_id)
        if row is None:
            return True, False
        last = row["last"]
        written = bool(row["ended"]) and last is not None and _chunk(last.rsplit("\n", 1)[-1]).done
        return written, bool(row["alive"])

    def __repr__(self) -> str:
        return f"PostgresRuns(channel={self.channel!r}, here={len(self._local)}, followed={len(self._followers)})"


class _SharedRun(LoggedRun):
    """A run of this process whose log is written to PostgreSQL: its readers see a question once it is written."""

    __slots__ = ("patience", "published")

    def __init__(self, run: LiveRun, prompt: str | None, log: RunLog, patience: float) -> None:
        super().__init__(run, prompt, log)
        self.patience = patience
        self.published: _Published | None = None

    def chunks(self, seen: int = -1) -> AsyncIterator[Sent]:
        if self.published is None:
            return self.log.read(seen)
        return self.published.read(seen, self.patience)


class RemoteRun:
    """A conversation's run in flight in another process, read from PostgreSQL."""

    __slots__ = ("_asked", "_pending", "_runs", "message_id", "prompt")

    def __init__(
        self, runs: PostgresRuns, run_id: str, prompt: str | None, questions: Sequence[tuple[ApprovalRequest, bool]]
    ) -> None:
        self._runs = runs
        self.message_id = run_id
        self.prompt = prompt
        self._asked = tuple(request for request, _ in questions)
        self._pending = tuple(request for request, pending in questions if pending)

    @property
    def pending(self) -> tuple[ApprovalRequest, ...]:
        """Its questions waiting for an answer, as last read (when it was found, and as each question is read)."""
        return self._pending

    @property
    def asked(self) -> tuple[ApprovalRequest, ...]:
        return self._asked

    async def chunks(self, seen: int = -1) -> AsyncIterator[Sent]:
        runs = self._runs
        with runs._following(self.message_id) as announced:
            while True:
                announced.clear()  # before reading: a batch written meanwhile is announced again
                read = False
                for body in await runs._read(self.message_id, seen):
                    for line in body.split("\n"):
                        found = _chunk(line).after(seen)
                        if found is None:
                            continue
                        read = True
                        if found.asked is not None:  # is it still open? (the pause at a question asks)
                            self._pending = await runs._pending(self.message_id)
                        seen = found.seq
                        yield found
                        if found.data == DONE:
                            return
                if read:
                    continue
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(runs.poll):
                        await announced.wait()
                        continue
                written, alive = await runs._state(self.message_id)
                if written:  # to its last chunk, which this reader had (it named a place past it)
                    return
                if not alive:  # its process is gone, and the run with it
                    yield Sent(seen + 1, _GONE)
                    yield Sent(seen + 2, '{"type":"finish"}')
                    yield Sent(seen + 3, DONE)
                    return

    def __repr__(self) -> str:
        return f"RemoteRun({self.message_id!r}, pending={len(self._pending)})"


class LiveQuestions:
    """The open questions of a conversation's live runs in every web process (`PostgresRuns.open_questions`),
    answered through the decision relay: a place of the runtime's inbox (`runtime.inbox.add(...)`; the chat router
    given a database adds one)."""

    def __init__(self, runs: PostgresRuns, relay: Relay) -> None:
        self.runs = runs
        self.relay = relay

    async def open_questions(self, session_id: str) -> list[OpenQuestion]:
        return await self.runs.open_questions(session_id)

    async def answer(self, session_id: str, approval_id: str, choice: ApprovalChoice, note: str | None) -> bool:
        if not any(question.approval_id == approval_id for question in await self.runs.open_questions(session_id)):
            return False
        await self.relay.decide(session_id, approval_id, choice, note)
        return True

    def __repr__(self) -> str:
        return f"LiveQuestions({self.runs!r})"
