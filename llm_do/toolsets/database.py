"""The interface the `sql` toolset uses: a pool of connections to one database, whatever its backend.

A backend (`sqlite_backend`, `postgres_backend`) provides a `Database` (the pool, global) whose
`acquire()` hands out a `Connection` used by one transaction at a time. Backends raise `SqlError`
for a failed statement and `DatabaseUnavailable` when no connection can be had; both messages are
safe to show to a model (they never contain the database URL).
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, TypeVar

from ..scopes import SystemTasks, system_task

__all__ = [
    "TRANSACTION_CONTROL_REFUSED",
    "Column",
    "Connection",
    "ConnectionLost",
    "Database",
    "DatabaseUnavailable",
    "Param",
    "PoolStats",
    "Rows",
    "SqlError",
    "TransactionState",
    "in_fresh_context",
]

T = TypeVar("T")

Param: TypeAlias = str | int | float | bool | None
"""A bound parameter: a JSON scalar. `params[0]` binds `$1`, `params[1]` binds `$2`, and so on."""

TransactionState: TypeAlias = Literal["open", "aborted", "ended"]
"""After a failed statement: the transaction goes on (`open`), refuses every statement until it is
rolled back (`aborted`, PostgreSQL), or no longer exists in the database (`ended`)."""


TRANSACTION_CONTROL_REFUSED = (
    "transaction control (BEGIN, COMMIT, ROLLBACK, ...) is not run as SQL here: use the begin, commit and "
    "rollback tools (SAVEPOINT, RELEASE and ROLLBACK TO a savepoint are fine)"
)


class SqlError(Exception):
    """A statement failed. `message` is the database's own text; `state` says what became of the transaction."""

    def __init__(self, message: str, state: TransactionState = "open") -> None:
        super().__init__(message)
        self.message = message
        self.state: TransactionState = state


class ConnectionLost(SqlError):
    """The connection under a transaction failed (server stopped, backend killed, network cut, no answer in
    time): the transaction is gone with it (`state` is `ended`), and the pool opens a new connection next time."""

    def __init__(self, message: str, *, outcome_unknown: bool = False) -> None:
        super().__init__(message, "ended")
        self.outcome_unknown = outcome_unknown
        """True when it failed during COMMIT: the server may have committed before the connection went."""


class DatabaseUnavailable(Exception):
    """No connection could be had: the pool stayed full, or the server could not be reached."""


@dataclass(frozen=True, slots=True)
class Rows:
    """The first rows of a result: column names, rows as tuples, and whether more rows exist."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    more: bool


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a table, as `describe` reports it."""

    name: str
    type: str
    nullable: bool
    default: str | None
    primary_key: bool


@dataclass(frozen=True, slots=True)
class PoolStats:
    """A pool's own counters, from `Database.stats()`."""

    size: int
    """Connections the pool opens at most (`pool_size`)."""
    open: int
    """Connections open now, lent out or idle."""
    in_use: int
    """Connections lent out: one per open transaction, and one per `tables`/`describe` call running."""
    idle: int
    """Open connections waiting in the pool."""
    closed: bool
    """Whether the pool is closed (later `acquire` calls fail)."""


class Connection(abc.ABC):
    """One pooled connection, used by one transaction at a time (the toolset serializes its statements)."""

    @abc.abstractmethod
    async def begin(self, read_only: bool) -> None:
        """Start a transaction."""

    @abc.abstractmethod
    async def fetch(self, sql: str, params: Sequence[Param], limit: int) -> Rows:
        """Run one statement and return at most `limit` rows (and whether more exist)."""

    @abc.abstractmethod
    async def execute(self, sql: str, params: Sequence[Param]) -> int:
        """Run one statement and return the number of rows it changed (0 when not applicable)."""

    @abc.abstractmethod
    async def commit(self) -> None:
        """Commit the transaction; `SqlError` when nothing was committed."""

    @abc.abstractmethod
    async def rollback(self) -> None:
        """Roll the transaction back (a no-op when none is open); `ConnectionLost` when the connection is gone."""

    @abc.abstractmethod
    async def tables(self) -> list[str]:
        """Names of the tables and views the connection can see, as they are written in SQL."""

    @abc.abstractmethod
    async def describe(self, table: str) -> list[Column] | None:
        """The columns of a table or view, or None when there is no such table."""


class Database(abc.ABC):
    """A pool of connections to one database: global, closed once when the application stops."""

    kind: str
    """The backend: `sqlite` or `postgresql`."""

    def __init__(self, *, pool_size: int, statement_timeout: float) -> None:
        if pool_size < 1:
            raise ValueError(f"pool_size must be >= 1, got {pool_size}")
        self.pool_size = pool_size
        """Connections open at most."""
        self.statement_timeout = statement_timeout
        """Seconds a statement, or a wait for a free connection, may take."""

    @abc.abstractmethod
    async def acquire(self) -> Connection:
        """A connection for one transaction; `DatabaseUnavailable` when none can be had in time."""

    @abc.abstractmethod
    async def release(self, connection: Connection) -> None:
        """Take a connection back (rolled back first if a transaction is still open).

        Never raises for a connection that failed: the pool discards it (logging one warning) and
        its slot is free again.
        """

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Close every connection; later `acquire` calls fail. Idempotent."""

    @abc.abstractmethod
    def stats(self) -> PoolStats:
        """The pool's counters."""


async def in_fresh_context(make: Callable[[], Awaitable[T]], undo: Callable[[T], Awaitable[Any]] | None = None) -> T:
    """`await make()` in a system task (an empty context).

    Event-loop handles made meanwhile (a connection's socket reader, a timeout's timer, which
    lingers in the loop after it is cancelled) then hold nothing of the calling run. If the caller
    is cancelled just as the task completes, `undo(result)` gives back what it got.
    """

    task = system_task(make)
    try:
        return await task
    except asyncio.CancelledError:
        if undo is not None and task.done() and not task.cancelled() and task.exception() is None:
            _undoing.spawn(undo, task.result())
        raise


_undoing = SystemTasks()
"""What callers cancelled as their task completed give back (kept until done; nobody waits for them)."""
