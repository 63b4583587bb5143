"""SQLite behind the `Database` interface: a small pool of connections, each confined to a thread of its own.

A connection is opened, used and closed on its worker thread only, so blocking SQLite calls never
block the event loop and the connection is never shared between threads. The file is put in WAL
mode (readers do not wait for the writer); a busy writer is waited for up to the statement timeout.

Model-written statements pass an authorizer: transaction control (BEGIN, COMMIT, ROLLBACK) is
refused (the tools own it), so are ATTACH/DETACH and pragmas that change settings, and in a
read-only transaction every write. Prepared statements are never cached, so each statement is
authorized in the transaction it runs in.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import math
import os
import queue
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import unquote
from urllib.request import pathname2url

from ..errors import ConfigurationError
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
    in_fresh_context,
)

__all__ = ["SqliteDatabase", "sqlite_path"]

T = TypeVar("T")

_READ_PRAGMAS = frozenset(
    {"table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo", "foreign_key_list"}
)
_WRITES = frozenset(
    getattr(sqlite3, name)
    for name in dir(sqlite3)
    if re.fullmatch(r"SQLITE_(INSERT|UPDATE|DELETE|CREATE_\w+|DROP_\w+|ALTER_TABLE|REINDEX|ANALYZE)", name)
)
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MISSING_VALUE = re.compile(r"You did not supply a value for binding parameter :(\w+)\.")


def sqlite_path(url: str) -> str:
    """The file named by `sqlite:///relative/app.db` or `sqlite:////absolute/app.db`."""
    rest = url.split("://", 1)[1]
    path, _, options = rest.partition("?")
    if not path.startswith("/") or options:
        raise ConfigurationError(
            "LLM_DO_DATABASE_URL: a SQLite URL is sqlite:/// followed by a file path and nothing else, "
            "like sqlite:///data/app.db or sqlite:////var/lib/app.db"
        )
    path = unquote(path[1:])
    if not path or path == ":memory:" or path.startswith("file:"):
        raise ConfigurationError(
            "LLM_DO_DATABASE_URL: the sql toolset needs a SQLite file (each pooled connection "
            "would see its own empty in-memory database), like sqlite:///data/app.db"
        )
    return path


_INT64 = range(-(2**63), 2**63)


def _bind(params: Sequence[Param]) -> dict[str, Param]:
    """`$1`, `?1` (and so on) are SQLite parameters named "1", ...: bind them by name, so order and repeats work.

    An integer beyond SQLite's 64 bits is refused here, naming the parameter (sqlite3 would raise OverflowError).
    """
    for number, value in enumerate(params, 1):
        if isinstance(value, int) and not isinstance(value, bool) and value not in _INT64:
            raise SqlError(
                f"${number} is {value}, beyond SQLite's 64-bit integers ({_INT64.start} to {_INT64.stop - 1}): "
                "pass it as text or as a float"
            )
    return {str(number): value for number, value in enumerate(params, 1)}


def _quoted(name: str) -> str:
    return name if _PLAIN_NAME.fullmatch(name) else '"' + name.replace('"', '""') + '"'


def _unquoted(name: str) -> str:
    name = name.strip()
    if len(name) >= 2 and name[0] == name[-1] == '"':
        return name[1:-1].replace('""', '"')
    return name


class _Session:
    """One SQLite connection and its state. Every method runs on the connection's worker thread."""

    def __init__(self, path: str, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self.conn: sqlite3.Connection | None = None
        self.read_only = False
        self.user = False  # a model-written statement is being prepared
        self.denied: str | None = None
        self.deadline = math.inf
        self.file: tuple[int, int] | None = None
        """The file the connection has open (device, inode): a file removed or replaced since is another one."""

    def open(self, existing: bool = False) -> None:
        """Connect; `existing`: to the file the pool has had open, never making a new, empty one in its place."""
        target = f"file:{pathname2url(os.path.abspath(self.path))}?mode=rw" if existing else self.path
        try:
            conn = sqlite3.connect(
                target, timeout=self.timeout, isolation_level=None, cached_statements=0, uri=existing
            )
        except sqlite3.OperationalError:
            if existing and not os.path.exists(self.path):
                raise sqlite3.OperationalError(_GONE) from None
            raise
        try:
            self._use_wal(conn)
            conn.execute("PRAGMA foreign_keys=ON")
            conn.set_authorizer(self._authorize)
            conn.set_progress_handler(self._progress, 1000)
            self.file = _file_of(self.path)
        except BaseException:
            conn.close()
            raise
        self.conn = conn

    def _moved(self) -> bool:
        """Whether the file the connection has open is no longer the one at its path (removed, or replaced by a
        restore). SQLite in WAL mode goes on reading and writing the removed file without a word."""
        try:
            return _file_of(self.path) != self.file
        except FileNotFoundError:
            return True

    def _use_wal(self, conn: sqlite3.Connection) -> None:
        """Switch the file to WAL mode (a no-op once it is). While a file in another journal mode is
        switched, connections opened meanwhile get SQLITE_BUSY at once: SQLite does not call the busy
        handler there. So wait for the switch here, up to the timeout, as the busy handler would."""
        deadline = time.monotonic() + self.timeout
        pause = 0.001
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as error:
                if getattr(error, "sqlite_errorname", "") != "SQLITE_BUSY" or time.monotonic() >= deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.close()  # rolls back an open transaction

    def interrupt(self) -> None:
        """Stop the statement running now. The one call that is safe from another thread."""
        conn = self.conn
        if conn is not None:
            conn.interrupt()

    # -- guards ----------------------------------------------------------------

    def _authorize(self, action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None) -> int:
        if not self.user:
            return sqlite3.SQLITE_OK
        reason = None
        if action == sqlite3.SQLITE_TRANSACTION:
            reason = TRANSACTION_CONTROL_REFUSED
        elif action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
            reason = "ATTACH and DETACH are not allowed: the toolset works on its one database file"
        elif action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() not in _READ_PRAGMAS:
            reason = f"PRAGMA {arg1} is not allowed: only reading pragmas ({', '.join(sorted(_READ_PRAGMAS))}) are"
        elif self.read_only and action in _WRITES:
            reason = "this transaction is read-only: begin a transaction with read_only=false to write"
        if reason is None:
            return sqlite3.SQLITE_OK
        self.denied = reason
        return sqlite3.SQLITE_DENY

    def _progress(self) -> int:
        return 1 if time.monotonic() > self.deadline else 0

    @contextmanager
    def _statement(self, params: Sequence[Param] = (), *, user: bool) -> Iterator[sqlite3.Connection]:
        conn = self.conn
        if conn is None:
            raise SqlError("the connection is closed", "ended")
        self.user, self.denied = user, None
        self.deadline = time.monotonic() + self.timeout
        try:
            yield conn
        except sqlite3.Error as error:
            raise SqlError(self._explain(error, params), "open" if conn.in_transaction else "ended") from None
        finally:
            self.user, self.deadline = False, math.inf

    def _explain(self, error: sqlite3.Error, params: Sequence[Param]) -> str:
        text = str(error)
        if self.denied is not None:
            return self.denied
        if getattr(error, "sqlite_errorname", "") == "SQLITE_INTERRUPT" and time.monotonic() > self.deadline:
            return f"the statement was cancelled: it ran longer than the statement timeout ({self.timeout:g} s)"
        if text.startswith("Binding ") and "has no name" in text:
            return "the statement uses ? placeholders: write $1, $2, ... instead (params[0] binds $1)"
        missing = _MISSING_VALUE.fullmatch(text)
        if missing and missing.group(1).isdigit():
            return f"the statement uses ${missing.group(1)}, but {len(params)} param(s) were given (params[0] binds $1)"
        if missing:
            return f"the statement uses the named placeholder {missing.group(1)!r}: write $1, $2, ... instead"
        if getattr(error, "sqlite_errorname", "") == "SQLITE_BUSY":
            return f"{text}: another transaction kept the database locked for {self.timeout:g} s; try again later"
        return text

    def _still_open(self, conn: sqlite3.Connection) -> None:
        if not conn.in_transaction:
            raise SqlError("the statement ended the transaction", "ended")

    def _in_transaction(self) -> None:
        """Refuse to run a model's statement outside a transaction: it would be committed at once."""
        if self.conn is None or not self.conn.in_transaction:
            raise SqlError("the transaction no longer exists in the database", "ended")

    # -- operations ------------------------------------------------------------

    def begin(self, read_only: bool) -> None:
        if self.conn is not None and self._moved():  # a pooled connection to a file since replaced: the new one
            self.close()
            try:
                self.open(existing=True)
            except sqlite3.Error as error:
                raise ConnectionLost(f"could not open the SQLite database again: {_why(error, self.timeout)}") from None
        with self._statement(user=False) as conn:
            conn.execute(f"PRAGMA query_only={'ON' if read_only else 'OFF'}")
            self.read_only = read_only
            conn.execute("BEGIN DEFERRED" if read_only else "BEGIN IMMEDIATE")  # writers queue at begin

    def fetch(self, sql: str, params: Sequence[Param], limit: int) -> Rows:
        self._in_transaction()
        with self._statement(params, user=True) as conn:
            cursor = conn.execute(sql, _bind(params))
            try:
                columns = tuple(str(item[0]) for item in cursor.description or ())
                rows = [tuple(row) for row in cursor.fetchmany(limit + 1)]
            finally:
                cursor.close()
            self._still_open(conn)
        return Rows(columns, rows[:limit], len(rows) > limit)

    def execute(self, sql: str, params: Sequence[Param]) -> int:
        self._in_transaction()
        with self._statement(params, user=True) as conn:
            cursor = conn.execute(sql, _bind(params))
            count = cursor.rowcount
            cursor.close()
            self._still_open(conn)
        return max(count, 0)

    def commit(self) -> None:
        if self.conn is not None and self._moved():
            self.close()  # rolls the transaction back
            raise ConnectionLost(
                "the database file was removed or replaced while the transaction was open, so its changes went to "
                "the removed file"
            )
        with self._statement(user=False) as conn:
            conn.execute("COMMIT")
        self._reset_mode()

    def rollback(self) -> None:
        with self._statement(user=False) as conn:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        self._reset_mode()

    def reset(self) -> bool:
        """Make the connection fit for the next transaction; False when it is not."""
        try:
            self.rollback()
        except SqlError:
            return False
        return self.conn is not None

    def _reset_mode(self) -> None:
        with self._statement(user=False) as conn:
            conn.execute("PRAGMA query_only=OFF")
            self.read_only = False

    def tables(self) -> list[str]:
        with self._statement(user=False) as conn:
            names = conn.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
            ).fetchall()
        return [_quoted(str(name)) for (name,) in names]

    def describe(self, table: str) -> list[Column] | None:
        with self._statement(user=False) as conn:
            rows = conn.execute(
                'SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info(?)', (_unquoted(table),)
            ).fetchall()
        columns = [
            Column(str(name), str(kind), not notnull, None if default is None else str(default), bool(pk))
            for name, kind, notnull, default, pk in rows
        ]
        return columns or None


_GONE = "the database file is gone (removed, or moved away); try again once it is back"


def _why(error: sqlite3.Error, timeout: float) -> str:
    """Why a connection could not be opened, and the way out."""
    if getattr(error, "sqlite_errorname", "") == "SQLITE_BUSY":
        return f"{error}: another connection kept the database locked for {timeout:g} s; try again later"
    return str(error) if str(error) == _GONE else f"{error}; try again later"


def _file_of(path: str) -> tuple[int, int]:
    found = os.stat(path)
    return found.st_dev, found.st_ino


_Job = tuple[Callable[[], Any], "concurrent.futures.Future[Any]"]


class _Worker:
    """A thread that runs one connection's jobs, in order; it starts with an empty context."""

    def __init__(self, name: str, on_stop: Callable[[], None]) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._on_stop = on_stop
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            while True:
                job = self._jobs.get()
                if job is None:
                    return
                work, future = job
                del job  # hold nothing of a finished job while waiting for the next one
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(work())
                    except BaseException as error:
                        future.set_exception(error)
                del work, future
        finally:
            self._on_stop()

    async def call(self, work: Callable[[], T]) -> T:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._jobs.put((work, future))
        return await asyncio.wrap_future(future)

    def stop(self) -> None:
        """Close the connection and end the thread once the jobs already queued are done."""
        self._jobs.put(None)

    def join(self) -> None:
        self._thread.join()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


class SqliteConnection(Connection):
    """A pooled SQLite connection; each call runs on its worker thread."""

    def __init__(self, session: _Session, worker: _Worker) -> None:
        self._session = session
        self._worker = worker

    async def _run(self, work: Callable[[], T]) -> T:
        try:
            return await self._worker.call(work)
        except asyncio.CancelledError:
            self._session.interrupt()  # the statement stops now; later jobs (a rollback) run after it
            raise

    async def begin(self, read_only: bool) -> None:
        await self._run(lambda: self._session.begin(read_only))

    async def fetch(self, sql: str, params: Sequence[Param], limit: int) -> Rows:
        return await self._run(lambda: self._session.fetch(sql, params, limit))

    async def execute(self, sql: str, params: Sequence[Param]) -> int:
        return await self._run(lambda: self._session.execute(sql, params))

    async def commit(self) -> None:
        await self._run(self._session.commit)

    async def rollback(self) -> None:
        await self._run(self._session.rollback)

    async def tables(self) -> list[str]:
        return await self._run(self._session.tables)

    async def describe(self, table: str) -> list[Column] | None:
        return await self._run(lambda: self._session.describe(table))

    async def open(self, existing: bool) -> None:
        await self._run(lambda: self._session.open(existing))

    async def reset(self) -> bool:
        return await self._run(self._session.reset)

    async def close(self) -> None:
        """Close the connection and wait for its thread to end."""
        try:
            await self._worker.call(self._session.close)
        finally:
            self._worker.stop()
        self._worker.join()  # at once: the thread ends right after its last job

    def discard(self) -> None:
        """Close the connection in the background, after the jobs already queued."""
        self._worker.stop()

    @property
    def thread_alive(self) -> bool:
        return self._worker.alive


class SqliteDatabase(Database):
    """A pool of SQLite connections to one file, opened on demand, at most `pool_size` at once."""

    kind = "sqlite"

    def __init__(self, path: str, *, pool_size: int = 5, statement_timeout: float = 30.0) -> None:
        super().__init__(pool_size=pool_size, statement_timeout=statement_timeout)
        self._path = path
        self._slots = asyncio.Semaphore(pool_size)
        self._idle: list[SqliteConnection] = []
        self._all: set[SqliteConnection] = set()
        self._in_use = 0
        self._closed = False
        self._serial = itertools.count(1)
        self._opened = False
        """A connection was opened: the file exists, and a new connection opens that file or none."""

    async def acquire(self) -> Connection:
        self._check_open()
        try:
            if self._slots.locked():  # wait in a context of its own: the timeout's timer outlives the wait
                await in_fresh_context(self._wait_for_slot, undo=self._give_back_slot)
            else:
                await self._slots.acquire()
        except TimeoutError:
            raise DatabaseUnavailable(
                f"no database connection became free within {self.statement_timeout:g} s: all {self.pool_size} "
                "are in use by open transactions. Commit or roll back the ones you no longer need, then try again."
            ) from None
        try:
            self._check_open()
            connection = self._idle.pop() if self._idle else await self._connect()
        except BaseException:
            self._slots.release()
            raise
        self._in_use += 1
        return connection

    async def _wait_for_slot(self) -> None:
        async with asyncio.timeout(self.statement_timeout):
            await self._slots.acquire()

    async def _give_back_slot(self, _: None) -> None:
        self._slots.release()

    async def _connect(self) -> SqliteConnection:
        session = _Session(self._path, self.statement_timeout)
        connection = SqliteConnection(session, _Worker(f"llm-do-sqlite-{next(self._serial)}", session.close))
        try:
            await connection.open(existing=self._opened)
        except BaseException as error:
            connection.discard()
            if isinstance(error, sqlite3.Error):
                raise DatabaseUnavailable(
                    f"could not open the SQLite database: {_why(error, self.statement_timeout)}"
                ) from None
            raise
        self._all.add(connection)
        self._opened = True
        return connection

    async def release(self, connection: Connection) -> None:
        if not isinstance(connection, SqliteConnection) or connection not in self._all:
            raise ValueError("this connection does not belong to this pool")
        self._in_use -= 1
        try:
            fit = await connection.reset()
        except BaseException:
            self._discard(connection)
            raise
        finally:
            self._slots.release()
        if fit and not self._closed:
            self._idle.append(connection)
        else:
            self._discard(connection)

    def _discard(self, connection: SqliteConnection) -> None:
        self._all.discard(connection)
        connection.discard()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            self._all.discard(connection)
        for connection in idle:
            await connection.close()

    def stats(self) -> PoolStats:
        return PoolStats(
            size=self.pool_size, open=len(self._all), in_use=self._in_use, idle=len(self._idle), closed=self._closed
        )

    def _check_open(self) -> None:
        if self._closed:
            raise DatabaseUnavailable("the database pool is closed (the application is shutting down)")

    def __repr__(self) -> str:
        stats = self.stats()
        return f"SqliteDatabase(pool_size={self.pool_size}, open={stats.open}, in_use={stats.in_use})"
