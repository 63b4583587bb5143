"""One run at a time per conversation: a conversation's turn, claimed before its run starts and let go when it ends.

llm-do's session refuses a second run while one is in progress (`SessionBusy`), in its own process, and only once
the run has started, inside a response already sent. A claim refuses it before the response starts, with a status
the client can read. `LocalTurns` holds the claims of one process. `PostgresTurns` makes them hold across the web
processes of a service: behind a load balancer the second message may reach another process, whose session is idle.

`PostgresTurns` claims a conversation with `pg_try_advisory_lock` (a key hashed from the conversation's id) and lets
go with `pg_advisory_unlock`. The locks are taken on one connection the process keeps for them, so a thousand
waiting conversations cost one connection, and a process that dies releases its locks with it. If that connection
drops while runs are in progress, their locks are gone until the process's next claim connects again and takes
them back: meanwhile another process may take a message of those conversations. Needs asyncpg (the `postgres`
extra), imported when it first connects.
"""

from __future__ import annotations

import asyncio
import logging
from types import TracebackType
from typing import Any, Protocol

from ..errors import LlmDoError

__all__ = ["ConversationBusy", "LocalTurns", "PostgresTurns", "Turns", "TurnsUnavailable"]

logger = logging.getLogger("llm_do")


class ConversationBusy(LlmDoError):
    """A message came while the conversation is still answering the one before (in this process or another)."""

    def __init__(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        super().__init__(
            f"conversation {conversation_id!r} is still answering the previous message; "
            "wait for its answer (or stop it), then send this message again"
        )


class TurnsUnavailable(LlmDoError):
    """Whether another run of the conversation is in progress cannot be known: the database is unreachable."""

    def __init__(self, conversation_id: str, error: BaseException) -> None:
        self.conversation_id = conversation_id
        super().__init__(
            f"conversation {conversation_id!r}: cannot check that no other message of it is being answered, "
            f"the database is unreachable ({type(error).__name__}); send the message again later"
        )


class Turns(Protocol):
    """Claims a conversation for one run (`ConversationBusy` while another run of it is in progress), and lets go."""

    async def claim(self, conversation_id: str) -> None: ...
    async def release(self, conversation_id: str) -> None: ...


class LocalTurns:
    """The turns of one web process: a conversation is claimed until its run ends."""

    def __init__(self) -> None:
        self._held: set[str] = set()

    def holds(self, conversation_id: str) -> bool:
        return conversation_id in self._held

    async def claim(self, conversation_id: str) -> None:
        if conversation_id in self._held:
            raise ConversationBusy(conversation_id)
        self._held.add(conversation_id)

    async def release(self, conversation_id: str) -> None:
        self._held.discard(conversation_id)


_KEY = "SELECT hashtextextended($2 || ' ' || $1, 0)"


class PostgresTurns:
    """The turns of every web process of a service on one PostgreSQL database (`async with PostgresTurns(dsn)`).

    `namespace` keeps the locks of one service apart from another's on the same database; `application_name` names
    the connection that holds them (`pg_stat_activity`).
    """

    def __init__(
        self, dsn: str, *, namespace: str = "llm-do chat", application_name: str = "llm-do turns", timeout: float = 10.0
    ) -> None:
        self.dsn = dsn
        self.namespace = namespace
        self.application_name = application_name
        self.timeout = timeout
        """Seconds a connection may take to open."""
        self._conn: Any = None  # asyncpg.Connection, opened when first needed and again after it dropped
        self._using = asyncio.Lock()  # one query at a time on the connection
        self._held: set[str] = set()
        self._releasing: set[asyncio.Future[None]] = set()  # releases of cancelled claims, kept till done

    def holds(self, conversation_id: str) -> bool:
        return conversation_id in self._held

    async def claim(self, conversation_id: str) -> None:
        """Claim the conversation for one run; `ConversationBusy` if a run of it is in progress in any process,
        `TurnsUnavailable` if the database cannot say."""
        import asyncpg

        if conversation_id in self._held:  # checked and taken with no await between: this process's own runs
            raise ConversationBusy(conversation_id)
        self._held.add(conversation_id)
        taking = asyncio.ensure_future(self._lock(conversation_id))
        try:
            taken = await asyncio.shield(taking)  # a cancelled request must not leave a lock nobody releases
        except asyncio.CancelledError:
            taking.add_done_callback(lambda _: self._let_go(conversation_id, taking))
            raise
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
            self._held.discard(conversation_id)
            raise TurnsUnavailable(conversation_id, error) from error
        if not taken:
            self._held.discard(conversation_id)
            raise ConversationBusy(conversation_id)

    async def release(self, conversation_id: str) -> None:
        """The run of the conversation ended: another message may start one (idempotent)."""
        import asyncpg

        if conversation_id not in self._held:
            return
        self._held.discard(conversation_id)
        async with self._using:
            conn = self._conn
            if conn is None or conn.is_closed():
                return  # the server released the lock with the connection
            try:
                await conn.fetchval(f"SELECT pg_advisory_unlock(({_KEY}))", conversation_id, self.namespace)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                logger.warning("conversation %r: its lock was not released; its connection is closed", conversation_id)
                self._drop()

    def _let_go(self, conversation_id: str, taking: asyncio.Future[bool]) -> None:
        if not taking.cancelled() and taking.exception() is None and taking.result():
            releasing = asyncio.ensure_future(self.release(conversation_id))
            self._releasing.add(releasing)
            releasing.add_done_callback(self._releasing.discard)
        else:
            self._held.discard(conversation_id)

    async def _lock(self, conversation_id: str) -> bool:
        import asyncpg

        async with self._using:
            conn = await self._connected(conversation_id)
            try:
                locked = await conn.fetchval(f"SELECT pg_try_advisory_lock(({_KEY}))", conversation_id, self.namespace)
            except (OSError, asyncpg.InterfaceError):
                self._drop()  # the next claim connects again
                raise
            return bool(locked)

    async def _connected(self, claiming: str) -> Any:
        if self._conn is not None and not self._conn.is_closed():
            return self._conn
        import asyncpg

        self._conn = await asyncpg.connect(
            self.dsn, timeout=self.timeout, server_settings={"application_name": self.application_name}
        )
        # The runs in progress lost their locks with the old connection: take them again.
        for held in self._held - {claiming}:
            if not await self._conn.fetchval(f"SELECT pg_try_advisory_lock(({_KEY}))", held, self.namespace):
                logger.warning("conversation %r: another process started a run of it while our lock was lost", held)
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.terminate()

    async def aclose(self) -> None:
        async with self._using:
            conn, self._conn = self._conn, None
            if conn is not None:
                await conn.close()

    async def __aenter__(self) -> PostgresTurns:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"PostgresTurns(namespace={self.namespace!r}, held={len(self._held)})"
