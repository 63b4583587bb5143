"""`PostgresHistoryStore`: sessions' conversations in PostgreSQL tables (the `postgres` extra: asyncpg).

```python
async with PostgresHistoryStore("postgresql://app@db/app") as store:
    async with Runtime(App(), entries=[clerk], history_store=store) as runtime:
        session = await runtime.session("conv-42")   # continues conv-42, even after a restart
```

A conversation is a row of `table` (its session id, its version and how many messages it holds) and its
turns, rows of `table` + `_turns`: each save writes the messages it adds as one row (their JSON, with
pydantic-ai's `ModelMessagesTypeAdapter`, where they start, and the version that wrote them), so a turn
costs what it adds, not what the conversation holds. A version is the id of the transaction that saved
it, so never given twice; a save over any other version than the stored one is refused. A save whose
first messages are not the stored ones (the run compacted or edited its history) replaces every turn
with one row. A load given the copy a session holds reads nothing more when its version is the stored
one, and only the turns after it when the conversation was continued elsewhere. `delete` keeps the row
as a marker, its turns deleted and given a new version: a process that still holds the conversation (a
session open, a run in flight) cannot save it back over the old version, and starts afresh. The
messages are kept as `json`, their text: `jsonb` refuses a NUL character, which a message may hold. The
store opens a small pool of its own when first used, and creates the tables under an advisory lock
(processes starting together do not fail on each other), bringing a table an earlier version made (one
row per session, its messages whole, perhaps as `jsonb` or with no version) to this layout without
losing a message; it closes the pool with `aclose()` (or the end of `async with`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from ..errors import ConfigurationError
from ._history import HistoryError, StoredHistory

_ID_LIMIT = 2000
"""Bytes (UTF-8) a session id may have: a primary key's index entry must fit in a third of a page."""

_TABLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,56}$")
"""A plain lowercase SQL name that leaves room for `_turns` within PostgreSQL's 63 bytes."""

_COLUMNS = """
SELECT column_name, data_type FROM information_schema.columns
 WHERE table_schema = current_schema() AND table_name = $1
"""


class PostgresHistoryStore:
    """A `HistoryStore` over PostgreSQL: one row per session in `table`, one per saved turn in `table` + `_turns`
    (both created when first used); a load, save or delete that gets no answer within `timeout` seconds fails
    with `HistoryError`."""

    def __init__(
        self, dsn: str, *, table: str = "llm_do_session_history", pool_size: int = 4, timeout: float = 30.0
    ) -> None:
        if not _TABLE_NAME.match(table):
            raise ConfigurationError(
                f"PostgresHistoryStore: table name {table!r} is not a plain lowercase SQL name of at most 57 "
                "characters (the store adds '_turns' for its second table); use letters, digits and underscores"
            )
        self.dsn = dsn
        self.table = table
        self.turns = f"{table}_turns"
        """The table of the conversations' turns."""
        self.pool_size = pool_size
        self.timeout = timeout
        """Seconds a load, save or delete (or a connection being made) waits for PostgreSQL's answer."""
        self._pool: Any = None
        self._opening = asyncio.Lock()

    async def _connected(self) -> Any:
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is None:
                import asyncpg

                await self._prepare(await asyncpg.connect(self.dsn, timeout=self.timeout))
                # A statement with no answer fails after `timeout`, and so does asking the server to cancel it,
                # which the pool waits for before it takes the connection back.
                self._pool = await asyncpg.create_pool(
                    self.dsn, min_size=1, max_size=self.pool_size, timeout=self.timeout, command_timeout=self.timeout
                )
        return self._pool

    async def _prepare(self, conn: Any) -> None:
        """Create the tables, or bring a table an earlier version made up to date, one process at a time (two
        processes' `CREATE TABLE IF NOT EXISTS` at once make one of them fail, on PostgreSQL's catalog), with
        no timeout (moving a large table's conversations takes its time); then close `conn`."""
        try:
            async with conn.transaction():
                await conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext('llm_do history ' || current_schema() || $1))", self.table
                )
                await conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {self.table} ("
                    "session_id text PRIMARY KEY, version bigint NOT NULL DEFAULT 1, "
                    "length integer NOT NULL DEFAULT 0, updated_at timestamptz NOT NULL DEFAULT now())"
                )
                await conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {self.turns} ("
                    "session_id text NOT NULL, start integer NOT NULL, version bigint NOT NULL, "
                    "messages json NOT NULL, PRIMARY KEY (session_id, start))"
                )
                columns = dict(await conn.fetch(_COLUMNS, self.table))
                if "version" not in columns:
                    await conn.execute(f"ALTER TABLE {self.table} ADD COLUMN version bigint NOT NULL DEFAULT 1")
                if "length" not in columns:
                    await conn.execute(f"ALTER TABLE {self.table} ADD COLUMN length integer NOT NULL DEFAULT 0")
                if "messages" in columns:  # an earlier layout: each conversation whole, in its row
                    await _move_conversations(conn, self.table, self.turns)
        finally:
            await conn.close()

    @contextlib.asynccontextmanager
    async def _reaching(self, doing: str) -> AsyncIterator[Any]:
        """The pool, for `doing`; PostgreSQL unreachable, or a connection dropped, is a `HistoryError` saying so."""
        import asyncpg

        try:
            yield await self._connected()
        except (
            OSError,
            asyncpg.PostgresConnectionError,
            asyncpg.OperatorInterventionError,
            asyncpg.InterfaceError,
        ) as error:
            why = (
                f"PostgreSQL did not answer within {self.timeout:g} s (the store's timeout)"
                if isinstance(error, TimeoutError)
                else f"PostgreSQL is unreachable or dropped the connection ({type(error).__name__}: {error})"
            )
            raise HistoryError(
                f"PostgresHistoryStore (table {self.table!r}) could not {doing}: {why}; check that it runs and "
                "that the dsn reaches it, then try again"
            ) from error

    async def load(self, session_id: str, *, held: StoredHistory | None = None) -> StoredHistory:
        _check_id(session_id)  # when a session opens: before a run does work whose history could not be kept
        version, length = (held.version, len(held.messages)) if held is not None else (0, 0)
        async with self._reaching(f"load the conversation of session {_shown(session_id)}") as pool:
            rows = await pool.fetch(self._load_sql, session_id, version, length)
        if not rows:
            return StoredHistory()
        stored, since = rows[0][0], rows[0][1]
        if held is not None and stored == held.version:
            return held  # the copy held is the stored conversation: nothing read
        added = _parsed([row[2] for row in rows if row[2] is not None])
        if held is not None and since:  # continued elsewhere: the turns after the copy held
            return StoredHistory([*held.messages[:since], *added], stored)
        return StoredHistory(added, stored)

    @property
    def _load_sql(self) -> str:
        # One statement (one snapshot): the conversation's version, from where its turns are read (where the
        # copy held ends, when the last turn before that point is still the one that saved the copy: then the
        # conversation was only added to since), and those turns, oldest first; none (from its end) when the
        # version is the one held.
        return (
            f"WITH since AS (SELECT CASE WHEN $3::integer > 0 AND (SELECT version FROM {self.turns} "
            "WHERE session_id = $1 AND start < $3 ORDER BY start DESC LIMIT 1) = $2 THEN $3 ELSE 0 END AS start) "
            f"SELECT head.version, since.start, turn.messages::text FROM {self.table} AS head CROSS JOIN since "
            f"LEFT JOIN {self.turns} AS turn ON turn.session_id = head.session_id "
            "AND turn.start >= CASE WHEN head.version = $2 THEN head.length ELSE since.start END "
            "WHERE head.session_id = $1 ORDER BY turn.start"
        )

    async def save(
        self, session_id: str, messages: list[ModelMessage], *, version: int | None = None, kept: int = 0
    ) -> int | None:
        _check_id(session_id)
        doing = f"save the conversation of session {_shown(session_id)} (the run's turn may not be kept)"
        async with self._reaching(doing) as pool:
            if version and 0 < kept <= len(messages):
                appended = await self._append(pool, session_id, messages, version, kept)
                if appended is not None:
                    return int(appended)
                # Refused: another version is stored (another save or a delete came first), or none is (the
                # whole conversation is written, if the stored version is still `version`: none is).
            return await self._replace(pool, session_id, messages, version)

    async def _append(self, pool: Any, session_id: str, messages: list[ModelMessage], version: int, kept: int) -> Any:
        """Add the messages after the first `kept` as one turn, if the stored conversation is `version` with
        `kept` messages; its new version, or None. One statement: the row's lock orders saves of one version."""
        if kept == len(messages):
            return await pool.fetchval(
                f"UPDATE {self.table} SET version = txid_current(), updated_at = now() "
                "WHERE session_id = $1 AND version = $2 AND length = $3 RETURNING version",
                session_id,
                version,
                kept,
            )
        return await pool.fetchval(
            f"WITH head AS (UPDATE {self.table} SET version = txid_current(), length = $4, updated_at = now() "
            "WHERE session_id = $1 AND version = $2 AND length = $3 RETURNING version), "
            f"turn AS (INSERT INTO {self.turns} (session_id, start, version, messages) "
            "SELECT $1, $3, version, $5::json FROM head) SELECT version FROM head",
            session_id,
            version,
            kept,
            len(messages),
            ModelMessagesTypeAdapter.dump_json(messages[kept:]).decode(),
        )

    async def _replace(
        self, pool: Any, session_id: str, messages: list[ModelMessage], version: int | None
    ) -> int | None:
        """Write the whole conversation as one turn, over `version` (None: whatever is stored); its new
        version, or None. The row is locked (and its version checked) before its turns are replaced."""
        document = ModelMessagesTypeAdapter.dump_json(messages).decode() if messages else None
        async with pool.acquire() as conn, conn.transaction():
            # ON CONFLICT locks the row and checks its version as it is now: of two saves from one version, one wins.
            saved = await conn.fetchval(
                f"INSERT INTO {self.table} AS stored (session_id, version, length) "
                "VALUES ($1, txid_current(), $3) ON CONFLICT (session_id) DO UPDATE SET "
                "version = EXCLUDED.version, length = EXCLUDED.length, updated_at = now() "
                "WHERE $2::bigint IS NULL OR stored.version = $2 RETURNING version",
                session_id,
                version,
                len(messages),
            )
            if saved is None:
                return None
            await conn.execute(f"DELETE FROM {self.turns} WHERE session_id = $1", session_id)
            if document is not None:
                await conn.execute(
                    f"INSERT INTO {self.turns} (session_id, start, version, messages) VALUES ($1, 0, $2, $3::json)",
                    session_id,
                    saved,
                    document,
                )
        return int(saved)

    async def delete(self, session_id: str) -> None:
        _check_id(session_id)
        async with (
            self._reaching(f"delete the conversation of session {_shown(session_id)}") as pool,
            pool.acquire() as conn,
            conn.transaction(),
        ):
            # The row first: its lock waits for a save in progress, whose turn the DELETE then sees.
            marked = await conn.fetchval(
                f"UPDATE {self.table} SET version = txid_current(), length = 0, updated_at = now() "
                "WHERE session_id = $1 RETURNING version",
                session_id,
            )
            if marked is not None:
                await conn.execute(f"DELETE FROM {self.turns} WHERE session_id = $1", session_id)

    async def aclose(self) -> None:
        """Close the store's connections (it opens them again if used afterwards)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def __aenter__(self) -> PostgresHistoryStore:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"PostgresHistoryStore(table={self.table!r})"


async def _move_conversations(conn: Any, table: str, turns: str) -> None:
    """Move the conversations of a table an earlier version made (one row per session, its messages whole) to
    the turns table, each as one turn, keeping its version; then drop the column. In the caller's transaction."""
    await conn.execute(
        f"INSERT INTO {turns} (session_id, start, version, messages) SELECT session_id, 0, version, "
        f"messages::json FROM {table} WHERE json_array_length(messages::json) > 0"
    )
    await conn.execute(f"UPDATE {table} SET length = json_array_length(messages::json)")
    await conn.execute(f"ALTER TABLE {table} DROP COLUMN messages")


def _parsed(turns: list[str]) -> list[ModelMessage]:
    """The messages of turns kept as JSON arrays, oldest first, parsed at once."""
    if len(turns) == 1:
        return ModelMessagesTypeAdapter.validate_json(turns[0])
    inner = [text.strip()[1:-1] for text in turns]
    return ModelMessagesTypeAdapter.validate_json("[" + ",".join(part for part in inner if part.strip()) + "]")


def _check_id(session_id: str) -> None:
    """Refuse a session id PostgreSQL cannot keep as a primary key: a NUL, a lone surrogate, too many bytes."""
    shown = _shown(session_id)
    why = None
    if "\x00" in session_id:
        why = "it holds a NUL character, which PostgreSQL text cannot hold"
    else:
        try:
            size = len(session_id.encode())
        except UnicodeEncodeError:
            why = "it holds a lone surrogate, which is not UTF-8 text"
        else:
            if size > _ID_LIMIT:
                why = f"it is {size} bytes long (UTF-8), more than the {_ID_LIMIT} a primary key's index takes"
    if why is not None:
        raise HistoryError(
            f"PostgresHistoryStore cannot keep the conversation of session {shown}: {why}; use session ids of "
            f"printable text of at most {_ID_LIMIT} bytes (hash a longer one)"
        )


def _shown(session_id: str) -> str:
    return repr(session_id) if len(session_id) <= 60 else repr(session_id[:57]) + "..."
