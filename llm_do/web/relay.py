"""Decisions on live runs, relayed between processes through PostgreSQL `LISTEN`/`NOTIFY`.

Behind a load balancer, the click that answers an approval may reach another web process than the
one whose live run is waiting for it. Each process opens one `DecisionRelay`: it holds the live runs
this process streams (by session id), answers a decision for one of them at once, and sends any
other decision to every process over a PostgreSQL channel. The process that holds the session's run
applies it and answers back on the sender's own channel.

Nothing is lost silently: a decision that no process applies (nobody holds that session's run, or
the relay's connection is down) raises `DecisionUndelivered` in the sender after `reply_timeout`;
a decision the holder refuses (the approval id is not pending in that run) raises `DecisionRefused`
with the holder's reason. A dropped listening connection is reopened (`reconnect_delay` between
tries); decisions sent meanwhile are not delivered and say so.

A service of one process needs no PostgreSQL: `LocalRelay` holds its runs the same way, and a decision for a run
it does not hold raises `DecisionUndelivered` at once. Both are a `Relay`.

Needs asyncpg (the `postgres` extra), imported when a relay opens.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import uuid
from collections.abc import Awaitable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from ..approvals import CHOICES
from ..errors import DecisionRefused, LlmDoError, shortened

if TYPE_CHECKING:
    import asyncpg

__all__ = [
    "Decidable",
    "DecisionRefused",
    "DecisionRelay",
    "DecisionTooLarge",
    "DecisionUndelivered",
    "LocalRelay",
    "Relay",
]

logger = logging.getLogger("llm_do")

"""What a decision may say: an `Approval`'s choices."""

_CHANNEL_LIMIT = 63 - 17
"""Bytes a channel's name may have: a relay's reply channel adds 17 characters, and PostgreSQL takes 63."""
_NOTE_LIMIT = 2000  # bytes, as JSON: a NOTIFY payload is at most 8000 bytes
_PAYLOAD_LIMIT = 7999
"""Bytes a NOTIFY payload may have (PostgreSQL: shorter than 8000 bytes, in the server's encoding)."""


class Decidable(Protocol):
    """What a relay holds: a live run that takes decisions (`LiveRun` is one)."""

    def decide(self, approval_id: str, choice: Any, note: str | None = None) -> Awaitable[None] | None: ...


class Relay(Protocol):
    """Where decisions on live runs go: the runs a process holds (`hold`), and a decision for any of them (`decide`)."""

    def hold(self, session_id: str, run: Decidable) -> AbstractContextManager[None]: ...
    async def decide(self, session_id: str, approval_id: str, choice: str, note: str | None = None) -> None: ...


class DecisionTooLarge(LlmDoError):
    """A decision too large to send as a PostgreSQL NOTIFY payload (its note, or its ids): not sent, not applied."""


class DecisionUndelivered(LlmDoError):
    """No process applied the decision: nobody holds that session's live run, or the relay is disconnected."""


async def apply(run: Decidable, approval_id: str, choice: str, note: str | None) -> None:
    """Give `run` the decision (its `decide` may be sync or async)."""
    outcome = run.decide(approval_id, choice, note)
    if inspect.isawaitable(outcome):
        await outcome


class _Holding:
    """The live runs a process holds, by session id."""

    _held: dict[str, Decidable]

    @contextlib.contextmanager
    def hold(self, session_id: str, run: Decidable) -> Iterator[None]:
        """Decisions for `session_id` reach `run` while the block runs."""
        if session_id in self._held:
            raise LlmDoError(
                f"{type(self).__name__}: session {_shown(session_id)} already has a live run held in this process"
            )
        self._held[session_id] = run
        try:
            yield
        finally:
            if self._held.get(session_id) is run:
                del self._held[session_id]

    def holds(self, session_id: str) -> bool:
        return session_id in self._held


def _checked(approval_id: str, choice: str) -> None:
    if choice not in CHOICES:
        raise LlmDoError(f"decision {choice!r} for {_shown(approval_id)}: choose one of {', '.join(CHOICES)}")


class LocalRelay(_Holding):
    """The relay of a service that runs in one process: a decision reaches a run this process holds, and no other."""

    def __init__(self) -> None:
        self._held = {}

    async def decide(self, session_id: str, approval_id: str, choice: str, note: str | None = None) -> None:
        """Answer `approval_id` of the live run of `session_id` held here (`DecisionUndelivered` if none is); an
        approval that is not pending there is refused by the run (`ApprovalNotPending`)."""
        _checked(approval_id, choice)
        held = self._held.get(session_id)
        if held is None:
            raise DecisionUndelivered(
                f"decision on {_shown(approval_id)} not applied: no live run of session {_shown(session_id)} "
                "is in progress"
            )
        await apply(held, approval_id, choice, note)

    def __repr__(self) -> str:
        return f"LocalRelay(held={len(self._held)})"


class DecisionRelay(_Holding):
    """One process's end of the decision relay; `async with DecisionRelay(dsn) as relay:` opens it.

    `channel` (a plain identifier of at most 46 bytes) is shared by every process of the service (one
    per service, if several share a database). Decisions for a session this process holds never touch PostgreSQL.
    """

    def __init__(
        self,
        dsn: str,
        *,
        channel: str = "llm_do_decisions",
        reply_timeout: float = 5.0,
        reconnect_delay: float = 0.5,
    ) -> None:
        if not channel.isidentifier():
            raise LlmDoError(f"DecisionRelay: channel {channel!r} must be a plain identifier (letters, digits, _)")
        if _size(channel) > _CHANNEL_LIMIT:  # longer, the answers could not be sent: decisions applied, said not
            raise LlmDoError(
                f"DecisionRelay: channel {channel!r} is {_size(channel)} bytes long; use at most {_CHANNEL_LIMIT}: "
                "PostgreSQL's channel names take at most 63 bytes, and each relay is answered on the channel's name "
                "followed by 17 characters of its own"
            )
        self.dsn = dsn
        self.channel = channel
        self.reply_timeout = reply_timeout
        self.reconnect_delay = reconnect_delay
        self._reply_channel = f"{channel}_{uuid.uuid4().hex[:16]}"
        self._held: dict[str, Decidable] = {}
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._conn: asyncpg.Connection[Any] | None = None
        self._send_lock = asyncio.Lock()
        self._closing = False
        self._reconnecting: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.reconnects = 0
        """How many times the listening connection was reopened after it dropped."""

    # -- lifetime -----------------------------------------------------------------------------------

    async def __aenter__(self) -> DecisionRelay:
        await self._connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._closing = True
        if self._reconnecting is not None:
            self._reconnecting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reconnecting
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
        self._fail_waiting("the relay closed")
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            await conn.close()

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def _connect(self) -> None:
        import asyncpg

        conn: asyncpg.Connection[Any] = await asyncpg.connect(self.dsn)
        try:
            await conn.add_listener(self.channel, self._on_decision)
            await conn.add_listener(self._reply_channel, self._on_reply)
        except BaseException:
            await conn.close()
            raise
        conn.add_termination_listener(self._on_lost)
        self._conn = conn

    def _on_lost(self, conn: object) -> None:
        if self._closing or conn is not self._conn:
            return
        self._conn = None
        logger.warning("decision relay: the connection to PostgreSQL dropped; reconnecting")
        self._fail_waiting(
            "the relay's connection to PostgreSQL dropped before an answer came; it may or may not apply"
        )
        if self._reconnecting is None or self._reconnecting.done():
            self._reconnecting = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        while not self._closing:
            await asyncio.sleep(self.reconnect_delay)
            try:
                await self._connect()
            except Exception as error:
                logger.warning("decision relay: reconnecting failed (%s); trying again", error)
                continue
            self.reconnects += 1
            logger.info("decision relay: reconnected")
            return

    # -- deciding -----------------------------------------------------------------------------------

    async def decide(self, session_id: str, approval_id: str, choice: str, note: str | None = None) -> None:
        """Answer `approval_id` of the live run of `session_id`, wherever it runs.

        Raises `DecisionRefused` if that run refuses it (not pending there), `DecisionUndelivered`
        if no process applied it within `reply_timeout`. The caller checks who may decide.
        """
        _checked(approval_id, choice)
        if note is not None and _size(_encoded(note)) > _NOTE_LIMIT:
            raise DecisionTooLarge(
                f"the note of the decision on {_shown(approval_id)} is longer than {_NOTE_LIMIT} bytes "
                "(as UTF-8 JSON); shorten it"
            )
        local = self._held.get(session_id)
        if local is not None:
            await apply(local, approval_id, choice, note)
            return
        if not self.connected:
            raise DecisionUndelivered(
                f"decision on {_shown(approval_id)} (session {_shown(session_id)}) not sent: the relay's connection to "
                "PostgreSQL is down (reconnecting); try again"
            )
        request = uuid.uuid4().hex
        message = {
            "id": request,
            "reply_to": self._reply_channel,
            "session": session_id,
            "approval_id": approval_id,
            "choice": choice,
            "note": note,
        }
        payload = _encoded(message)
        size = _size(payload)
        if size > _PAYLOAD_LIMIT:
            sizes = ", ".join(f"{name} {_size(_encoded(message[name]))}" for name in ("session", "approval_id", "note"))
            raise DecisionTooLarge(
                f"decision on {_shown(approval_id)} (session {_shown(session_id)}) not sent: as a PostgreSQL NOTIFY "
                f"payload it takes {size} bytes, and NOTIFY takes at most {_PAYLOAD_LIMIT} (bytes as JSON: "
                f"{sizes}); shorten the note, or use shorter session ids"
            )
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[request] = answer
        try:
            await self._notify(self.channel, payload)
            try:
                reply = await asyncio.wait_for(answer, self.reply_timeout)
            except TimeoutError:
                raise DecisionUndelivered(
                    f"decision on {_shown(approval_id)} not applied: no process holds a live run of session "
                    f"{_shown(session_id)} (nobody answered within {self.reply_timeout:g}s)"
                ) from None
        finally:
            self._waiting.pop(request, None)
        if not reply.get("ok"):
            raise DecisionRefused(str(reply.get("error") or f"decision on {_shown(approval_id)} refused"))

    async def _notify(self, channel: str, payload: str) -> None:
        async with self._send_lock:
            conn = self._conn
            if conn is None or conn.is_closed():
                raise DecisionUndelivered(f"cannot send on {channel!r}: the relay's connection to PostgreSQL is down")
            await conn.execute("SELECT pg_notify($1, $2)", channel, payload)

    def _fail_waiting(self, why: str) -> None:
        for answer in self._waiting.values():
            if not answer.done():
                answer.set_exception(DecisionUndelivered(why))

    # -- what the channel brings ---------------------------------------------------------------------

    def _on_decision(self, conn: object, pid: int, channel: str, payload: object) -> None:
        try:
            message = json.loads(str(payload))
            run = self._held.get(message["session"])
        except (ValueError, KeyError, TypeError):
            logger.warning("decision relay: ignored a malformed message on %r", channel)
            return
        if run is None:
            return  # another process holds it, or nobody does (the sender times out)
        task = asyncio.get_running_loop().create_task(self._answer(run, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, run: Decidable, message: dict[str, Any]) -> None:
        reply: dict[str, Any] = {"id": message.get("id"), "ok": True}
        try:
            await apply(run, str(message["approval_id"]), str(message["choice"]), message.get("note"))
        except LlmDoError as refused:
            reply = {"id": message.get("id"), "ok": False, "error": str(refused)}
        except Exception as error:
            logger.exception("decision relay: applying decision %s failed", message.get("id"))
            reply = {"id": message.get("id"), "ok": False, "error": f"applying the decision failed: {error!r}"}
        try:
            await self._notify(str(message["reply_to"]), _fitted(reply))
        except Exception as error:
            logger.warning("decision relay: could not answer decision %s: %s", message.get("id"), error)

    def _on_reply(self, conn: object, pid: int, channel: str, payload: object) -> None:
        try:
            reply = json.loads(str(payload))
            answer = self._waiting.get(reply["id"])
        except (ValueError, KeyError, TypeError):
            logger.warning("decision relay: ignored a malformed reply on %r", channel)
            return
        if answer is not None and not answer.done():
            answer.set_result(reply)


def _encoded(value: object) -> str:
    """`value` as JSON, as sent: UTF-8 text (ASCII escapes only when it holds what UTF-8 cannot encode)."""
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate: escaped, it is sendable
        return json.dumps(value)
    return text


def _size(text: str) -> int:
    return len(text.encode())


def _fitted(reply: dict[str, Any]) -> str:
    """A reply as a NOTIFY payload, its error cut short to fit (it may quote a long approval id)."""
    payload = _encoded(reply)
    error = str(reply.get("error") or "")
    while _size(payload) > _PAYLOAD_LIMIT and error:
        error = error[: len(error) // 2]
        payload = _encoded({**reply, "error": error + "..."})
    return payload


def _shown(text: str) -> str:
    """An id as a message shows it: quoted, at most 60 characters."""
    return shortened(text, 60, quoted=True)
