"""The chat's HTTP side: the page, a session per conversation, its runs streamed, its approvals answered.

- `GET /chat`: the page (plain HTML and JavaScript, no build step).
- `POST /chat/sessions`: with no body, a new conversation, owned by the caller. With the AI SDK's request
  body (`{id, messages, trigger, messageId}`, what its `DefaultChatTransport` sends with `api: "/chat/sessions"`):
  the chat `id` is the conversation (opened for the caller on its first message), and the last message is
  either the person's (the banker's run on it starts) or the assistant's, whose tool parts carry the person's
  answers (`addToolApprovalResponse`): they are applied, and the rest of the run streams. The stream ends
  (`finish`) at a question the run waits on, for the SDK to send the answer back.
- `GET /chat/sessions/{id}/stream`: the conversation's run in flight, from its start (204 when there is none):
  the AI SDK's resumable stream, which a page that reloads reads (it ends at an open question, as above);
  `?follow=true` follows the run to its end instead, for a page that answers through the decisions endpoint.
  `?sdk=7` (on the SDK's `api`: `/chat/sessions?sdk=7`, which its reconnect URL keeps) adds AI SDK 7's
  `tool-approval-response` chunk for every answer, wherever it came from; AI SDK 6 cannot read it.
- `GET /chat/sessions/{id}`: the conversation so far (the AI SDK's UI messages, with the person's message that
  the run in flight answers), its open questions (`session.pending`), and the run in flight's message id.
- `POST /chat/sessions/{id}/messages` `{"text": ...}`: the hand-written page's message: the banker's run,
  streamed as the Vercel AI data-stream protocol (`llm_do.web`) to its end; its questions are answered by
  the decisions endpoint meanwhile.
- `POST /chat/sessions/{id}/decisions` `{"approval_id", "choice", "note"}` (or the AI SDK's
  `{"id", "approved", "reason"}`): answers an approval of that conversation's live run, whichever
  web process runs it (`llm_do.web.relay`, through PostgreSQL).

Every run is resumable (`bank.resumable`): it goes on when its page leaves, until it ends, and its
questions wait for an answer up to `LLM_DO_APPROVAL_TIMEOUT`. A run lives in the process that started it:
its stream is read there (a load balancer routes a conversation to one process); its decisions reach it
from any process.

Who is who: the `x-user` header, a stand-in for the application's own authentication. A session
belongs to the user who opened it; only that user may stream it, read it or answer its approvals.
"""

from __future__ import annotations

import re
from contextlib import suppress
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, Header, Query, Request, Response
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel, Field, ValidationError
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from pydantic_ai.ui.vercel_ai.request_types import (
    DynamicToolApprovalRespondedPart,
    TextUIPart,
    ToolApprovalResponded,
    ToolApprovalRespondedPart,
    UIMessage,
)

from llm_do import LiveRun, LlmDoError, Runtime
from llm_do.web import SdkVersion, decision_of, sse_response
from llm_do.web.relay import DecisionRefused, DecisionRelay, DecisionUndelivered

from .chat import ChatStore
from .ledger import BankError
from .resumable import Keepers, sdk_lines
from .turns import Turns
from .web import error_response

__all__ = ["add_chat_endpoints"]

STATIC = Path(__file__).parent / "static"

User = Annotated[str | None, Header(alias="x-user", max_length=64)]
Sdk = Annotated[int, Query(ge=6, le=7, description="the AI SDK's major version: 7 is told of every answer")]


def _version(sdk: int) -> SdkVersion:
    return 7 if sdk == 7 else 6


_CHAT_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")
"""A chat id the AI SDK may choose (its own ids are 16 letters and digits; ours are `chat_` and hex)."""


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
    async def open_session(request: Request, user: User = None, sdk: Sdk = 6) -> Response:
        if not user:
            return _no_user()
        body = await request.body()
        if body.strip() not in (b"", b"{}"):
            return await _sdk_request(request, body, user, _version(sdk))
        chats: ChatStore = request.state.chats
        return JSONResponse({"id": await chats.open(user)}, status_code=201)

    @app.post("/chat/sessions/{session_id}/messages")
    async def message(session_id: str, body: Message, request: Request, user: User = None) -> Response:
        chats: ChatStore = request.state.chats
        refused = await _refuse_unless_owner(chats, session_id, user)
        if refused is not None:
            return refused
        run = await _start_run(request, session_id, body.text)
        if isinstance(run, Response):
            return run
        keepers: Keepers = request.state.keepers
        return sse_response(sdk_lines(run, keepers, pause=False))  # the page stays and answers meanwhile

    @app.get("/chat/sessions/{session_id}/stream")
    async def resume(
        session_id: str, request: Request, user: User = None, follow: bool = False, sdk: Sdk = 6
    ) -> Response:
        chats: ChatStore = request.state.chats
        refused = await _refuse_unless_owner(chats, session_id, user)
        if refused is not None:
            return refused
        runtime: Runtime = request.state.runtime
        run = runtime.live_run(session_id)
        if run is None:
            return Response(status_code=204)
        keepers: Keepers = request.state.keepers
        return sse_response(sdk_lines(run, keepers, pause=not follow, sdk_version=_version(sdk)))

    @app.get("/chat/sessions/{session_id}")
    async def conversation(session_id: str, request: Request, user: User = None) -> Response:
        chats: ChatStore = request.state.chats
        refused = await _refuse_unless_owner(chats, session_id, user)
        if refused is not None:
            return refused
        runtime: Runtime = request.state.runtime
        session = await runtime.session(session_id)
        messages = VercelAIAdapter.dump_messages(session.history, sdk_version=6)
        pending = [
            {
                "approval_id": asked.approval_id,
                "tool_call_id": asked.tool_call_id,
                "tool": asked.tool,
                "args": dict(asked.args),
                "description": asked.description,
            }
            for asked in session.pending
        ]
        shown = [message.model_dump(mode="json", by_alias=True, exclude_none=True) for message in messages]
        live = runtime.live_run(session_id)
        keepers: Keepers = request.state.keepers
        prompt = None if live is None else keepers.prompt(live)
        if live is not None and prompt is not None:  # the message the run in flight answers: saved when it ends
            shown.append(
                {"id": f"{live.message_id}_prompt", "role": "user", "parts": [{"type": "text", "text": prompt}]}
            )
        return JSONResponse(
            {
                "id": session_id,
                "messages": shown,
                "pending": pending,
                "running": None if live is None else live.message_id,
            }
        )

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


async def _start_run(request: Request, session_id: str, text: str) -> LiveRun | Response:
    """Claim the conversation's turn (in every process) and start its run, which goes on without its page."""
    turns: Turns = request.state.turns
    try:
        await turns.claim(session_id)  # one run at a time per conversation, in every process
    except BankError as error:
        return error_response(error.status, str(error), None)
    runtime: Runtime = request.state.runtime
    keepers: Keepers = request.state.keepers
    try:
        session = await runtime.session(session_id)  # each run reads its history from the store
        return await keepers.start(session, text)  # the turn is let go when the run ends
    except BaseException:
        await turns.release(session_id)
        raise


async def _sdk_request(request: Request, body: bytes, user: str, sdk: SdkVersion) -> Response:
    """The AI SDK's chat request: the person's message starts a run; the assistant's carries answers."""
    try:
        data = VercelAIAdapter.build_run_input(body)
    except ValidationError as error:
        return error_response(400, f"not the AI SDK's chat request: {error.errors()[0]['msg']}", None)
    chat_id = data.id
    if not _CHAT_ID.fullmatch(chat_id):
        return error_response(400, "a chat id is 1 to 100 letters, digits, '_' or '-'", None)
    chats: ChatStore = request.state.chats
    owner = await chats.claim(chat_id, user)  # the chat is the conversation: opened on its first message
    if owner != user:
        return error_response(403, f"chat session {chat_id!r} belongs to another user", None)
    if not data.messages:
        return error_response(400, "the chat request has no messages", None)
    last = data.messages[-1]
    if last.role == "assistant":
        return await _answers(request, chat_id, last, sdk)
    text = "".join(part.text for part in last.parts if isinstance(part, TextUIPart)).strip()
    if last.role != "user" or not text:
        return error_response(400, "the last message is neither the person's text nor answers to questions", None)
    run = await _start_run(request, chat_id, text[:2000])
    if isinstance(run, Response):
        return run
    keepers: Keepers = request.state.keepers
    return sse_response(sdk_lines(run, keepers, sdk_version=sdk))


def _answered(message: UIMessage) -> list[ToolApprovalResponded]:
    return [
        part.approval
        for part in message.parts
        if isinstance(part, ToolApprovalRespondedPart | DynamicToolApprovalRespondedPart)
        and isinstance(part.approval, ToolApprovalResponded)
    ]


async def _answers(request: Request, chat_id: str, message: UIMessage, sdk: SdkVersion) -> Response:
    """The person's answers, sent back the AI SDK's way: applied, then the rest of the run streams."""
    answers = _answered(message)
    if not answers:
        return error_response(400, "the assistant's message answers no question (addToolApprovalResponse)", None)
    runtime: Runtime = request.state.runtime
    keepers: Keepers = request.state.keepers
    run = runtime.live_run(chat_id)
    if run is None:
        return error_response(409, f"conversation {chat_id!r} has no run in flight in this process", None)
    asked = keepers.asked(run)
    unknown = [answer.id for answer in answers if answer.id not in asked]
    if unknown:
        return error_response(409, f"not a question of the run in flight: {', '.join(unknown)}", None)
    relay: DecisionRelay = request.state.relay
    pending = {asking.approval_id for asking in run.pending}
    for answer in answers:
        if answer.id in pending:  # else answered elsewhere (another tab, the decisions endpoint): the first won
            with suppress(DecisionRefused, LlmDoError):  # answered meanwhile: its stream says how
                await relay.decide(chat_id, answer.id, "approve" if answer.approved else "deny", answer.reason)
    return sse_response(sdk_lines(run, keepers, after=[answer.id for answer in answers], sdk_version=sdk))


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
