"""One run at a time per conversation, across web processes: a PostgreSQL advisory lock per conversation.

llm-do's session refuses a second run while one is in progress (`SessionBusy`), in its own process.
Behind a load balancer the second message may reach another process, whose session is idle: `Turns`
makes the refusal hold there too. A run claims its conversation with `pg_try_advisory_lock` before
its response starts, and lets go when it ends. The locks are taken on one connection each process
keeps for them, so a thousand waiting conversations cost one connection, and a process that dies
releases its locks with it. If that connection drops while runs are in progress, their locks are
gone until the process's next claim connects again and takes them back: meanwhile another process
may take a message of those conversations.
"""

from __future__ import annotations

import asyncio
import logging
from types import TracebackType
from typing import Any

import asyncpg

from .ledger import BankError
from .wiring import APPLICATION

__all__ = ["ConversationBusy", "Turns", "TurnsUnavailable"]

logger = logging.getLogger("bank")

_KEY = "SELECT hashtextextended('llm-do-bank chat ' || $1, 0)"


class ConversationBusy(BankError):
    status = 409

    def __init__(self, conversation: str) -> None:
        super().__init__(
            f"conversation {conversation!r} is still answering the previous message; "
            "wait for its answer (or stop it), then send this message again"
        )


class TurnsUnavailable(BankError):
    status = 503

    def __init__(self, conversation: str, error: BaseException) -> None:
        super().__init__(
            f"conversation {conversation!r}: cannot check that no other message of it is being answered, "
            f"the database is unreachable ({type(error).__name__}); send the message again later"
        )


class Turns:
    """Who answers each conversation now: this process's claims, and their advisory locks in PostgreSQL."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._conn: Any = None  # asyncpg.Connection, opened when first needed and again after it dropped
        self._using = asyncio.Lock()  # one query at a time on the connection
        self._held: set[str] = set()
        self._releasing: set[asyncio.Future[None]] = set()  # releases of cancelled claims, kept till done

    def holds(self, conversation: str) -> bool:
        return conversation in self._held

    async def claim(self, conversation: str) -> None:
        """Claim `conversation` for one run; `ConversationBusy` if a run of it is in progress in any process."""
        if conversation in self._held:  # checked and taken with no await between: this process's own runs
            raise ConversationBusy(conversation)
        self._held.add(conversation)
        taking = asyncio.ensure_future(self._lock(conversation))
        try:
            taken = await asyncio.shield(taking)  # a cancelled request must not leave a lock nobody releases
        except asyncio.CancelledError:
            taking.add_done_callback(lambda _: self._let_go(conversation, taking))
            raise
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
            self._held.discard(conversation)
            raise TurnsUnavailable(conversation, error) from error
        if not taken:
            self._held.discard(conversation)
            raise ConversationBusy(conversation)

    async def release(self, conversation: str) -> None:
        """The run of `conversation` ended: another message may start one (idempotent)."""
        if conversation not in self._held:
            return
        self._held.discard(conversation)
        async with self._using:
            conn = self._conn
            if conn is None or conn.is_closed():
                return  # the server released the lock with the connection
            try:
                await conn.fetchval(f"SELECT pg_advisory_unlock(({_KEY}))", conversation)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                logger.warning("conversation %r: its lock was not released; its connection is closed", conversation)
                await self._drop()

    def _let_go(self, conversation: str, taking: asyncio.Future[bool]) -> None:
        if not taking.cancelled() and taking.exception() is None and taking.result():
            releasing = asyncio.ensure_future(self.release(conversation))
            self._releasing.add(releasing)
            releasing.add_done_callback(self._releasing.discard)
        else:
            self._held.discard(conversation)

    async def _lock(self, conversation: str) -> bool:
        async with self._using:
            conn = await self._connected(conversation)
            try:
                return bool(await conn.fetchval(f"SELECT pg_try_advisory_lock(({_KEY}))", conversation))
            except (OSError, asyncpg.InterfaceError):
                await self._drop()  # the next claim connects again
                raise

    async def _connected(self, claiming: str) -> Any:
        if self._conn is not None and not self._conn.is_closed():
            return self._conn
        self._conn = await asyncpg.connect(self.dsn, server_settings={"application_name": f"{APPLICATION} turns"})
        # The runs in progress lost their locks with the old connection: take them again.
        for held in self._held - {claiming}:
            if not await self._conn.fetchval(f"SELECT pg_try_advisory_lock(({_KEY}))", held):
                logger.warning("conversation %r: another process started a run of it while our lock was lost", held)
        return self._conn

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.terminate()

    async def aclose(self) -> None:
        async with self._using:
            conn, self._conn = self._conn, None
            if conn is not None:
                await conn.close()

    async def __aenter__(self) -> Turns:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
