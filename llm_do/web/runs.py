"""A conversation's run in flight, as the chat router reads it, and where it is found.

The chat router starts each conversation's run in its own process (`Runtime.stream(..., resumable=True)`) and tells
a `ChatRuns` of it (`started`, which gives the run to stream, then `ended`). To stream a conversation's run, answer a
page's questions or read the conversation back, it asks the `ChatRuns` for the run in flight (`find`), a
`RunInFlight`: its message id, the person's message it answers, its open questions, every question it asked, and its
stream as the AI SDK's protocol chunks, numbered, from the first or from after the one a reader had last.

`LocalRuns` keeps the runs of this process: each run's stream is encoded once, as it happens, into a `RunLog` that
every reader reads (`chunklog`); another process answers that none is in flight. `llm_do.web.postgres_runs`'s
`PostgresRuns` writes the same logs to PostgreSQL too, and finds a conversation's run in whichever process runs it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Protocol

from .. import ApprovalRequest, LiveRun, Runtime
from .chunklog import RunLog, Sent, record

__all__ = ["ChatRuns", "LocalRuns", "LoggedRun", "RunInFlight"]

logger = logging.getLogger("llm_do")


class RunInFlight(Protocol):
    """A conversation's run in flight, as a page reads it."""

    @property
    def message_id(self) -> str:
        """The id of the answer the run gives (the stream's `start` chunk carries it)."""
        ...

    @property
    def prompt(self) -> str | None:
        """The person's message the run answers (None: not known where it was found)."""
        ...

    @property
    def pending(self) -> tuple[ApprovalRequest, ...]:
        """Its questions waiting for an answer."""
        ...

    @property
    def asked(self) -> tuple[ApprovalRequest, ...]:
        """Every question it asked so far, answered or not."""
        ...

    def chunks(self, seen: int = -1) -> AsyncIterator[Sent]:
        """Its stream as the protocol's chunks, after chunk number `seen` (-1: from the first), then as they come,
        to the last (`Sent.done`)."""
        ...


class ChatRuns(Protocol):
    """Told of the runs this process starts for conversations; finds a conversation's run in flight."""

    async def started(self, conversation_id: str, run: LiveRun, prompt: str) -> RunInFlight:
        """The run of `conversation_id` answering `prompt` started in this process (resumable): the run in flight
        its first reader streams."""
        ...

    async def ended(self, conversation_id: str, run: LiveRun) -> None:
        """That run ended, and its teardown is done (called before its stream's last event)."""
        ...

    async def find(self, runtime: Runtime, conversation_id: str) -> RunInFlight | None:
        """The run in flight of `conversation_id` (`runtime` is this process's), or None."""
        ...


class LoggedRun:
    """A run of this process whose stream is written once into a `RunLog`, which every reader reads."""

    __slots__ = ("log", "prompt", "run")

    def __init__(self, run: LiveRun, prompt: str | None, log: RunLog) -> None:
        self.run = run
        self.prompt = prompt
        self.log = log

    @property
    def message_id(self) -> str:
        return self.run.message_id

    @property
    def pending(self) -> tuple[ApprovalRequest, ...]:
        return self.run.pending

    @property
    def asked(self) -> tuple[ApprovalRequest, ...]:
        return self.run.asked

    def chunks(self, seen: int = -1) -> AsyncIterator[Sent]:
        return self.log.read(seen)

    def __repr__(self) -> str:
        return f"LoggedRun({self.run!r}, {self.log!r})"


class LocalRuns:
    """The runs in flight of this process, each one's stream encoded once into a `RunLog` (`keep`: the chunks it
    holds before it merges the deltas of ended parts, as `LLM_DO_RESUME_BUFFER` does for a live run's events)."""

    def __init__(self, *, keep: int = 10_000) -> None:
        self.keep = keep
        self._runs: dict[str, LoggedRun] = {}
        self._recording: set[asyncio.Task[None]] = set()

    async def started(self, conversation_id: str, run: LiveRun, prompt: str) -> RunInFlight:
        logged = self._runs[conversation_id] = LoggedRun(run, prompt, self._log_of(run))
        return logged

    def _log_of(self, run: LiveRun) -> RunLog:
        """A log of `run`'s stream, written as the run goes by a task of its own (awaited by `aclose`)."""
        log = RunLog(self.keep)
        task = asyncio.get_running_loop().create_task(record(run, log))
        self._recording.add(task)
        task.add_done_callback(self._recording.discard)
        return log

    async def ended(self, conversation_id: str, run: LiveRun) -> None:
        kept = self._runs.get(conversation_id)
        if kept is not None and kept.run is run:
            del self._runs[conversation_id]

    async def find(self, runtime: Runtime, conversation_id: str) -> RunInFlight | None:
        return self._runs.get(conversation_id)

    async def aclose(self) -> None:
        """Wait until the streams of the runs started here are written to their end."""
        while self._recording:
            await asyncio.wait(set(self._recording))

    def __repr__(self) -> str:
        return f"LocalRuns(in_flight={len(self._runs)})"
