"""The bank's data layer over asyncpg: the schema, transactions, and the errors a caller sees.

Plain asyncpg, no llm-do: the llm-do toolset (`bank.toolsets`) and the plain pydantic-ai version
(`bank.plain`) both use it, so they differ only in how the agent gets its resources.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeAlias, TypeVar

import asyncpg

__all__ = [
    "AccountNotFound",
    "AlreadyTransferred",
    "BankError",
    "InsufficientFunds",
    "Transaction",
    "balance",
    "balances",
    "create_schema",
    "finish_even_if_cancelled",
    "is_database_fault",
    "open_account",
    "transfer",
    "transferred",
]

T = TypeVar("T")
Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
Connection: TypeAlias = "asyncpg.pool.PoolConnectionProxy[asyncpg.Record]"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS accounts (
    name text PRIMARY KEY,
    balance bigint NOT NULL CHECK (balance >= 0)
);
CREATE TABLE IF NOT EXISTS transfers (
    reference text PRIMARY KEY,
    source text NOT NULL,
    target text NOT NULL,
    amount bigint NOT NULL
)
"""
_SCHEMA_LOCK = 7_2616_3031  # an advisory lock key: servers starting together create the table once


class BankError(Exception):
    """An error the HTTP caller should read; `status` is the HTTP status it maps to."""

    status = 400


class AlreadyTransferred(BankError):
    status = 409

    def __init__(self, reference: str) -> None:
        super().__init__(f"a transfer with reference {reference!r} was already made; nothing more was moved")


class AccountNotFound(BankError):
    status = 404

    def __init__(self, name: str) -> None:
        super().__init__(f"no account named {name!r}; open it first (POST /accounts)")


class InsufficientFunds(BankError):
    status = 409

    def __init__(self, name: str, balance: int, amount: int) -> None:
        super().__init__(f"account {name!r} holds {balance}, less than the {amount} to move")


def is_database_fault(error: BaseException) -> bool:
    """Whether `error` says the database or the connection to it failed, not the statement.

    The server stopped, restarted or ended the backend (`pg_terminate_backend`), the socket broke,
    or a connection could not be made; a transaction open on that connection is gone, uncommitted.
    """
    faults = (
        asyncpg.PostgresConnectionError,  # class 08: connection exceptions
        asyncpg.OperatorInterventionError,  # class 57: admin shutdown, cannot connect now, ...
        asyncpg.InterfaceError,  # the client's side: the connection is closed
        asyncpg.InternalClientError,
        OSError,  # refused, reset, the socket file is gone
        asyncio.TimeoutError,
    )
    return isinstance(error, faults)


async def create_schema(pool: Pool) -> None:
    """Create the accounts table if it is missing (safe when several servers start at once)."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _SCHEMA_LOCK)
        await conn.execute(_SCHEMA)


async def open_account(pool: Pool, name: str, balance: int) -> None:
    await pool.execute("INSERT INTO accounts (name, balance) VALUES ($1, $2)", name, balance)


async def balances(pool: Pool) -> dict[str, int]:
    rows = await pool.fetch("SELECT name, balance FROM accounts ORDER BY name")
    return {row["name"]: row["balance"] for row in rows}


class Transaction:
    """One open database transaction on a connection borrowed from the pool until commit or rollback."""

    def __init__(self, pool: Pool, conn: Connection, transaction: Any) -> None:
        self.pool = pool
        self.conn = conn
        self._transaction = transaction
        self.handle = ""
        """What the caller calls it (a toolset's `txn_...` handle)."""
        self.references: list[str] = []
        """The references of the transfers made in it (to find out whether a commit went through)."""

    @classmethod
    async def begin(cls, pool: Pool) -> Transaction:
        conn = await pool.acquire()
        try:
            transaction = conn.transaction()
            await transaction.start()
        except BaseException:
            await pool.release(conn)
            raise
        return cls(pool, conn, transaction)

    async def commit(self) -> None:
        try:
            await self._transaction.commit()
        finally:
            await self.pool.release(self.conn)

    async def rollback(self) -> None:
        try:
            await self._transaction.rollback()
        finally:
            await self.pool.release(self.conn)  # a release also rolls back what a failed rollback left


async def finish_even_if_cancelled(work: Coroutine[Any, Any, T]) -> T:
    """Await `work` to its end even if the caller is cancelled meanwhile, then let the cancellation go on.

    A commit once sent cannot be called back: a caller cancelled during it (the client left) waits
    for its outcome, so what the caller records says what happened.
    """
    outcome = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(outcome)
    except asyncio.CancelledError:
        while not outcome.done():
            try:
                await asyncio.wait((outcome,))
            except asyncio.CancelledError:
                continue
        if not outcome.cancelled():
            outcome.exception()  # retrieved: the cancellation is what the caller ends with
        raise


async def balance(conn: Connection, name: str) -> int:
    value = await conn.fetchval("SELECT balance FROM accounts WHERE name = $1", name)
    if value is None:
        raise AccountNotFound(name)
    return int(value)


async def transfer(conn: Connection, source: str, target: str, amount: int, reference: str) -> None:
    """Move `amount` from `source` to `target` inside the connection's transaction, as transfer `reference`.

    The transfer is recorded in `transfers` under its reference, once: a second transfer with the
    same reference raises `AlreadyTransferred` and moves nothing. Both rows are locked in name
    order, so two opposite transfers wait for each other instead of deadlocking.
    """
    if amount <= 0:
        raise BankError(f"the amount must be positive, got {amount}")
    if source == target:
        raise BankError(f"source and target are the same account {source!r}")
    rows = await conn.fetch(
        "SELECT name, balance FROM accounts WHERE name = ANY($1::text[]) ORDER BY name FOR UPDATE", [source, target]
    )
    found = {row["name"]: int(row["balance"]) for row in rows}
    for name in (source, target):
        if name not in found:
            raise AccountNotFound(name)
    if found[source] < amount:
        raise InsufficientFunds(source, found[source], amount)
    inserted = await conn.fetchval(
        "INSERT INTO transfers (reference, source, target, amount) VALUES ($1, $2, $3, $4)"
        " ON CONFLICT (reference) DO NOTHING RETURNING true",
        reference,
        source,
        target,
        amount,
    )
    if not inserted:
        raise AlreadyTransferred(reference)
    await conn.execute("UPDATE accounts SET balance = balance - $2 WHERE name = $1", source, amount)
    await conn.execute("UPDATE accounts SET balance = balance + $2 WHERE name = $1", target, amount)


async def transferred(pool: Pool, reference: str) -> bool:
    """Whether the transfer `reference` is committed (a reference is made at most once)."""
    return bool(await pool.fetchval("SELECT EXISTS (SELECT 1 FROM transfers WHERE reference = $1)", reference))
