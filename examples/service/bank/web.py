"""HTTP plumbing shared by the llm-do service and its plain pydantic-ai twin (`bank.plain`)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic_ai.usage import RunUsage

__all__ = ["ClientDisconnected", "error_response", "unless_disconnected", "usage_summary"]

T = TypeVar("T")


class ClientDisconnected(Exception):
    """The client went away before the response; the work was cancelled. `cause` is the cancellation."""

    def __init__(self, cause: BaseException | None) -> None:
        super().__init__("the client disconnected; the request was cancelled")
        self.cause = cause


async def unless_disconnected(request: Request, work: Coroutine[Any, Any, T]) -> T:
    """Await `work`, but cancel it (and wait for its teardown) if the client disconnects first.

    uvicorn does not cancel an endpoint when its client goes away: it only answers the next
    `receive()` with `http.disconnect`. The request body is already read, so that `receive()`
    blocks until the client disconnects (or the response is sent) and costs nothing meanwhile.
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((task, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()  # the client left, or this endpoint was cancelled: stop the work too
            await asyncio.wait((task,))  # its teardown (rollbacks) finishes first
    client_left = watcher.done() and not watcher.cancelled()
    if client_left and task.cancelled():
        try:
            task.result()
        except asyncio.CancelledError as cancelled:
            raise ClientDisconnected(cancelled) from None
    return task.result()


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def error_response(status: int, message: str, audit: Sequence[str] | None) -> JSONResponse:
    """The JSON body of every error: what went wrong, and what the run did before it did."""
    return JSONResponse({"error": message, "audit": list(audit or ())}, status_code=status)


def usage_summary(usage: RunUsage) -> dict[str, int]:
    """A response's `usage`: always these four counts (llm_do.results.usage_json, for a job's record, adds the
    other counters that are not zero)."""
    return {
        "requests": usage.requests,
        "tool_calls": usage.tool_calls,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
    }
