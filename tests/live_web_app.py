"""A chat service whose live runs park as jobs, served by real uvicorn processes in tests/web/test_live_parking_web.py
and benchmarks/bench_deploy.py: `uvicorn tests.live_web_app:create_app --factory`, `LLM_DO_JOBS_DATABASE_URL` set.

- `POST /sessions/{id}/messages` `{"text"}`: the payer's run (tests/journal_app.py) in that session, streamed as the
  AI SDK's data stream; through `LiveParking` (a question that waits `LLM_DO_JOBS_PARK_AFTER` parks the run as a
  job of `tests.live_app:queue`), or, with `?park=0`, as a plain live run, which cannot park;
- `POST /sessions/{id}/decisions` `{"approval_id", "choice", "note"}`: answers the question in the session's live
  run in this process, else the session's parked question (`LiveParking.decide`); 409 when neither waits on it;
- `GET /sessions/{id}/pending`: the session's parked questions.

A session belongs to the user its id starts with (`alice-1` is Alice's: the `x-user` header says who asks), a
stand-in for the application's own authentication. Told to stop (`SIGTERM`), the process parks the questions its
parking runs wait on and denies the others (`questions_end_on_signal(parking.stop_asking)`).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Annotated, Any

from fastapi import FastAPI, Header, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from llm_do import ApprovalNotPending, Runtime
from llm_do.jobs import DecisionRefused, JobQueue, LiveParking
from llm_do.web import decision_of, questions_end_on_signal, sse_response, vercel_sse

from .live_app import ENTRIES, QUEUE, live_runtime

User = Annotated[str | None, Header(alias="x-user")]


class Message(BaseModel):
    text: str


def create_app() -> FastAPI:
    dsn = os.environ["LLM_DO_JOBS_DATABASE_URL"]

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        async with AsyncExitStack() as stack:
            queue = await stack.enter_async_context(JobQueue(dsn, entries=ENTRIES, queue=QUEUE, approvals="park"))
            await queue.apply_schema()
            runtime = await stack.enter_async_context(live_runtime(dsn))
            parking = LiveParking(queue, runtime)
            stack.enter_context(questions_end_on_signal(parking.stop_asking))
            yield {"runtime": runtime, "parking": parking}

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/sessions/{session_id}/messages")
    async def message(session_id: str, body: Message, request: Request, park: int = 1, user: User = None) -> Response:
        refused = _refused(session_id, user)
        if refused is not None:
            return refused
        runtime: Runtime = request.state.runtime
        parking: LiveParking = request.state.parking

        async def stream() -> AsyncIterator[str]:
            opened = (
                parking.stream("payer", body.text, session=session_id)
                if park
                else runtime.stream("payer", body.text, session=session_id)
            )
            async with opened as run:
                async for line in vercel_sse(run):
                    yield line

        return sse_response(stream())

    @app.post("/sessions/{session_id}/decisions", status_code=204)
    async def decide(session_id: str, request: Request, user: User = None) -> Response:
        refused = _refused(session_id, user)
        if refused is not None:
            return refused
        approval_id, choice, note = decision_of(await request.json())
        runtime: Runtime = request.state.runtime
        parking: LiveParking = request.state.parking
        session = runtime.sessions.get(session_id)
        try:
            if session is not None and any(asked.approval_id == approval_id for asked in session.pending):
                session.decide(approval_id, choice, note)  # type: ignore[arg-type]
            else:
                await parking.decide(session_id, approval_id, choice, note)  # type: ignore[arg-type]
        except (ApprovalNotPending, DecisionRefused) as error:
            return JSONResponse({"error": str(error)}, status_code=409)
        return Response(status_code=204)

    @app.get("/sessions/{session_id}/pending")
    async def pending(session_id: str, request: Request, user: User = None) -> Response:
        refused = _refused(session_id, user)
        if refused is not None:
            return refused
        parking: LiveParking = request.state.parking
        found = await parking.pending(session_id)
        return JSONResponse([{"job_id": item.job_id, "approval_id": item.approval_id} for item in found])

    return app


def _refused(session_id: str, user: str | None) -> Response | None:
    if not user or not session_id.startswith(f"{user}-"):
        return JSONResponse({"error": f"session {session_id!r} is not yours"}, status_code=403)
    return None
