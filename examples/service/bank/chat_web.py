"""The chat's HTTP side: the page, a session per conversation, its runs streamed, its approvals answered.

- `GET /chat`: the page (plain HTML and JavaScript, no build step).
- `POST /chat/sessions`: a new conversation, owned by the caller.
- `POST /chat/sessions/{id}/messages` `{"text": ...}`: the banker's run on it, streamed as the Vercel
  AI data-stream protocol (`llm_do.web`); the conversation continues from what earlier messages left.
- `POST /chat/sessions/{id}/decisions` `{"approval_id", "choice", "note"}` (or the AI SDK's
  `{"id", "approved", "reason"}`): answers an approval of that conversation's live run, whichever
  web process runs it (`llm_do.web.relay`, through PostgreSQL).

Who is who: the `x-user` header, a stand-in for the application's own authentication. A session
belongs to the user who opened it; only that user may stream it or answer its approvals.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, Header, Request, Response
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel, Field
from starlette.types import Receive, Scope, Send

from llm_do import LlmDoError, RunResult, Runtime
from llm_do.web import decision_of, sse_response, vercel_sse
from llm_do.web.relay import DecisionRefused, DecisionRelay, DecisionUndelivered

from .chat import ChatStore
from .ledger import BankError
from .turns import Turns
from .web import error_response

__all__ = ["add_chat_endpoints"]

STATIC = Path(__file__).parent / "static"

User = Annotated[str | None, Header(alias="x-user", max_length=64)]


class Message(BaseModel):
    text: str = Field(min_length=1, max_length=2000)


def add_chat_endpoints(app: FastAPI) -> None:
    """The chat's routes; the lifespan puts `runtime`, `relay` and `chats` in the request state."""

    @app.get("/chat")
    async def page() -> FileResponse:
        return FileResponse(STATIC / "chat.html", media_type="text/html")

    @app.get("/chat/chat.js")
    async def script() -> FileResponse:
        return FileResponse(STATIC / "chat.js", media_type="text/javascript")

    @app.post("/chat/sessions", status_code=201)
    async def open_session(request: Request, user: User = None) -> Response:
        if not user:
            return _no_user()
        chats: ChatStore = request.state.chats
        return JSONResponse({"id": await chats.open(user)}, status_code=201)

    @app.post("/chat/sessions/{session_id}/messages")
    async def message(session_id: str, body: Message, request: Request, user: User = None) -> Response:
        chats: ChatStore = request.state.chats
        refused = await _refuse_unless_owner(chats, session_id, user)
        if refused is not None:
            return refused
        turns: Turns = request.state.turns
        try:
            await turns.claim(session_id)  # one run at a time per conversation, in every process
        except BankError as error:
            return error_response(error.status, str(error), None)
        runtime: Runtime = request.state.runtime
        try:
            session = await runtime.session(session_id)  # each run reads its history from the store
        except BaseException:
            await turns.release(session_id)
            raise
        relay: DecisionRelay = request.state.relay

        async def stream() -> AsyncGenerator[str]:
            async with runtime.stream("banker", body.text, session=session) as run, AsyncExitStack() as holding:
                holding.enter_context(relay.hold(session_id, run))

                async def ended(result: RunResult) -> None:  # before the stream's last chunk: the next message
                    await holding.aclose()  # may come at once, to this process or another
                    await turns.release(session_id)

                async for line in vercel_sse(run, on_result=ended):
                    yield line

        return _Turn(stream(), lambda: turns.release(session_id))

    @app.post("/chat/sessions/{session_id}/decisions", status_code=204)
    async def decide(session_id: str, request: Request, user: User = None) -> Response:
        chats: ChatStore = request.state.chats
        refused = await _refuse_unless_owner(chats, session_id, user)
        if refused is not None:
            return refused
        relay: DecisionRelay = request.state.relay
        try:
            body: Any = await request.json()
            approval_id, choice, note = decision_of(body if isinstance(body, dict) else {})
        except ValueError:
            return error_response(400, "the decision is not JSON", None)
        except LlmDoError as error:
            return error_response(400, str(error), None)
        try:
            await relay.decide(session_id, approval_id, choice, note)
        except DecisionUndelivered as error:
            return error_response(404, str(error), None)
        except (DecisionRefused, LlmDoError) as error:  # LlmDoError: refused by a run held in this process
            return error_response(409, str(error), None)
        return Response(status_code=204)


class _Turn(Response):
    """The run's data stream; however the response ends (a client gone before or while it streams), the
    stream is closed, which cancels a run still going and waits for its teardown, then the conversation
    is let go."""

    def __init__(self, body: AsyncGenerator[str], release: Callable[[], Awaitable[None]]) -> None:
        super().__init__()
        self._body = body
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await sse_response(self._body)(scope, receive, send)
        finally:
            try:
                await self._body.aclose()
            finally:
                await self._release()


def _no_user() -> Response:
    return error_response(401, "say who you are: the x-user header names the user", None)


async def _refuse_unless_owner(chats: ChatStore, session_id: str, user: str | None) -> Response | None:
    if not user:
        return _no_user()
    owner = await chats.owner(session_id)
    if owner is None:
        return error_response(404, f"no chat session {session_id!r}; open one with POST /chat/sessions", None)
    if owner != user:
        return error_response(403, f"chat session {session_id!r} belongs to another user", None)
    return None
