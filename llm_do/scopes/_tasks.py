"""Awaiting what providers build, and futures whose outcome nobody needs."""

from __future__ import annotations

import asyncio
import inspect
from types import GeneratorType
from typing import Any

__all__ = ["built", "dropped", "is_awaitable"]


async def built(value: Any) -> Any:
    """`value`, awaited when it is awaitable (what a provider with async dependencies returns).

    dependency-injector settles such a future from a callback, which fails (asyncio logs an
    `InvalidStateError`) if the future was cancelled meanwhile. So a cancellation arriving while a
    future is awaited leaves it alone to settle, and propagates; what it builds then is dropped
    unentered. Other awaitables (a coroutine) are awaited in place, in the caller's context.
    """
    if isinstance(value, asyncio.Future):
        if value.done():
            return value.result()
        try:
            return await asyncio.shield(value)
        except asyncio.CancelledError:
            value.add_done_callback(dropped)
            raise
    return await value if is_awaitable(value) else value


def dropped(future: asyncio.Future[Any]) -> None:
    """A done callback for a future whose outcome nobody needs: retrieved, so asyncio does not log it."""
    if not future.cancelled():
        future.exception()


def is_awaitable(value: object) -> bool:
    """`inspect.isawaitable`, without its slow ABC check for the common objects that are not awaitable."""
    if hasattr(type(value), "__await__"):
        return True
    return isinstance(value, GeneratorType) and inspect.isawaitable(value)  # a @types.coroutine generator
