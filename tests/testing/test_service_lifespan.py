"""`llm_do.testing.lifespan`: an ASGI app's lifespan around a test, and an httpx client on the app."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from llm_do.testing import LifespanError, asgi_client, serve_lifespan


def app_with(events: list[str], *, fail_at: str | None = None) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        events.append("startup")
        if fail_at == "startup":
            raise ValueError("no database")
        yield {"greeting": "hello", "seen": []}
        events.append("shutdown")
        if fail_at == "shutdown":
            raise OSError("pool would not close")

    app = FastAPI(lifespan=lifespan)

    @app.get("/greet")
    async def greet(request: Request) -> dict[str, Any]:
        events.append("request")
        greeting = request.state.greeting
        request.state.greeting = "changed"  # changes this request's copy of the state only
        return {"greeting": greeting}

    @app.get("/state")
    async def state(request: Request) -> dict[str, Any]:
        return {"greeting": request.state.greeting}

    return app


async def test_the_client_runs_start_up_before_requests_and_shutdown_after() -> None:
    events: list[str] = []
    async with asgi_client(app_with(events)) as client:
        assert events == ["startup"]
        assert (await client.get("/greet")).json() == {"greeting": "hello"}
        assert (await client.get("/state")).json() == {"greeting": "hello"}  # each request has its own copy
        assert events == ["startup", "request"]
    assert events == ["startup", "request", "shutdown"]


async def test_serve_lifespan_yields_the_lifespan_state() -> None:
    events: list[str] = []
    async with serve_lifespan(app_with(events)) as state:
        assert state["greeting"] == "hello"
    assert events == ["startup", "shutdown"]


async def test_a_failing_start_up_raises_the_apps_own_error() -> None:
    events: list[str] = []
    with pytest.raises(ValueError, match="no database"):
        async with asgi_client(app_with(events, fail_at="startup")):
            raise AssertionError("the block must not run")
    assert events == ["startup"]


async def test_a_failing_shutdown_raises_the_apps_own_error() -> None:
    with pytest.raises(OSError, match="pool would not close"):
        async with asgi_client(app_with([], fail_at="shutdown")):
            pass


async def test_the_blocks_error_wins_and_shutdown_still_runs() -> None:
    events: list[str] = []
    with pytest.raises(KeyError) as raised:
        async with asgi_client(app_with(events, fail_at="shutdown")):
            raise KeyError("the test's own failure")
    assert events == ["startup", "shutdown"]
    assert raised.value.__notes__ == ["and then the app's lifespan shutdown failed: OSError('pool would not close')"]


async def test_an_app_without_lifespan_support_is_named() -> None:
    async def bare(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        return None  # ignores the lifespan scope

    with pytest.raises(LifespanError, match="returned during lifespan startup without answering it"):
        async with serve_lifespan(bare):
            pass


async def test_a_start_up_that_hangs_is_stopped() -> None:
    async def stuck(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        await receive()
        await asyncio.Event().wait()

    with pytest.raises(LifespanError, match=r"lifespan startup did not finish within 0.05s"):
        async with serve_lifespan(stuck, lifespan_timeout=0.05):
            pass


def streaming_app(events: list[str]) -> FastAPI:
    """An endpoint that streams a part, then waits for a click (another request) or, past 10 s, gives up."""
    clicked = asyncio.Event()
    app = FastAPI()

    async def parts() -> AsyncIterator[str]:
        yield "one;"
        try:
            await asyncio.wait_for(clicked.wait(), 10)
        except TimeoutError:
            events.append("nobody clicked")
            yield "nobody clicked;"
            return
        except asyncio.CancelledError:
            events.append("cancelled: the client left")
            raise
        yield "clicked;"

    @app.post("/stream")
    async def stream() -> StreamingResponse:
        return StreamingResponse(parts(), media_type="text/plain")

    @app.post("/click")
    async def click() -> dict[str, bool]:
        clicked.set()
        return {"clicked": True}

    return app


async def test_a_response_streams_while_the_app_still_sends_it() -> None:
    events: list[str] = []
    async with asgi_client(streaming_app(events)) as client, client.stream("POST", "/stream") as response:
        parts = response.aiter_text()
        received = [await anext(parts)]
        assert (await client.post("/click")).json() == {"clicked": True}  # answered while the stream is open
        received += [part async for part in parts]
    assert received == ["one;", "clicked;"]
    assert events == []


async def test_closing_a_response_early_tells_the_app_its_client_left() -> None:
    events: list[str] = []
    async with asgi_client(streaming_app(events)) as client:
        async with client.stream("POST", "/stream") as response:
            assert await anext(response.aiter_text()) == "one;"
        assert events == ["cancelled: the client left"]  # the app heard it before the block was left
        assert (await client.post("/click")).status_code == 200  # the client goes on


async def test_an_app_that_fails_mid_stream_raises_from_the_read() -> None:
    app = FastAPI()

    async def parts() -> AsyncIterator[str]:
        yield "one;"
        raise ValueError("the stream broke")

    @app.get("/broken")
    async def broken() -> StreamingResponse:
        return StreamingResponse(parts())

    async with asgi_client(app) as client, client.stream("GET", "/broken") as response:
        with pytest.raises(ValueError, match="the stream broke"):
            await response.aread()
