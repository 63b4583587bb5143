"""The chat's HTTP side: the page, and the conversations' endpoints, which are llm-do's `chat_router`.

- `GET /chat`: the page (plain HTML and JavaScript, no build step).
- `/chat/sessions...`: `llm_do.web.chat_router` (docs/streaming.md, "A chat in one line"): a conversation per
  session, its runs streamed and resumable, its questions answered through the decisions endpoint or in the AI SDK's
  next request, one message at a time per conversation and decisions relayed between the service's processes
  through PostgreSQL (`database_url`).

Who is who: the `x-user` header, a stand-in for the application's own authentication. A conversation belongs to the
user who opened it (`POST /chat/sessions`, or the AI SDK's first message in a chat of its own id); only that user
may write to it, read it, resume its stream or answer its questions (`only_its_owner`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse

from llm_do import Runtime
from llm_do.web import ChatAction, ChatLimits, ChatRefused, chat_router

from .chat import ChatStore

__all__ = ["add_chat_endpoints", "only_its_owner"]

STATIC = Path(__file__).parent / "static"


async def only_its_owner(request: Request, conversation_id: str, action: ChatAction) -> bool:
    """The router's access hook: a conversation is its opener's (opened by the first message of a chat id the AI
    SDK chose, too)."""
    user = request.headers.get("x-user")
    if not user:
        raise ChatRefused(401, "say who you are: the x-user header names the user")
    if len(user) > 64:
        raise ChatRefused(422, "the x-user header names a user in at most 64 characters")
    chats: ChatStore = request.state.chats  # put there by the lifespan
    opening = action in ("open", "send")  # the first message of a chat id the AI SDK chose opens it
    owner = await chats.claim(conversation_id, user) if opening else await chats.owner(conversation_id)
    if owner is None:
        raise ChatRefused(404, f"no chat session {conversation_id!r}; open one with POST /chat/sessions")
    if owner != user:
        raise ChatRefused(403, f"chat session {conversation_id!r} belongs to another user")
    return True


async def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.state.runtime  # put there by the lifespan
    return runtime


def add_chat_endpoints(app: FastAPI, database_url: Callable[[], str]) -> None:
    """The page, and the chat's router: the banker answers, its turns and decisions shared through PostgreSQL."""

    @app.get("/chat")
    async def page() -> FileResponse:
        return FileResponse(STATIC / "chat.html", media_type="text/html")

    @app.get("/chat/chat.js")
    async def script() -> FileResponse:
        return FileResponse(STATIC / "chat.js", media_type="text/javascript")

    app.include_router(
        chat_router(
            _runtime,
            entry="banker",
            access=only_its_owner,
            prefix="/chat/sessions",
            limits=ChatLimits(message_chars=2000),
            database_url=database_url,
        )
    )
