"""A conversation's run in flight, as the chat router reads it, and where it is found.

The chat router starts each conversation's run in its own process (`Runtime.stream(..., resumable=True)`) and tells
a `ChatRuns` of it (`started`, then `ended`). To stream a conversation's run, answer a page's questions or read the
conversation back, it asks the `ChatRuns` for the run in flight (`find`), a `RunInFlight`: its message id, the
person's message it answers, its open questions, every question it asked, and its events from the first.

`LocalRuns` finds the runs of this process (`Runtime.live_run`): another process answers that none is in flight.
A `ChatRuns` over a store every web process shares would find them wherever they run (and write, in `started`,
what the others read).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from ..approvals import ApprovalRequest
from ..events import StreamEvent
from ..run import LiveRun, Runtime

__all__ = ["ChatRuns", "LiveRunInFlight", "LocalRuns", "RunInFlight"]


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

    def events(self) -> AsyncIterator[StreamEvent]:
        """Its events from the first, then as they come, to its last (`RunFinished` or `RunFailed`)."""
        ...


class ChatRuns(Protocol):
    """Told of the runs this process starts for conversations; finds a conversation's run in flight."""

    async def started(self, conversation_id: str, run: LiveRun, prompt: str) -> None:
        """The run of `conversation_id` answering `prompt` started in this process (resumable)."""
        ...

    async def ended(self, conversation_id: str, run: LiveRun) -> None:
        """That run ended, and its teardown is done (called before its stream's last event)."""
        ...

    async def find(self, runtime: Runtime, conversation_id: str) -> RunInFlight | None:
        """The run in flight of `conversation_id` (`runtime` is this process's), or None."""
        ...


class LiveRunInFlight:
    """A resumable `LiveRun` of this process as a `RunInFlight`."""

    __slots__ = ("prompt", "run")

    def __init__(self, run: LiveRun, prompt: str | None) -> None:
        self.run = run
        self.prompt = prompt

    @property
    def message_id(self) -> str:
        return self.run.message_id

    @property
    def pending(self) -> tuple[ApprovalRequest, ...]:
        return self.run.pending

    @property
    def asked(self) -> tuple[ApprovalRequest, ...]:
        return self.run.asked

    def events(self) -> AsyncIterator[StreamEvent]:
        return aiter(self.run)

    def __repr__(self) -> str:
        return f"LiveRunInFlight({self.run!r})"


class LocalRuns:
    """The runs in flight of this process: `Runtime.live_run`, with the message each answers."""

    def __init__(self) -> None:
        self._prompts: dict[str, tuple[LiveRun, str]] = {}

    async def started(self, conversation_id: str, run: LiveRun, prompt: str) -> None:
        self._prompts[conversation_id] = (run, prompt)

    async def ended(self, conversation_id: str, run: LiveRun) -> None:
        kept = self._prompts.get(conversation_id)
        if kept is not None and kept[0] is run:
            del self._prompts[conversation_id]

    async def find(self, runtime: Runtime, conversation_id: str) -> RunInFlight | None:
        run = runtime.live_run(conversation_id)
        if run is None:
            return None
        kept = self._prompts.get(conversation_id)
        return LiveRunInFlight(run, kept[1] if kept is not None and kept[0] is run else None)

    def __repr__(self) -> str:
        return f"LocalRuns(started={len(self._prompts)})"
