"""The `sql` toolset: transactions on a pooled database, named by `txn_...` handles, for one call.

The pool (`Database`) is global; a `SqlToolset` is made for each call and keeps the transactions
that call opened. A transaction holds one pooled connection from `begin` to `commit`/`rollback`;
one the model forgets is rolled back when the call ends, and its connection goes back to the pool.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import datetime
import decimal
import json
import logging
import math
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic_ai.exceptions import ToolFailed

from .. import Handles, ToolPolicy, Toolset, tool
from .database import Connection, ConnectionLost, Database, DatabaseUnavailable, Param, Rows, SqlError

__all__ = ["SqlToolset", "Transaction"]

T = TypeVar("T")
_SHOWN_SQL = 500  # characters of a failed statement quoted back to the model
_logger = logging.getLogger("llm_do")


class Transaction:
    """One open transaction: a pooled connection, lent until `commit` or `rollback`."""

    def __init__(self, database: Database, connection: Connection, read_only: bool) -> None:
        self.name = "txn"
        """Its handle, once the toolset has given it one."""
        self.database = database
        self.connection = connection
        self.read_only = read_only
        self.lock = asyncio.Lock()  # parallel tool calls on one transaction take turns
        self.gone: str | None = None
        """Why the database no longer has this transaction, once it has lost it."""
        self.closed = False

    async def commit(self) -> None:
        """Commit; on success the connection goes back to the pool."""
        await self.connection.commit()
        await self.close()

    async def rollback(self) -> None:
        """Roll back (what happens to a forgotten transaction) and give the connection back."""
        try:
            await self.connection.rollback()
        finally:
            await self.close()

    async def forget(self) -> None:
        """What happens to a transaction left open when its call ends: rolled back, never committed.

        A transaction whose connection is already lost needs no rollback (the database dropped it
        with the connection): one warning on the `llm_do` logger says so.
        """
        try:
            await self.rollback()
        except ConnectionLost as error:
            _logger.warning(
                "sql: forgotten transaction %s was lost with its connection, which rolls it back: %s",
                self.name,
                error.message,
            )

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await self.database.release(self.connection)

    def __repr__(self) -> str:
        return f"Transaction(read_only={self.read_only}, closed={self.closed})"


class SqlToolset(Toolset):
    """SQL for a model: begin, query, execute, commit, rollback, and schema discovery (tables, describe).

    Every statement runs in a transaction the model opened with `begin`. Values are always bound
    (placeholders `$1`, `$2`, ...; `params[0]` binds `$1`), never formatted into the SQL. `query`
    returns at most `max_rows` rows and `max_bytes` bytes of JSON rows. By default `execute` and
    `commit` ask for approval; the rest is allowed.
    """

    default_policy = ToolPolicy(tools={"execute": "ask", "commit": "ask"})

    def __init__(self, database: Database, *, max_rows: int = 100, max_bytes: int = 65536) -> None:
        self.database = database
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.txns: Handles[Transaction] = Handles("txn", on_forget=Transaction.forget, opened_by="begin")
        self.lost: dict[str, str] = {}
        """Handles closed because their connection failed, and what happened."""

    @tool
    async def begin(self, read_only: bool = False) -> str:
        """Open a transaction and return its handle (txn_...). Every query and execute runs in one, and
        nothing it changes is saved until commit. Pass read_only=true when you only read. Close every
        transaction with commit or rollback when you are done with it."""
        connection = await self._acquire("begin")
        try:
            await connection.begin(read_only)
        except BaseException as error:
            await self.database.release(connection)
            if isinstance(error, ConnectionLost):
                _logger.warning("sql: begin failed: %s", error.message)
                raise ToolFailed(
                    f"begin failed: {error.message}\nNo transaction was opened; call begin again (the pool opens "
                    "a new connection)."
                ) from None
            if isinstance(error, SqlError):
                raise ToolFailed(f"begin failed: {error.message}") from None
            raise
        transaction = Transaction(self.database, connection, read_only)
        transaction.name = self.txns.open(transaction)
        return transaction.name

    @tool
    async def query(self, txn: str, sql: str, params: list[Param] | None = None) -> dict[str, Any]:
        """Run one statement that returns rows (SELECT, WITH, ... RETURNING) in transaction `txn`.
        Write every value as a placeholder $1, $2, ... and pass the values in `params` (params[0] is $1).
        Returns {"columns": [...], "rows": [{column: value}, ...]}; when only the first rows fit, a
        "truncated" entry says so: narrow the query (WHERE, fewer columns) or page it (LIMIT/OFFSET).

        Args:
            txn: The handle `begin` returned, exactly as it was written (like txn_1a2b3c4d).
        """
        _check_text("query", sql, params)
        result = await self._in_transaction("query", txn, sql, lambda c: c.fetch(sql, params or [], self.max_rows))
        return self._shaped(result)

    @tool
    async def execute(self, txn: str, sql: str, params: list[Param] | None = None) -> dict[str, int]:
        """Run one statement that changes data or schema (INSERT, UPDATE, DELETE, CREATE, ...) in
        transaction `txn`, with placeholders $1, $2, ... bound to `params` (params[0] is $1).
        Returns {"rows_affected": n}. Nothing is saved until commit.

        Args:
            txn: The handle `begin` returned, exactly as it was written (like txn_1a2b3c4d).
        """
        _check_text("execute", sql, params)
        count = await self._in_transaction("execute", txn, sql, lambda c: c.execute(sql, params or []))
        return {"rows_affected": count}

    @tool
    async def commit(self, txn: str) -> str:
        """Commit transaction `txn`: its changes are saved and visible to others. The handle is closed.

        Args:
            txn: The handle `begin` returned, exactly as it was written (like txn_1a2b3c4d).
        """
        transaction = self._get("commit", txn)
        async with transaction.lock:
            self._check_usable("commit", transaction, txn)
            if transaction.gone is not None:
                self.txns.pop(txn)
                await _abandon(transaction)
                raise ToolFailed(
                    f"commit failed: nothing was committed, because the database had already rolled back "
                    f"{txn} ({transaction.gone}). {txn} is closed; begin a new transaction and redo the work."
                )
            try:
                await transaction.commit()
            except ConnectionLost as error:
                await self._lose(txn, transaction, error)
                if error.outcome_unknown:
                    raise ToolFailed(
                        f"commit failed: {error.message}\nThe connection went while COMMIT was under way: the "
                        f"database may or may not have committed {txn}. {txn} is closed; begin a new transaction "
                        "and check whether its changes are there before redoing them."
                    ) from None
                raise ToolFailed(
                    f"commit failed: {error.message}\nNothing was committed: the database rolled {txn} back when "
                    f"the connection was lost. {txn} is closed; begin a new transaction and redo the work."
                ) from None
            except SqlError as error:
                if error.state == "open":
                    raise ToolFailed(
                        f"commit failed: {error.message}\n{txn} is still open: fix the problem and commit "
                        "again, or roll it back."
                    ) from None
                self.txns.pop(txn)
                await _abandon(transaction)
                raise ToolFailed(
                    f"commit failed: {error.message}\n{txn} is closed; begin a new transaction and redo the work."
                ) from None
            self.txns.pop(txn)
        return f"{txn} committed"

    @tool
    async def rollback(self, txn: str) -> str:
        """Roll back transaction `txn`: everything it changed is undone. The handle is closed.

        Args:
            txn: The handle `begin` returned, exactly as it was written (like txn_1a2b3c4d).
        """
        if txn in self.lost:
            raise ToolFailed(self._lost_text("rollback", txn))
        transaction = self.txns.pop(txn)
        async with transaction.lock:
            try:
                await transaction.rollback()
            except ConnectionLost as error:
                self._note_lost(txn, error)
                raise ToolFailed(
                    f"rollback: {error.message}\nThe database rolled {txn} back when the connection was lost: "
                    f"nothing in it was saved. {txn} is closed."
                ) from None
            except SqlError as error:
                raise ToolFailed(f"rollback reported: {error.message}\n{txn} is closed all the same.") from None
        return f"{txn} rolled back"

    @tool
    async def tables(self) -> list[str]:
        """The tables and views of the database, written as SQL names."""
        return await self._reading(lambda connection: connection.tables())

    @tool
    async def describe(self, table: str) -> list[dict[str, Any]]:
        """The columns of a table or view: name, type, nullable, default, primary_key."""
        if _lone_surrogate(table) is not None:
            raise ToolFailed(f"describe: there is no table or view named {table!r}: {_NOT_TEXT}")
        columns = await self._reading(lambda connection: connection.describe(table))
        if columns is None:
            names = await self._reading(lambda connection: connection.tables())
            shown = ", ".join(names[:50]) + (", ..." if len(names) > 50 else "")
            raise ToolFailed(f"describe: there is no table or view named {table!r}. Tables: {shown or 'none'}")
        return [dataclasses.asdict(column) for column in columns]

    # -- helpers ---------------------------------------------------------------

    async def _acquire(self, tool_name: str) -> Connection:
        try:
            return await self.database.acquire()
        except DatabaseUnavailable as error:
            raise ToolFailed(f"{tool_name} failed: {error}") from None

    async def _reading(self, read: Callable[[Connection], Awaitable[T]]) -> T:
        """`read` in a short read-only transaction of its own."""
        connection = await self._acquire("reading the schema")
        try:
            await connection.begin(read_only=True)
            return await read(connection)
        except SqlError as error:
            raise ToolFailed(f"reading the schema failed: {error.message}") from None
        finally:
            try:
                await connection.rollback()
            except SqlError:
                pass  # a lost connection is discarded by the pool
            finally:
                await self.database.release(connection)

    def _get(self, tool_name: str, txn: str) -> Transaction:
        if txn in self.lost:
            raise ToolFailed(self._lost_text(tool_name, txn))
        return self.txns.get(txn)

    def _check_usable(self, tool_name: str, transaction: Transaction, txn: str) -> None:
        if txn in self.lost:
            raise ToolFailed(self._lost_text(tool_name, txn))
        if transaction.closed:
            raise ToolFailed(f"{txn} was closed by another tool call meanwhile; begin a new transaction")

    def _lost_text(self, tool_name: str, txn: str) -> str:
        return (
            f"{tool_name} refused: {txn} is closed, because its database connection was lost "
            f"({self.lost[txn]}). The database rolled it back: nothing in it was saved. Begin a new "
            "transaction and redo the work."
        )

    def _note_lost(self, txn: str, error: ConnectionLost) -> None:
        self.lost[txn] = error.message.removeprefix("the database connection was lost: ")
        _logger.warning("sql: transaction %s is gone: %s", txn, error.message)

    async def _lose(self, txn: str, transaction: Transaction, error: ConnectionLost) -> None:
        """Close a handle whose connection failed: later calls naming it are told what happened."""
        self._note_lost(txn, error)
        if txn in self.txns and self.txns.get(txn) is transaction:
            self.txns.pop(txn)
        await transaction.close()  # quiet: the pool already took the connection back

    async def _in_transaction(self, tool_name: str, txn: str, sql: str, run: Callable[[Connection], Awaitable[T]]) -> T:
        transaction = self._get(tool_name, txn)
        async with transaction.lock:
            self._check_usable(tool_name, transaction, txn)
            if transaction.gone is not None:
                raise ToolFailed(
                    f"{tool_name} refused: the database already rolled back {txn} ({transaction.gone}). "
                    f"Call rollback with txn={txn!r} to close the handle, then begin again."
                )
            try:
                return await run(transaction.connection)
            except ConnectionLost as error:
                await self._lose(txn, transaction, error)
                raise ToolFailed(
                    f"{tool_name} failed: {error.message}\nstatement: {_shown(sql)}\n{txn} is closed: the database "
                    "rolled it back when the connection was lost, so nothing in it was saved. Begin a new "
                    "transaction and redo the work."
                ) from None
            except SqlError as error:
                if error.state == "ended":
                    transaction.gone = error.message
                raise ToolFailed(_failure(tool_name, txn, sql, error)) from None

    def _shaped(self, result: Rows) -> dict[str, Any]:
        columns = _unique(result.columns)
        rows: list[dict[str, Any]] = []
        size = 2
        truncated = None
        for values in result.rows:
            row = {name: jsonable(value) for name, value in zip(columns, values, strict=True)}
            row_size = len(json.dumps(row, ensure_ascii=False).encode()) + 1
            if size + row_size > self.max_bytes:
                truncated = (
                    f"only the first {len(rows)} row(s) are shown: the next row would pass the "
                    f"{self.max_bytes}-byte limit on results. Select fewer or shorter columns "
                    "(e.g. substr(col, 1, 200)), or page with LIMIT/OFFSET."
                )
                break
            rows.append(row)
            size += row_size
        else:
            if result.more:
                truncated = (
                    f"only the first {len(rows)} rows are shown (the limit); the statement returned more. "
                    "Narrow it with WHERE or aggregates, or page with LIMIT/OFFSET."
                )
        shaped: dict[str, Any] = {"columns": list(columns), "rows": rows}
        if truncated is not None:
            shaped["truncated"] = truncated
        return shaped

    def __repr__(self) -> str:
        return f"SqlToolset({self.database!r}, open={list(self.txns)})"


_NOT_TEXT = "it contains a lone surrogate (shown escaped), which is not text and cannot reach the database"


def _check_text(tool_name: str, sql: str, params: Sequence[Param] | None) -> None:
    """Refuse, before any handle is looked up, text that no database can take: lone surrogates, and
    NUL characters in a statement (SQLite refuses them; PostgreSQL's protocol cannot carry them)."""
    at = _lone_surrogate(sql)
    if at is not None:
        raise ToolFailed(f"{tool_name} refused: the statement has {sql[at]!r} at character {at + 1}; {_NOT_TEXT}")
    at = sql.find("\x00")
    if at >= 0:
        raise ToolFailed(
            f"{tool_name} refused: the statement has a NUL character ('\\x00') at character {at + 1}, "
            "which no database accepts in SQL text; pass such data as a parameter"
        )
    for number, value in enumerate(params or [], 1):
        if isinstance(value, str) and _lone_surrogate(value) is not None:
            raise ToolFailed(f"{tool_name} refused: params[{number - 1}] (${number}) is {value!r}; {_NOT_TEXT}")


def _lone_surrogate(text: str) -> int | None:
    """Where `text` has a lone surrogate (text that cannot be UTF-8), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return error.start
    return None


async def _abandon(transaction: Transaction) -> None:
    """Roll back what is left of a transaction that failed; its connection goes back to the pool either way."""
    with contextlib.suppress(SqlError):
        await transaction.rollback()


def _failure(tool_name: str, txn: str, sql: str, error: SqlError) -> str:
    lines = [f"{tool_name} failed: {error.message}", f"statement: {_shown(sql)}"]
    if error.state == "aborted":
        lines.append(
            f"{txn} is aborted: the database ignores every further statement in it. Call rollback with "
            f"txn={txn!r}, then begin again (or ROLLBACK TO a savepoint made before the error)."
        )
    elif error.state == "ended":
        lines.append(
            f"The database rolled back {txn}: nothing in it was saved. Call rollback with txn={txn!r} to "
            "close the handle, then begin again."
        )
    else:
        lines.append(f"{txn} is still open; the failed statement changed nothing.")
    return "\n".join(lines)


def _shown(sql: str) -> str:
    return sql if len(sql) <= _SHOWN_SQL else sql[:_SHOWN_SQL] + " ..."


def _unique(columns: Sequence[str]) -> list[str]:
    """Column names made unique (`id`, `id_2`), so no value is lost when a row becomes a dict."""
    used: set[str] = set()
    names: list[str] = []
    for column in columns:
        name, number = column, 1
        while name in used:
            number += 1
            name = f"{column}_{number}"
        used.add(name)
        names.append(name)
    return names


def jsonable(value: Any) -> Any:
    """A database value as JSON: exact numbers and times as strings, bytes as base64."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "base64:" + base64.b64encode(bytes(value)).decode()
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta | uuid.UUID):
        return str(value)
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(item) for item in value]
    return str(value)
