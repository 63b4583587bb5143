"""PostgreSQL behind the `Database` interface, through an asyncpg pool.

The pool connects on demand, in a task with an empty context: a connection's event-loop handles
(its socket reader) then hold nothing of the run that first needed it. Connections have no idle
timer (asyncpg's re-arms one on every release, capturing the releasing run's context), carry the
statement timeout as a server setting, exchange dates, times, numerics, UUIDs and JSON as text (the
JSON scalars a model passes), and are reset (settings, role, cursors, locks) when returned.

Each statement is prepared on its own, so a string holding several statements is refused by the
server; statements that would end the transaction (COMMIT, ROLLBACK, ...) are refused before they
are sent, because the tools own the transaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from .database import (
    TRANSACTION_CONTROL_REFUSED,
    Column,
    Connection,
    Database,
    DatabaseUnavailable,
    Param,
    PoolStats,
    Rows,
    SqlError,
    TransactionState,
    in_fresh_context,
)

__all__ = ["PostgresDatabase", "leading_words"]

T = TypeVar("T")
_QUERY_CANCELED = "57014"

_TABLES = """
SELECT CASE WHEN n.nspname = current_schema() THEN quote_ident(c.relname)
            ELSE quote_ident(n.nspname) || '.' || quote_ident(c.relname) END
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'
ORDER BY n.nspname <> current_schema(), 1
"""

_COLUMNS = """
SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), NOT a.attnotnull,
       pg_catalog.pg_get_expr(d.adbin, d.adrelid),
       EXISTS (SELECT 1 FROM pg_catalog.pg_index i
               WHERE i.indrelid = a.attrelid AND i.indisprimary AND a.attnum = ANY (i.indkey))
FROM pg_catalog.pg_attribute a
LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""


def leading_words(sql: str, count: int = 2) -> list[str]:
    """The first `count` words of a statement, upper-cased, skipping whitespace and (nested) comments."""
    words: list[str] = []
    i, n = 0, len(sql)
    while i < n and len(words) < count:
        if sql[i].isspace():
            i += 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif sql.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if sql.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif sql.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif sql[i].isalpha() or sql[i] == "_":
            start = i
            while i < n and (sql[i].isalnum() or sql[i] in "_$"):
                i += 1
            words.append(sql[start:i].upper())
        else:
            break
    return words


def _refuse_transaction_control(sql: str) -> None:
    first, second = [*leading_words(sql), "", ""][:2]
    if (
        first in ("BEGIN", "START", "COMMIT", "END", "ABORT")
        or (first == "ROLLBACK" and second != "TO")
        or (first == "PREPARE" and second == "TRANSACTION")
    ):
        raise SqlError(TRANSACTION_CONTROL_REFUSED)


_AS_TEXT = ("date", "time", "timetz", "timestamp", "timestamptz", "interval", "numeric", "uuid", "json", "jsonb")


async def _as_text(connection: asyncpg.Connection[Any]) -> None:
    """Dates, times, numbers, UUIDs and JSON travel as text: a model passes strings and reads strings."""
    for name in _AS_TEXT:
        await connection.set_type_codec(name, schema="pg_catalog", encoder=str, decoder=str, format="text")


async def _reset(connection: asyncpg.Connection[Any]) -> None:
    """What a connection must forget before the next transaction uses it."""
    await connection.reset()  # rolls back, closes cursors, unlistens, unlocks, RESET ALL
    await connection.execute("RESET SESSION AUTHORIZATION; RESET ROLE")  # RESET ALL leaves these


class PostgresConnection(Connection):
    """A connection lent by the pool for one transaction."""

    def __init__(self, raw: PoolConnectionProxy[Any], statement_timeout: float) -> None:
        self.raw = raw
        self._timeout = statement_timeout

    async def _guarded(self, work: Callable[[], Awaitable[T]]) -> T:
        try:
            return await work()
        except asyncpg.PostgresError as error:
            raise SqlError(self._message(error), self._state(server_error=True)) from None
        except asyncpg.InterfaceError as error:
            raise SqlError(str(error), self._state(server_error=False)) from None

    def _state(self, *, server_error: bool) -> TransactionState:
        if self.raw.is_closed() or not self.raw.is_in_transaction():
            return "ended"
        return "aborted" if server_error else "open"

    def _message(self, error: asyncpg.PostgresError) -> str:
        text = str(getattr(error, "message", None) or error)
        if getattr(error, "sqlstate", None) == _QUERY_CANCELED:
            text += f" (the statement timeout is {self._timeout:g} s)"
        for label in ("detail", "hint"):
            extra = getattr(error, label, None)
            if extra:
                text += f"\n{label.upper()}: {extra}"
        return text

    def _still_open(self) -> None:
        if not self.raw.is_in_transaction():
            raise SqlError("the statement ended the transaction", "ended")

    def _checked(self, sql: str) -> None:
        """Refuse a model's statement that would end the transaction, or run outside one (autocommitted)."""
        _refuse_transaction_control(sql)
        if self.raw.is_closed() or not self.raw.is_in_transaction():
            raise SqlError("the transaction no longer exists in the database", "ended")

    async def begin(self, read_only: bool) -> None:
        # A query right after BEGIN READ ONLY takes the snapshot: from then on SET TRANSACTION READ WRITE fails.
        sql = "BEGIN READ ONLY; SELECT 1" if read_only else "BEGIN"
        await self._guarded(lambda: self.raw.execute(sql))

    async def fetch(self, sql: str, params: Sequence[Param], limit: int) -> Rows:
        self._checked(sql)

        async def run() -> tuple[tuple[str, ...], list[Any]]:
            statement = await self.raw.prepare(sql)
            cursor = await statement.cursor(*params)
            records = await cursor.fetch(limit + 1)
            return tuple(attribute.name for attribute in statement.get_attributes()), records

        columns, records = await self._guarded(run)
        self._still_open()
        return Rows(columns, [tuple(record.values()) for record in records[:limit]], len(records) > limit)

    async def execute(self, sql: str, params: Sequence[Param]) -> int:
        self._checked(sql)

        async def run() -> str:
            statement = await self.raw.prepare(sql)
            await statement.fetch(*params)
            return statement.get_statusmsg() or ""

        status = await self._guarded(run)
        self._still_open()
        last = status.rpartition(" ")[2]
        return int(last) if last.isdigit() else 0

    async def commit(self) -> None:
        status = await self._guarded(lambda: self.raw.execute("COMMIT"))
        if status != "COMMIT":
            raise SqlError(
                "PostgreSQL rolled the transaction back instead of committing it, because a statement in it "
                "had failed. Nothing was committed.",
                "ended",
            )

    async def rollback(self) -> None:
        if not self.raw.is_closed() and self.raw.is_in_transaction():
            await self._guarded(lambda: self.raw.execute("ROLLBACK"))

    async def tables(self) -> list[str]:
        rows = await self._guarded(lambda: self.raw.fetch(_TABLES))
        return [str(row[0]) for row in rows]

    async def describe(self, table: str) -> list[Column] | None:
        async def run() -> list[Column] | None:
            oid = await self.raw.fetchval("SELECT pg_catalog.to_regclass($1)::oid", table)
            if oid is None:
                return None
            rows = await self.raw.fetch(_COLUMNS, oid)
            return [Column(str(r[0]), str(r[1]), bool(r[2]), r[3], bool(r[4])) for r in rows]

        try:
            return await self._guarded(run)
        except SqlError as error:
            if error.state == "aborted":  # a name PostgreSQL cannot parse; the caller's transaction is short-lived
                return None
            raise


class PostgresDatabase(Database):
    """An asyncpg pool, created on first use with at most `pool_size` connections."""

    kind = "postgresql"

    def __init__(self, url: str, *, pool_size: int = 5, statement_timeout: float = 30.0) -> None:
        super().__init__(pool_size=pool_size, statement_timeout=statement_timeout)
        self.__url = url
        self._pool: asyncpg.Pool[Any] | None = None
        self._lock = asyncio.Lock()
        self._in_use = 0
        self._closed = False

    async def _get_pool(self) -> asyncpg.Pool[Any]:
        async with self._lock:
            self._check_open()
            if self._pool is None:
                milliseconds = max(1, round(self.statement_timeout * 1000))
                pool: asyncpg.Pool[Any] = asyncpg.create_pool(
                    self.__url,
                    min_size=0,
                    max_size=self.pool_size,
                    max_inactive_connection_lifetime=0,
                    init=_as_text,
                    reset=_reset,
                    server_settings={"statement_timeout": str(milliseconds), "application_name": "llm-do"},
                )
                try:
                    await in_fresh_context(lambda: pool, _close_pool)
                except Exception as error:
                    raise DatabaseUnavailable(
                        self._scrubbed(f"could not set up the PostgreSQL pool: {error}")
                    ) from None
                self._pool = pool
            return self._pool

    async def acquire(self) -> Connection:
        pool = await self._get_pool()
        try:
            raw = await in_fresh_context(lambda: pool.acquire(timeout=self.statement_timeout), pool.release)
        except TimeoutError:
            raise DatabaseUnavailable(
                f"no database connection became free within {self.statement_timeout:g} s: all {self.pool_size} "
                "are in use by open transactions. Commit or roll back the ones you no longer need, then try again."
            ) from None
        except Exception as error:
            message = f"could not connect to PostgreSQL: {type(error).__name__}: {error}"
            raise DatabaseUnavailable(self._scrubbed(message)) from None
        self._in_use += 1
        return PostgresConnection(raw, self.statement_timeout)

    async def release(self, connection: Connection) -> None:
        if not isinstance(connection, PostgresConnection) or self._pool is None:
            raise ValueError("this connection does not belong to this pool")
        self._in_use -= 1
        raw = connection.raw
        if not raw.is_closed() and raw.is_in_transaction():
            try:
                await raw.execute("ROLLBACK")  # else asyncpg's reset complains about an open transaction
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
                raw.terminate()
        pool = self._pool
        await in_fresh_context(lambda: pool.release(raw, timeout=self.statement_timeout))  # its timer too

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        async with self._lock:  # a pool being made is made first
            pool = self._pool
        if pool is not None:  # waits for connections still lent out, then terminates them
            await _close_pool(pool, self.statement_timeout)

    def stats(self) -> PoolStats:
        pool = self._pool
        open_ = 0 if pool is None else pool.get_size()
        idle = 0 if pool is None else pool.get_idle_size()
        return PoolStats(size=self.pool_size, open=open_, in_use=self._in_use, idle=idle, closed=self._closed)

    def _check_open(self) -> None:
        if self._closed:
            raise DatabaseUnavailable("the database pool is closed (the application is shutting down)")

    def _scrubbed(self, text: str) -> str:
        """`text` without the URL, its password, or any part of them that a driver may have quoted."""
        parts = urlsplit(self.__url)
        secrets = {self.__url, unquote(self.__url)}
        try:
            password = parts.password
        except ValueError:
            password = None
        for value in [password, *parse_qs(parts.query).get("password", [])]:
            if value:
                secrets |= {value, unquote(value)}
        for secret in sorted(secrets, key=len, reverse=True):
            text = text.replace(secret, "***")
        return text

    def __repr__(self) -> str:
        stats = self.stats()
        return f"PostgresDatabase(pool_size={self.pool_size}, open={stats.open}, in_use={stats.in_use})"


async def _close_pool(pool: asyncpg.Pool[Any], within: float = 10.0) -> None:
    """Close gracefully, or terminate the connections still open after `within` seconds."""
    try:
        async with asyncio.timeout(within):
            await pool.close()
    except TimeoutError:
        pool.terminate()
