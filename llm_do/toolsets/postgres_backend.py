"""PostgreSQL behind the `Database` interface, through an asyncpg pool.

The pool connects on demand, in a task with an empty context: a connection's event-loop handles
(its socket reader) then hold nothing of the run that first needed it. Connections have no idle
timer (asyncpg's re-arms one on every release, capturing the releasing run's context), carry the
statement timeout as a server setting, exchange dates, times, numerics, UUIDs and JSON as text (the
JSON scalars a model passes), and are reset (settings, role, cursors, locks) when returned.

A connection that fails under a transaction (server stopped, backend terminated, network reset or
silent) raises `ConnectionLost` and is dropped, which frees its slot; the pool connects anew on demand.

Each statement is prepared on its own, so a string holding several statements is refused by the
server; statements that would end the transaction (COMMIT, ROLLBACK, ...) are refused before they
are sent, because the tools own the transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from ..errors import ConfigurationError, scrubbed
from ..scopes import SystemTimeout
from .database import (
    TRANSACTION_CONTROL_REFUSED,
    Column,
    Connection,
    ConnectionLost,
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
_LOST = "the database connection was lost: "
_ROLLBACK_WAIT = 5.0
_logger = logging.getLogger("llm_do")

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


def _ends_connection(error: asyncpg.PostgresError) -> bool:
    """A server error after which the session is gone: connection exceptions (class 08), the server
    shutting down or the backend terminated (57P01-57P05), or any FATAL/PANIC message."""
    sqlstate = str(getattr(error, "sqlstate", None) or "")
    severity = getattr(error, "severity_en", None) or getattr(error, "severity", None)
    return sqlstate.startswith(("08", "57P")) or severity in ("FATAL", "PANIC")


def _described(error: BaseException) -> str:
    if isinstance(error, asyncpg.InterfaceError) and "released back to the pool" in str(error):
        return "the connection had already closed (the server went away or ended it)"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


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
    """A connection lent by the pool for one transaction.

    One operation at a time: statements, commit, rollback and the hand-back to the pool take turns
    (a lock), so asyncpg never sees two at once. Any failure of the connection itself (server
    stopped, backend terminated, socket reset, no answer within twice the statement timeout plus a
    second) raises `ConnectionLost`; the connection is then dropped, which gives its slot back to
    the pool.
    """

    def __init__(self, raw: PoolConnectionProxy[Any], statement_timeout: float) -> None:
        self.raw = raw
        self._timeout = statement_timeout
        self._deadline = statement_timeout * 2 + 1  # the server cancels at statement_timeout; this is for silence
        self._interrupted = False  # a statement was cancelled half-way (the caller's cancellation)
        self._lock = asyncio.Lock()
        self.lost: str | None = None
        """Why the connection failed, once it has."""
        self.released = False

    async def _guarded(
        self, work: Callable[[], Awaitable[T]], *, in_transaction: bool = False, deadline: float | None = None
    ) -> T:
        deadline = self._deadline if deadline is None else deadline
        async with self._lock:
            self._check_connected()
            if in_transaction and not self.raw.is_in_transaction():
                raise SqlError("the transaction no longer exists in the database", "ended")
            try:
                async with SystemTimeout(deadline):  # no timer keeps the run that ran the statement
                    return await work()
            except asyncpg.PostgresError as error:
                if _ends_connection(error):
                    raise self._lose(f"{type(error).__name__}: {self._message(error)}") from None
                raise SqlError(self._message(error), self._state(server_error=True)) from None
            except TimeoutError:
                raise self._lose(f"the server did not answer within {deadline:g} s") from None
            except asyncpg.InterfaceError as error:
                if self._gone():
                    raise self._lose(_described(error)) from None
                # A client-side refusal on a healthy connection (wrong number or type of parameters).
                raise SqlError(str(error), self._state(server_error=False)) from None
            except (asyncpg.InternalClientError, OSError) as error:
                raise self._lose(_described(error)) from None
            except asyncio.CancelledError:
                self._interrupted = True
                raise

    def _check_connected(self) -> None:
        if self.lost is not None:
            raise ConnectionLost(_LOST + self.lost)
        if self._gone():
            raise self._lose("the connection had already closed (the server went away or ended it)")

    def _gone(self) -> bool:
        """Whether the connection is closed, or asyncpg already took it back from us because it closed."""
        try:
            return self.raw.is_closed()
        except asyncpg.InterfaceError:  # "connection has been released back to the pool"
            return True

    def _lose(self, reason: str) -> ConnectionLost:
        if self.lost is None:
            self.lost = reason
        self._drop()
        return ConnectionLost(_LOST + self.lost)

    def _drop(self) -> None:
        """Close the socket at once: asyncpg then gives the slot back to the pool, which reconnects on demand."""
        with contextlib.suppress(asyncpg.InterfaceError):  # already taken back
            self.raw.terminate()

    def _state(self, *, server_error: bool) -> TransactionState:
        if self._gone() or not self.raw.is_in_transaction():
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
        if not self._gone() and not self.raw.is_in_transaction():
            raise SqlError("the statement ended the transaction", "ended")

    async def begin(self, read_only: bool) -> None:
        # A query right after BEGIN READ ONLY takes the snapshot: from then on SET TRANSACTION READ WRITE fails.
        sql = "BEGIN READ ONLY; SELECT 1" if read_only else "BEGIN"
        await self._guarded(lambda: self.raw.execute(sql))

    async def fetch(self, sql: str, params: Sequence[Param], limit: int) -> Rows:
        _refuse_transaction_control(sql)

        async def run() -> tuple[tuple[str, ...], list[Any]]:
            statement = await self.raw.prepare(sql)
            cursor = await statement.cursor(*params)
            records = await cursor.fetch(limit + 1)
            self._still_open()
            return tuple(attribute.name for attribute in statement.get_attributes()), records

        columns, records = await self._guarded(run, in_transaction=True)
        return Rows(columns, [tuple(record.values()) for record in records[:limit]], len(records) > limit)

    async def execute(self, sql: str, params: Sequence[Param]) -> int:
        _refuse_transaction_control(sql)

        async def run() -> str:
            statement = await self.raw.prepare(sql)
            await statement.fetch(*params)
            self._still_open()
            return statement.get_statusmsg() or ""

        status = await self._guarded(run, in_transaction=True)
        last = status.rpartition(" ")[2]
        return int(last) if last.isdigit() else 0

    async def commit(self) -> None:
        sent = False

        async def run() -> str:
            nonlocal sent
            sent = True
            try:
                return await self.raw.execute("COMMIT")
            except asyncpg.InternalClientError as error:
                if str(error).startswith("cannot switch to state"):
                    # asyncpg refused to start the query: its protocol was still busy with an error
                    # (the server's "terminating connection" arrived first), so COMMIT was never written.
                    sent = False
                raise

        try:
            status = await self._guarded(run)
        except ConnectionLost as error:
            if sent:  # the server may have committed before the connection went
                raise ConnectionLost(error.message, outcome_unknown=True) from None
            raise
        if status != "COMMIT":
            raise SqlError(
                "PostgreSQL rolled the transaction back instead of committing it, because a statement in it "
                "had failed. Nothing was committed.",
                "ended",
            )

    async def rollback(self) -> None:
        if self._interrupted:  # its statement may still be running: ending the session rolls back at once
            async with self._lock:
                self._drop()
            return

        async def run() -> None:
            if self.raw.is_in_transaction():
                await self.raw.execute("ROLLBACK")

        await self._guarded(run, deadline=self._rollback_deadline)

    @property
    def _rollback_deadline(self) -> float:
        """A rollback answers at once, or the connection is in trouble: dropping it rolls back too, so
        never wait long (teardown has its own time budget, 10 s by default)."""
        return min(self._deadline, _ROLLBACK_WAIT)

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

    async def hand_back(self, give: Callable[[PoolConnectionProxy[Any]], Awaitable[object]]) -> str | None:
        """Roll back what is open and `give` the connection to the pool; what failed meanwhile, if anything.

        A connection already lost is not given: asyncpg took it back when it closed. One that fails
        here, or whose caller is cancelled here, is dropped, which frees its slot all the same.
        """
        async with self._lock:
            if self.lost is not None or self._interrupted or self._gone():
                self._drop()  # a protocol abort may leave a closed connection still lent out
                return None
            try:
                if self.raw.is_in_transaction():  # else asyncpg's reset complains about an open transaction
                    async with SystemTimeout(self._rollback_deadline):
                        await self.raw.execute("ROLLBACK")
                await give(self.raw)
            except BaseException as error:
                self._drop()
                if not isinstance(error, Exception):
                    raise
                self.lost = (
                    "the server did not answer in time" if isinstance(error, TimeoutError) else _described(error)
                )
                return self.lost
            return None


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
            if self._in_use < self.pool_size:  # a slot was free: connecting is what took too long
                raise DatabaseUnavailable(
                    f"could not connect to PostgreSQL: the server did not answer within {self.statement_timeout:g} s"
                ) from None
            raise DatabaseUnavailable(
                f"no database connection became free within {self.statement_timeout:g} s: all {self.pool_size} "
                "are in use by open transactions. Commit or roll back the ones you no longer need, then try again."
            ) from None
        except (ValueError, asyncpg.ClientConfigurationError) as error:  # asyncpg read the URL only now
            raise ConfigurationError(
                self._scrubbed(
                    f"LLM_DO_DATABASE_URL cannot be used: {error}. Fix it; the form is "
                    "postgresql://user:password@host:5432/dbname?option=value"
                )
            ) from None
        except Exception as error:
            message = f"could not connect to PostgreSQL: {type(error).__name__}: {error}"
            raise DatabaseUnavailable(self._scrubbed(message)) from None
        self._in_use += 1
        return PostgresConnection(raw, self.statement_timeout)

    async def release(self, connection: Connection) -> None:
        if not isinstance(connection, PostgresConnection) or self._pool is None:
            raise ValueError("this connection does not belong to this pool")
        if connection.released:
            return
        connection.released = True
        self._in_use -= 1
        pool, timeout = self._pool, self.statement_timeout

        async def give(raw: PoolConnectionProxy[Any]) -> None:
            await in_fresh_context(lambda: pool.release(raw, timeout=timeout))  # its timer too

        problem = await connection.hand_back(give)
        if problem is not None:
            _logger.warning(
                "sql: a PostgreSQL connection failed as it was given back (%s); the pool dropped it",
                self._scrubbed(problem),
            )

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
        return scrubbed(text, self.__url)

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
