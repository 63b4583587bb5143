"""What the chat router needs of a job queue to run its conversations' runs as jobs (`chat_router(parking=...)`):
`llm_do.jobs.LiveParking` is one, which this module does not import (the web room does not import the jobs room).

A run streamed through it is a job from its first request: it parks when a question waits too long, and a worker
goes on with it if its web process dies (docs/jobs.md, "Live runs that survive their process").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from .. import LiveRun, Session
from ..run import Outcome

__all__ = ["HeldRun", "RunsAsJobs"]


class HeldRun(Protocol):
    """The job that holds a conversation's unfinished run."""

    @property
    def job_id(self) -> int: ...

    @property
    def status(self) -> str:
        """`doing`, `todo` or `awaiting_approval`."""
        ...


class RunsAsJobs(Protocol):
    """Streams a conversation's run as a job of a queue, and says which job holds a conversation's run."""

    def stream(
        self,
        entry: str,
        input_data: Any,
        *,
        session: Session | str,
        resumable: bool = False,
        on_end: Callable[[Outcome], Awaitable[Outcome]] | None = None,
    ) -> AbstractAsyncContextManager[LiveRun]: ...

    async def held(self, session_id: str) -> HeldRun | None: ...
