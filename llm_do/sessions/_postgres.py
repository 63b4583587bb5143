"""`PostgresHistoryStore`: sessions' conversations in a PostgreSQL table (the `postgres` extra: asyncpg).

```python
async with PostgresHistoryStore("postgresql://app@db/app") as store:
    async with Runtime(App(), entries=[clerk], history_store=store) as runtime:
        session = await runtime.session("conv-42")   # continues conv-42, even after a restart
```

One row per session: its id, its messages as JSON (pydantic-ai's `ModelMessagesTypeAdapter`) and
their version (the id of the transaction that saved them, so never given twice), in a table the store
creates on first use (adding the version to a table an earlier version made). `delete` keeps the row
as a marker, its messages emptied and given a new version: a process that still holds the conversation
(a session open, a run in flight) cannot save it back over the old version, and starts afresh. The
messages are kept as `json`, their text: `jsonb` refuses a NUL character, which a message may hold (a
table an earlier version made with `jsonb` is converted). The store opens a small pool of its own when
first used (and creates or updates the table under an advisory lock: processes starting together do not
fail on each other) and closes it with `aclose()` (or the end of `async with`).
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

__all__ = ["PostgresHistoryStore"]

_ID_LIMIT = 2000
"""Bytes (UTF-8) a session id may have: a primary key's index entry must fit in a third of a page."""

_TABLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

_COLUMNS = """
SELECT column_name, data_type FROM information_schema.columns
 WHERE table_schema = current_schema() AND table_name = $1
"""


class PostgresHistoryStore:
    """A `HistoryStore` over PostgreSQL: one row per session in `table` (created when first used); a load, save
    or delete that gets no answer within `timeout` seconds fails with `HistoryError`."""

    def __init__(
        self, dsn: str, *, table: str = "llm_do_session_history", pool_size: int = 4, timeout: float = 30.0
    ) -> None:
        if not _TABLE_NAME.match(table):
            raise ConfigurationError(
                f"PostgresHistoryStore: table name {table!r} is not a plain lowercase SQL name; "
                "use letters, digits and underscores"
            )
        self.dsn = dsn
        self.table = table
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
        """Create the table, or bring one an earlier version made up to date, one process at a time (two
        processes' `CREATE TABLE IF NOT EXISTS` at once make one of them fail, on PostgreSQL's catalog), with
        no timeout (converting a large table takes its time); then close `conn`."""
        try:
            async with conn.transaction():
                await conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext('llm_do history ' || current_schema() || $1))", self.table
                )
                await conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {self.table} ("
                    "session_id text PRIMARY KEY, messages json NOT NULL, "
                    "updated_at timestamptz NOT NULL DEFAULT now(), version bigint NOT NULL DEFAULT 1)"
                )
                columns = dict(await conn.fetch(_COLUMNS, self.table))
                if "version" not in columns:
                    await conn.execute(f"ALTER TABLE {self.table} ADD COLUMN version bigint NOT NULL DEFAULT 1")
                if columns["messages"] == "jsonb":
                    await conn.execute(f"ALTER TABLE {self.table} ALTER COLUMN messages TYPE json USING messages::json")
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

    async def load(self, session_id: str) -> StoredHistory:
        _check_id(session_id)  # when a session opens: before a run does work whose history could not be kept
        async with self._reaching(f"load the conversation of session {_shown(session_id)}") as pool:
            row = await pool.fetchrow(
                f"SELECT messages::text, version FROM {self.table} WHERE session_id = $1",
                session_id,
            )
        if row is None:
            return StoredHistory()
        return StoredHistory(ModelMessagesTypeAdapter.validate_json(row[0]), row[1])

    async def save(self, session_id: str, messages: list[ModelMessage], *, version: int | None = None) -> int | None:
        _check_id(session_id)
        document = ModelMessagesTypeAdapter.dump_json(messages).decode()
        doing = f"save the conversation of session {_shown(session_id)} (the run's turn may not be kept)"
        # ON CONFLICT locks the row and checks its version as it is now: of two saves from one version, one wins.
        async with self._reaching(doing) as pool:
            saved = await pool.fetchval(
                f"INSERT INTO {self.table} AS stored (session_id, messages, version) "
                "VALUES ($1, $2::json, txid_current()) ON CONFLICT (session_id) DO UPDATE SET "
                "messages = EXCLUDED.messages, version = EXCLUDED.version, updated_at = now() "
                "WHERE $3::bigint IS NULL OR stored.version = $3 RETURNING version",
                session_id,
                document,
                version,
            )
        return None if saved is None else int(saved)

    async def delete(self, session_id: str) -> None:
        _check_id(session_id)
        async with self._reaching(f"delete the conversation of session {_shown(session_id)}") as pool:
            await pool.execute(
                f"UPDATE {self.table} SET messages = '[]', version = txid_current(), updated_at = now() "
                "WHERE session_id = $1",
                session_id,
            )

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
