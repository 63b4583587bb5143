"""Test an ASGI app (FastAPI, Starlette) with its lifespan: start-up before the test, shutdown after.

`httpx.ASGITransport` sends requests to an app but never runs its lifespan, so a `Runtime` or a
pool created there would not exist. `serve_lifespan(app)` runs the ASGI lifespan protocol the way
a server does; `asgi_client(app)` adds an `httpx.AsyncClient` that talks to the app in process.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

__all__ = ["ASGIApp", "LifespanError", "asgi_client", "serve_lifespan"]

Message = MutableMapping[str, Any]
ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]
]
"""An ASGI 3 application, such as a FastAPI or Starlette app."""


class LifespanError(RuntimeError):
    """The app's lifespan start-up or shutdown failed, or did not finish in time."""


@asynccontextmanager
async def serve_lifespan(app: ASGIApp, *, lifespan_timeout: float = 60.0) -> AsyncIterator[dict[str, Any]]:
    """Run `app`'s lifespan around the block and yield its lifespan state.

    The state is what a Starlette/FastAPI lifespan yields (`request.state` in each request). A
    start-up that fails raises the app's own exception here; so does a failing shutdown, unless
    the block raised first (the shutdown failure is then added to its notes). Start-up and shutdown
    may take `lifespan_timeout` seconds each.
    """
    state: dict[str, Any] = {}
    inbox: asyncio.Queue[Message] = asyncio.Queue()
    outbox: asyncio.Queue[Message] = asyncio.Queue()

    async def send(message: Message) -> None:
        await outbox.put(message)

    scope: dict[str, Any] = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": state}
    task = asyncio.ensure_future(app(scope, inbox.get, send))
    try:
        await _phase("startup", inbox, outbox, task, lifespan_timeout)
    except BaseException:
        await _stop(task)
        raise
    try:
        yield state
    except BaseException as error:
        try:
            await _phase("shutdown", inbox, outbox, task, lifespan_timeout)
        except Exception as failure:
            error.add_note(f"and then the app's lifespan shutdown failed: {failure!r}")
        finally:
            await _stop(task)
        raise
    try:
        await _phase("shutdown", inbox, outbox, task, lifespan_timeout)
    finally:
        await _stop(task)


async def _phase(
    name: str, inbox: asyncio.Queue[Message], outbox: asyncio.Queue[Message], task: asyncio.Future[None], seconds: float
) -> None:
    """Send `lifespan.<name>` and wait for the app's answer, or for the app to end."""
    await inbox.put({"type": f"lifespan.{name}"})
    reply = asyncio.ensure_future(outbox.get())
    try:
        done, _ = await asyncio.wait((reply, task), timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        reply.cancel()
    if reply in done:
        kind = reply.result()["type"]
        if kind == f"lifespan.{name}.complete":
            return
        if kind == f"lifespan.{name}.failed":
            await asyncio.wait((task,), timeout=seconds)  # Starlette re-raises the error after reporting it
            _raise_failure(task)
            raise LifespanError(f"the app's lifespan {name} failed: {reply.result().get('message', '')}")
        raise LifespanError(f"the app answered lifespan.{name} with {kind!r}")
    if task in done:
        _raise_failure(task)
        raise LifespanError(
            f"the app returned during lifespan {name} without answering it; does it support the lifespan protocol?"
        )
    raise LifespanError(f"the app's lifespan {name} did not finish within {seconds}s")


def _raise_failure(task: asyncio.Future[None]) -> None:
    """Raise the app's own exception if its lifespan task ended with one."""
    failure = task.exception() if task.done() and not task.cancelled() else None
    if failure is not None:
        raise failure


async def _stop(task: asyncio.Future[None]) -> None:
    if not task.done():
        task.cancel()
    await asyncio.wait((task,))
    if not task.cancelled():
        task.exception()  # retrieved: raised by _phase already, or not worth a second report


@asynccontextmanager
async def asgi_client(
    app: ASGIApp, *, base_url: str = "http://testserver", lifespan_timeout: float = 60.0, **client_options: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """An `httpx.AsyncClient` on `app` in process, with the app's lifespan run around the block.

    Each request sees a copy of the lifespan state, as under uvicorn. A response streams as the app
    sends it (`client.stream(...)`), and closing it early tells the app its client disconnected. `client_options` go to
    `httpx.AsyncClient` (headers, cookies, ...). Needs httpx.
    """
    import httpx

    from .asgi_stream import StreamingASGITransport

    async with serve_lifespan(app, lifespan_timeout=lifespan_timeout) as state:

        async def with_state(
            scope: MutableMapping[str, Any],
            receive: Callable[[], Awaitable[Message]],
            send: Callable[[Message], Awaitable[None]],
        ) -> None:
            if scope["type"] in ("http", "websocket"):
                scope = {**scope, "state": dict(state)}
            await app(scope, receive, send)

        transport = StreamingASGITransport(with_state)
        async with httpx.AsyncClient(transport=transport, base_url=base_url, **client_options) as client:
            yield client
