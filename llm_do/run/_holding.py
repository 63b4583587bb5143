"""Holding a suspended tool call until its siblings settle.

pydantic-ai runs the tool calls of one model response in tasks side by side, and cancels the others as soon as
one raises. A call that ends because its question was left open outside the run (`RunSuspended`: a parked job)
must not cut its siblings short: a sibling's model request in flight would be cancelled after it was paid for,
and paid again when the run is made again, and a question the sibling was about to ask would wait for another
round. So such a call is held here until every other tool call of the same call scope has ended, or has been
suspended too; then they all raise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from ..approvals._requests import RunSuspended

T = TypeVar("T")


class SiblingHold:
    """The tool calls of one call scope that are running, and those of them held after a suspension.

    A call runs inside `around`, or, on the lending's hot path, counts itself in (`running += 1`) and out
    (`ended()`) and awaits `settled()` before it re-raises a `RunSuspended`. Once every running call is held, all
    of them go; a held call that is cancelled (a sibling failed, the run was cancelled) stops waiting at once."""

    __slots__ = ("_round", "held", "running")

    def __init__(self) -> None:
        self.running = 0
        self.held = 0
        self._round: asyncio.Future[None] | None = None

    async def around(self, call: Awaitable[T]) -> T:
        """`call`'s result, counted among the running calls, and held if it ends the run suspended."""
        self.running += 1
        try:
            return await call
        except RunSuspended:
            await self.settled()
            raise
        finally:
            self.ended()

    async def settled(self) -> None:
        """Hold the calling (suspended) call until every other running call has ended or is held too."""
        self.held += 1
        if self.held >= self.running:
            self._release()
            return
        round_ = self._round
        if round_ is None:
            round_ = self._round = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait((round_,))  # never cancels the round's future, which the other held calls await
        except asyncio.CancelledError:
            if self._round is round_:
                self.held -= 1
            raise

    def ended(self) -> None:
        """A call has ended (returned, raised, or was released after its hold)."""
        self.running -= 1
        if self.held and self.held >= self.running:
            self._release()

    def _release(self) -> None:
        round_, self._round, self.held = self._round, None, 0
        if round_ is not None and not round_.done():
            round_.set_result(None)
