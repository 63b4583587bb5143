"""An httpx transport that talks to an ASGI app in process and streams its responses.

`httpx.ASGITransport` returns a response only once the app has sent all of its body, so a test
cannot read a live run's stream while the run goes on (and cannot answer the approval it waits for).
`StreamingASGITransport` hands the response over as soon as the app starts it, gives each body part
as the app sends it, and tells the app the client disconnected when the response is closed early.
Parts not read yet are queued without bound: unlike a socket, a slow reader does not slow the app.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import httpx

__all__ = ["StreamingASGITransport"]

Message = MutableMapping[str, Any]
ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]
]


class StreamingASGITransport(httpx.AsyncBaseTransport):
    """Send requests to `app` in process; each response streams as the app sends it.

    An exception the app raises before it starts its response is raised by the request; one raised
    while the body streams is raised by the read. Closing a response before its end (leaving
    `client.stream(...)`) answers the app's next `receive()` with `http.disconnect`, as a server
    does when its client goes away, and waits for the app to return.
    """

    def __init__(self, app: ASGIApp, *, client: tuple[str, int] = ("127.0.0.1", 123), root_path: str = "") -> None:
        self.app = app
        self.client = client
        self.root_path = root_path

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        exchange = _Exchange(request)
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "headers": [(key.lower(), value) for key, value in request.headers.raw],
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "server": (request.url.host, request.url.port),
            "client": self.client,
            "root_path": self.root_path,
        }
        task = asyncio.ensure_future(self.app(scope, exchange.receive, exchange.send))
        started = asyncio.ensure_future(exchange.started.wait())
        try:
            await asyncio.wait((started, task), return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            task.cancel()
            await asyncio.wait((task,))
            raise
        finally:
            started.cancel()
        if not exchange.started.is_set():
            task.result()  # the app's own exception
            raise RuntimeError(f"the app returned without starting a response to {request.method} {request.url}")
        return httpx.Response(exchange.status, headers=exchange.headers, stream=_Body(exchange, task))


class _Exchange:
    """The ASGI `receive` and `send` of one request, and what the app sent so far."""

    def __init__(self, request: httpx.Request) -> None:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        self.request_body = request.stream.__aiter__()
        self.request_done = False
        self.head = request.method == "HEAD"
        self.started = asyncio.Event()
        self.status = 500
        self.headers: list[tuple[bytes, bytes]] = []
        self.parts: asyncio.Queue[bytes | None] = asyncio.Queue()  # None: the body ended
        self.finished = asyncio.Event()  # the body ended, or the client closed the response

    async def receive(self) -> Message:
        if self.request_done:
            await self.finished.wait()
            return {"type": "http.disconnect"}
        try:
            body = await self.request_body.__anext__()
        except StopAsyncIteration:
            self.request_done = True
            return {"type": "http.request", "body": b"", "more_body": False}
        return {"type": "http.request", "body": body, "more_body": True}

    async def send(self, message: Message) -> None:
        if self.finished.is_set():
            return  # the client is gone: nobody reads this any more
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = list(message.get("headers", []))
            self.started.set()
        elif message["type"] == "http.response.body":
            body = message.get("body", b"")
            if body and not self.head:
                self.parts.put_nowait(body)
            if not message.get("more_body", False):
                self.parts.put_nowait(None)
                self.finished.set()


class _Body(httpx.AsyncByteStream):
    """A response body read as the app sends it."""

    def __init__(self, exchange: _Exchange, task: asyncio.Future[None]) -> None:
        self.exchange = exchange
        self.task = task
        self.raised = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        parts = self.exchange.parts
        while True:
            try:
                body = parts.get_nowait()
            except asyncio.QueueEmpty:
                if self.task.done():  # the app returned, or failed, before it ended the body
                    self._raise_failure()
                    return
                part = asyncio.ensure_future(parts.get())
                await asyncio.wait((part, self.task), return_when=asyncio.FIRST_COMPLETED)
                if not part.done():
                    part.cancel()
                    continue
                body = part.result()
            if body is None:
                return
            yield body

    async def aclose(self) -> None:
        self.exchange.finished.set()  # the app's next receive() hears that the client left
        await asyncio.wait((self.task,))
        self._raise_failure()

    def _raise_failure(self) -> None:
        """Raise the app's exception, once."""
        if self.task.cancelled() or self.raised:
            return
        failure = self.task.exception()
        if failure is not None:
            self.raised = True
            raise failure
