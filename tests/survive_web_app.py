"""The chat router with its runs as jobs (`chat_router(parking=LiveParking(...))`), served by real uvicorn processes
in tests/web/test_live_runs_survive.py and benchmarks/bench_survive.py: `uvicorn tests.survive_web_app:create_app
--factory`, `LLM_DO_JOBS_DATABASE_URL` set. Each message is a run of tests/journal_app.py's payer (its prompt the
JSON of `{"notes", "amount", ...}`), a job of `tests.live_app:queue` from its first request: `llm-do worker
tests.live_app:queue` goes on with it if the process dies. Anyone may use any conversation (a test's stand-in). The
router's prefix is the example's chat page's (`/chat/sessions`), and that page (examples/service/bank/static) is
served at `/chat`, for the chromium test."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse

from llm_do import Runtime
from llm_do.jobs import JobQueue, LiveParking
from llm_do.web import chat_router, questions_end_on_signal

from .live_app import ENTRIES, QUEUE, live_runtime

PAGE = Path(__file__).resolve().parents[1] / "examples" / "service" / "bank" / "static"


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.state.runtime
    return runtime


def _parking(request: Request) -> LiveParking:
    parking: LiveParking = request.state.parking
    return parking


def create_app() -> FastAPI:
    dsn = os.environ["LLM_DO_JOBS_DATABASE_URL"]
    log = os.environ.get("SURVIVE_WEB_LOG")  # where the test reads what the process logged
    if log:
        logging.basicConfig(filename=f"{log}.{os.getpid()}", level=logging.INFO)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        async with AsyncExitStack() as stack:
            queue = await stack.enter_async_context(JobQueue(dsn, entries=ENTRIES, queue=QUEUE, approvals="park"))
            await queue.apply_schema()
            runtime = await stack.enter_async_context(live_runtime(dsn))
            parking = await stack.enter_async_context(LiveParking(queue, runtime))
            stack.enter_context(questions_end_on_signal(parking.stop_asking))
            yield {"runtime": runtime, "parking": parking}

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/chat")  # the example's chat page, for chromium
    async def page() -> FileResponse:
        return FileResponse(PAGE / "chat.html", media_type="text/html")

    @app.get("/chat/chat.js")
    async def script() -> FileResponse:
        return FileResponse(PAGE / "chat.js", media_type="text/javascript")

    app.include_router(
        chat_router(
            _runtime, entry="payer", allow_anyone=True, prefix="/chat/sessions", database_url=dsn, parking=_parking
        )
    )
    return app
