"""Runs that outlive their connection: each conversation's run goes on when its page leaves, and the AI SDK's
stream of it stops at a question the run waits on, the SDK's way.

`Keepers` starts a conversation's run (`Runtime.stream(..., resumable=True)`) in a task of its own, which holds
the run for the relay and the conversation's turn until the run ends, whoever reads it meanwhile: the page that
sent the message, the same page after a reload (`GET /chat/sessions/{id}/stream`), or nobody.

`sdk_lines` writes a run as the AI SDK reads it (`llm_do.web.vercel_chunks`, pydantic-ai's encoder): from the
start, and, when `pause` is set, ending with `finish` after a question that is still open, so that the SDK's
chat, ready again, sends its answer back in its next request (`addToolApprovalResponse`); `after` skips what an
earlier stream of the run already sent, up to the questions that request answers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass, field
from types import TracebackType

from pydantic_ai.ui.vercel_ai.response_types import BaseChunk, DataChunk, DoneChunk, FinishChunk, StartChunk

from llm_do import ApprovalRequested, LiveRun, RunResult, Runtime, Session
from llm_do.web import SdkVersion, vercel_chunks
from llm_do.web.relay import DecisionRelay

from .turns import Turns

__all__ = ["Keepers", "sdk_lines"]

logger = logging.getLogger("bank")


@dataclass
class _Kept:
    run: LiveRun
    prompt: str
    """The person's message the run answers (saved in the session's history when the run ends)."""
    released: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the run ended and its conversation was let go: the next message may come."""
    asked: set[str] = field(default_factory=set)
    """The approval ids of the questions the run asked so far."""


class Keepers:
    """This process's conversations whose run is in flight, each held by a task until the run ends."""

    def __init__(self, runtime: Runtime, relay: DecisionRelay, turns: Turns) -> None:
        self.runtime = runtime
        self.relay = relay
        self.turns = turns
        self._kept: dict[str, _Kept] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, session: Session, text: str) -> LiveRun:
        """Start the banker's run of `text` in `session`, whose turn the caller claimed (released when it ends)."""
        started: asyncio.Future[LiveRun] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(self._keep(session, text, started))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return await asyncio.shield(started)

    async def _keep(self, session: Session, text: str, started: asyncio.Future[LiveRun]) -> None:
        session_id = session.id
        kept: _Kept | None = None
        try:
            async with self.runtime.stream("banker", text, session=session, resumable=True) as run:
                kept = self._kept[session_id] = _Kept(run, text)
                with self.relay.hold(session_id, run):
                    started.set_result(run)
                    async for event in run:  # to its end; the run never waits for this reader
                        if isinstance(event, ApprovalRequested):
                            kept.asked.add(event.request.approval_id)
        except BaseException as error:
            if not started.done():
                started.set_exception(error)
            if not isinstance(error, Exception):
                raise
        finally:
            try:
                await self.turns.release(session_id)
            finally:
                if kept is not None:
                    if self._kept.get(session_id) is kept:
                        del self._kept[session_id]
                    kept.released.set()

    def released(self, run: LiveRun) -> asyncio.Event | None:
        """The event set once `run` ended and its conversation was let go (None: not a run held here)."""
        kept = self._of(run)
        return None if kept is None else kept.released

    def prompt(self, run: LiveRun) -> str | None:
        """The person's message `run` answers (None: not a run held here)."""
        kept = self._of(run)
        return None if kept is None else kept.prompt

    def asked(self, run: LiveRun) -> set[str]:
        """The approval ids of the questions `run` asked so far, answered or not."""
        kept = self._of(run)
        return set() if kept is None else set(kept.asked)

    def _of(self, run: LiveRun) -> _Kept | None:
        return next((kept for kept in self._kept.values() if kept.run is run), None)

    async def aclose(self) -> None:
        """Wait for the runs in flight (a stopping process denies their questions first)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def __aenter__(self) -> Keepers:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def _asked(chunk: BaseChunk) -> str | None:
    """The approval id of a question's description (`data-llm-do-approval`, still pending when it was sent)."""
    if not isinstance(chunk, DataChunk) or chunk.type != "data-llm-do-approval" or not isinstance(chunk.data, dict):
        return None
    approval_id = chunk.data.get("approval_id")
    return approval_id if chunk.data.get("state") == "pending" and isinstance(approval_id, str) else None


async def sdk_lines(
    run: LiveRun,
    keepers: Keepers,
    *,
    pause: bool = True,
    after: Collection[str] = (),
    sdk_version: SdkVersion = 6,
) -> AsyncIterator[str]:
    """The run as server-sent events of the AI SDK's protocol, from its start.

    `pause`: end the stream (`finish`) after a question the run is still waiting on. `after`: approval ids the
    request answers; what precedes their questions (and the questions) was sent by an earlier stream and is
    skipped, but for the `start` chunk. `sdk_version=7`: AI SDK 7's `tool-approval-response` tells of every answer.
    """
    released = keepers.released(run)

    async def let_go(result: RunResult) -> None:
        if released is not None:  # the conversation is free before the stream's last chunk
            await released.wait()

    waiting_for = set(after)
    async for chunk in vercel_chunks(run, on_result=let_go, sdk_version=sdk_version):
        asked = _asked(chunk)
        if waiting_for and not isinstance(chunk, StartChunk):
            if asked is not None:
                waiting_for.discard(asked)
            continue
        yield f"data: {chunk.encode(sdk_version)}\n\n"
        if pause and asked is not None and any(request.approval_id == asked for request in run.pending):
            yield f"data: {FinishChunk().encode(sdk_version)}\n\n"  # the answer comes in the next request
            yield f"data: {DoneChunk().encode(sdk_version)}\n\n"
            return
