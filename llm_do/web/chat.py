"""A conversation's live runs over HTTP, as one FastAPI router: `app.include_router(chat_router(...))`.

Each conversation is an llm-do session (its id the conversation's), and each message starts one resumable run of
the entry in it, which goes on when its page leaves. Under the router's prefix (`/chats` by default):

- `POST {prefix}`: the AI SDK's chat request (`DefaultChatTransport` with `api: prefix`, its body unchanged): the
  chat's `id` is the conversation; its last message is the person's (a run starts on it, its stream ends at the
  first question still open) or the assistant's, carrying answers (`addToolApprovalResponse`): they are applied and
  the rest of the run streams. With no body, a new conversation: `201 {"id"}`.
- `POST {prefix}/{id}/messages` `{"text": ...}`: a run on the text, streamed to its end (a page that answers through
  the decisions endpoint meanwhile).
- `GET {prefix}/{id}/stream`: the run in flight from its start (the AI SDK's resumable stream), ending at an open
  question; `?follow=true` to its end; 204 when no run is in flight. Each event's id is its chunk's number:
  `?seen=N` (or `Last-Event-ID`) reads on after chunk `N` (400 for a place that names no chunk).
- `GET {prefix}/{id}`: the conversation so far (the AI SDK's UI messages, with the message the run in flight
  answers), its open questions wherever they wait (the runtime's inbox), the run in flight's message id.
- `POST {prefix}/{id}/decisions`: `{"approval_id", "choice", "note"}` or the AI SDK's `{"id", "approved", "reason"}`;
  a question no live run waits on goes to the runtime's inbox (a parked run's).

Given a database, every web process finds a conversation's run in flight, streams it and lists its questions
(`PostgresRuns`); without one, each process its own (`LocalRuns`).

`?sdk=7` (on every stream, and on the SDK's `api`) adds AI SDK 7's `tool-approval-response` chunk for every answer.

Needs FastAPI (the `service` extra), imported with this module.
"""

import asyncio
import inspect
import logging
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias, cast

from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from pydantic_ai.ui.vercel_ai.request_types import (
    DynamicToolApprovalRespondedPart,
    TextUIPart,
    ToolApprovalResponded,
    ToolApprovalRespondedPart,
    UIMessage,
)

from .. import ApprovalChoice, HistoryError, LiveRun, Runtime
from ..di import is_provider
from ..errors import ConfigurationError, LlmDoError, shortened
from ..sessions import OpenQuestion
from .jobs import HeldRun, RunsAsJobs
from .postgres_runs import LiveQuestions, PostgresRuns
from .relay import DecisionRefused, DecisionRelay, DecisionTooLarge, DecisionUndelivered, LocalRelay, Relay
from .resumable import sdk_lines
from .runs import ChatRuns, LocalRuns, LoggedRun, RunInFlight
from .turns import ConversationBusy, LocalTurns, PostgresTurns, Turns, TurnsUnavailable
from .vercel import SdkVersion, decision_of, sse_response

__all__ = ["Access", "ChatAction", "ChatLimits", "ChatRefused", "chat_router"]

logger = logging.getLogger("llm_do")

ChatAction = Literal["open", "send", "read", "decide"]
"""What a request does with a conversation: open a new one, send it a message, read it (its stream, its messages),
or decide one of its questions (through the decisions endpoint, or answers in the AI SDK's request)."""

Access: TypeAlias = Callable[[Request, str, ChatAction], "bool | Awaitable[bool]"]
"""`access(request, conversation_id, action)`: whether the caller may do `action` with the conversation. True lets the
request through, False refuses it (403); raise `ChatRefused` to answer otherwise (401: who are you?, 404: no such
conversation). `open` and `send` are where an application records who owns a conversation: `send` may come for a
conversation nobody opened (the AI SDK's chat makes its own ids)."""

_VERBS: dict[ChatAction, str] = {"open": "open", "send": "write to", "read": "read", "decide": "decide in"}

_CONVERSATION_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")
"""A conversation id the router takes: the AI SDK's own are 16 letters and digits; the router's `chat_` and hex."""


class ChatRefused(LlmDoError):
    """A request the chat router refuses, with its HTTP status (raised by an `access` hook, or by the router)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def response(self) -> JSONResponse:
        return JSONResponse({"error": self.message}, status_code=self.status)


@dataclass(frozen=True, slots=True)
class ChatLimits:
    """What one request may bring. Too much is refused with 413, saying what is too long: never cut short."""

    message_chars: int = 10_000
    """Characters of the person's message."""
    note_chars: int = 1_000
    """Characters of a decision's note (a denial's reason, which the model reads). Relayed between processes, a
    note is also held to 2,000 bytes as UTF-8 JSON (`DecisionTooLarge`, 413 too)."""
    body_bytes: int = 4 * 1024 * 1024
    """Bytes of a request's body. The AI SDK sends the whole conversation with each message (the router reads only
    its last message), so this is larger than a message."""

    def __post_init__(self) -> None:
        for name in ("message_chars", "note_chars", "body_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"ChatLimits: {name} is {value!r}; give a whole number of at least 1")


# -- what the router is given -------------------------------------------------------------------------------------


def _access(access: Access | None, allow_anyone: bool) -> Access:
    if access is not None and allow_anyone:
        raise ConfigurationError("chat_router: give access=... or allow_anyone=True, not both")
    if allow_anyone:
        return _anyone
    if access is None:
        logger.warning(
            "chat_router was given no access hook: it refuses every request (401); give it access=... (who the "
            "caller is and what they may do) or, for a demo, allow_anyone=True"
        )
        return _nobody
    if not callable(access):
        raise ConfigurationError(
            f"chat_router: access must be a callable (request, conversation_id, action) -> bool, got {access!r}"
        )
    return access


def _anyone(request: Request, conversation_id: str, action: ChatAction) -> bool:
    return True


def _nobody(request: Request, conversation_id: str, action: ChatAction) -> bool:
    raise ChatRefused(
        401,
        "this chat was not told who may use it, so it refuses everyone: give chat_router an access hook "
        "(access=..., who the caller is and what they may do), or allow_anyone=True for a demo",
    )


async def _nothing() -> None:
    return None


def _dependency(given: Any, what: str) -> Callable[..., Any]:
    """A FastAPI dependency giving what `given` stands for: a dependency-injector provider (called, and awaited
    when it gives an awaitable), a FastAPI dependency (a callable), or the object itself."""
    if is_provider(given):

        async def provided() -> Any:
            made = given()
            return await made if inspect.isawaitable(made) else made

        return provided
    if inspect.isclass(given):
        raise ConfigurationError(
            f"chat_router: {what} is the class {given.__name__}; give an instance, a provider of one or a FastAPI "
            "dependency that returns one"
        )
    if callable(given):
        dependency: Callable[..., Any] = given
        return dependency

    async def constant() -> Any:
        return given

    return constant


async def _dsn(given: Any) -> str:
    value = given() if callable(given) else given
    if inspect.isawaitable(value):
        value = await value
    secret = getattr(value, "get_secret_value", None)
    if callable(secret):
        value = secret()
    if not isinstance(value, str) or not value:
        raise ConfigurationError(
            f"chat_router: database_url gave {type(value).__name__}, not a PostgreSQL URL; set it (or leave "
            "database_url out to keep the conversations' turns and decisions in this process)"
        )
    return value


def _version(sdk: int) -> SdkVersion:
    return 7 if sdk == 7 else 6


async def _refusing(handling: Awaitable[Response]) -> Response:
    try:
        return await handling
    except ChatRefused as refused:
        return refused.response()


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


# -- the state of the router in one application -------------------------------------------------------------------


class _ChatState:
    """What the router keeps between requests while the application runs: its default relay and turns, where runs
    are found, and the runs it started (its shutdown waits for them)."""

    def __init__(self, relay: Relay, turns: Turns, runs: ChatRuns) -> None:
        self.relay = relay
        self.turns = turns
        self.runs = runs
        self.running: set[LiveRun] = set()
        self.questions = LiveQuestions(runs, relay) if isinstance(runs, PostgresRuns) else None
        """The questions of the live runs of every process, for the inbox of each runtime the router serves."""
        self.inboxes: list[Runtime] = []

    def serves(self, runtime: Runtime) -> None:
        """`runtime`'s inbox lists (and answers) the questions of the conversations' live runs in every process."""
        if self.questions is not None and not any(known is runtime for known in self.inboxes):
            runtime.inbox.add(self.questions)
            self.inboxes.append(runtime)

    def forget_inboxes(self) -> None:
        for runtime in self.inboxes:
            if self.questions is not None:
                runtime.inbox.discard(self.questions)
        self.inboxes.clear()

    async def wait_for_runs(self) -> None:
        while self.running:
            results = [asyncio.ensure_future(run.result()) for run in list(self.running)]
            await asyncio.wait(results)
            for result in results:
                if not result.cancelled():
                    result.exception()  # the run's own outcome: its stream told it


@dataclass(slots=True)
class _Chat:
    """One request's view of the router: its runtime, relay and turns, and what it may do."""

    runtime: Runtime
    relay: Relay
    turns: Turns
    state: _ChatState
    entry: str
    limits: ChatLimits
    access: Access
    request: Request
    parking: RunsAsJobs | None = None
    _body: bytes | None = field(default=None)

    # -- the endpoints ---------------------------------------------------------------------------------------

    async def sdk_request(self, sdk: SdkVersion) -> Response:
        """The AI SDK's chat request, or (no body) a new conversation."""
        body = await self.body()
        if body.strip() in (b"", b"{}"):
            conversation_id = f"chat_{uuid.uuid4().hex}"
            await self.allow(conversation_id, "open")
            return JSONResponse({"id": conversation_id}, status_code=201)
        try:
            data = VercelAIAdapter.build_run_input(body)
        except ValidationError as error:
            return _error(400, f"not the AI SDK's chat request: {error.errors()[0]['msg']}")
        conversation_id = _checked_id(data.id)
        if not data.messages:
            return _error(400, "the chat request has no messages")
        last = data.messages[-1]
        if last.role == "assistant":
            answers = _answered(last)
            if not answers:
                return _error(400, "the assistant's message answers no question (addToolApprovalResponse)")
            for answer in answers:
                self.check_note(answer.reason, answer.id)
            await self.allow(conversation_id, "decide")
            return await self.answers(conversation_id, answers, sdk)
        text = "".join(part.text for part in last.parts if isinstance(part, TextUIPart)).strip()
        if last.role != "user" or not text:
            return _error(400, "the last message is neither the person's text nor answers to questions")
        self.check_message(text)
        await self.allow(conversation_id, "send")
        run = await self.start(conversation_id, text)
        return sse_response(sdk_lines(run, sdk_version=sdk))

    async def message(self, conversation_id: str) -> Response:
        """`{"text": ...}`: a run, streamed to its end."""
        conversation_id = _checked_id(conversation_id)
        body = await self.json()
        given = body.get("text") if isinstance(body, dict) else None
        text = given.strip() if isinstance(given, str) else ""
        if not text:
            return _error(422, 'a message is {"text": "..."}, its text not empty')
        self.check_message(text)
        await self.allow(conversation_id, "send")
        run = await self.start(conversation_id, text)
        return sse_response(sdk_lines(run, pause=False))  # the page stays and answers meanwhile

    async def resume(self, conversation_id: str, follow: bool, sdk: SdkVersion, seen: int | None) -> Response:
        conversation_id = _checked_id(conversation_id)
        await self.allow(conversation_id, "read")
        if seen is None:  # the server-sent events' own way: the id of the last event the reader had
            seen = _last_event_id(self.request.headers.get("last-event-id", ""))
        run = await self.state.runs.find(self.runtime, conversation_id)
        if run is None:
            return Response(status_code=204)
        # A run of another process: a reader coming from the run's own process may be ahead of what its database
        # holds, so only a place past every possible chunk is refused; the reader waits for the rest.
        written = run.log.count if isinstance(run, LoggedRun) else _LAST_CHUNK + 1
        if seen >= written:
            raise ChatRefused(
                400,
                f"place {seen:,} names no chunk of the stream (it has {written:,} so far, numbered from 0): give "
                "the number of the last chunk the reader had (its event id), or none to read from the start",
            )
        return sse_response(sdk_lines(run, pause=not follow, sdk_version=sdk, seen=seen))

    async def conversation(self, conversation_id: str, sdk: SdkVersion) -> Response:
        conversation_id = _checked_id(conversation_id)
        await self.allow(conversation_id, "read")
        try:
            stored = await self.runtime.history_store.load(conversation_id)
        except HistoryError as error:
            return _error(503, str(error))
        history = stored.messages
        if not (stored.version or stored.messages):  # the store keeps none of it: the session's own copy, if open
            session = self.runtime.sessions.get(conversation_id)
            history = list(session.history) if session is not None else []
        shown = [
            message.model_dump(mode="json", by_alias=True, exclude_none=True)
            for message in VercelAIAdapter.dump_messages(history, sdk_version=sdk)
        ]
        # the run in flight, in this process or another, and the questions waiting anywhere (a parked job's too)
        run, questions, held = await asyncio.gather(
            self.state.runs.find(self.runtime, conversation_id),
            self.runtime.questions(conversation_id),
            self.held(conversation_id),
        )
        if run is not None and run.prompt is not None:  # the message the run in flight answers: saved when it ends
            shown.append(
                {"id": f"{run.message_id}_prompt", "role": "user", "parts": [{"type": "text", "text": run.prompt}]}
            )
        return JSONResponse(
            {
                "id": conversation_id,
                "messages": shown,
                "pending": [_question(question, run) for question in questions],
                "running": None if run is None else run.message_id,
                "job": None if run is not None or held is None else {"id": held.job_id, "status": held.status},
            }
        )

    async def held(self, conversation_id: str) -> HeldRun | None:
        """The job that holds the conversation's unfinished run (with `parking`): parked, or taken over by a worker
        from a process that died."""
        return None if self.parking is None else await self.parking.held(conversation_id)

    async def decide(self, conversation_id: str) -> Response:
        conversation_id = _checked_id(conversation_id)
        await self.allow(conversation_id, "decide")
        body = await self.json()
        try:
            approval_id, choice, note = decision_of(body if isinstance(body, dict) else {})
        except LlmDoError as error:
            return _error(400, str(error))
        self.check_note(note, approval_id)
        try:
            if isinstance(self.state.runs, PostgresRuns) and not await self.state.runs.find(
                self.runtime, conversation_id
            ):  # no process runs it: no need to wait for an answer from none of them
                raise DecisionUndelivered(
                    f"decision on {shortened(approval_id, 60, quoted=True)} not applied: no process holds a live run "
                    f"of session {shortened(conversation_id, 60, quoted=True)}"
                )
            await self.relay.decide(conversation_id, approval_id, choice, note)
        except DecisionTooLarge as error:  # past what the relay carries between processes
            return _error(413, str(error))
        except DecisionUndelivered as error:
            try:  # a question that waits elsewhere: a parked run's
                if await self.elsewhere(conversation_id, approval_id, choice, note):
                    return Response(status_code=204)
            except LlmDoError as refused:
                return _error(409, str(refused))
            return _error(404, str(error))
        except (DecisionRefused, LlmDoError) as error:  # LlmDoError: refused by a run held in this process
            return _error(409, str(error))
        return Response(status_code=204)

    async def elsewhere(self, conversation_id: str, approval_id: str, choice: str, note: str | None) -> bool:
        """Answer the question in a place of the runtime's inbox other than the live runs (a parked run's): whether
        one held it."""
        decided = cast(ApprovalChoice, choice)  # (checked by decision_of)
        for source in self.runtime.inbox.sources:
            if source is not self.state.questions and await source.answer(conversation_id, approval_id, decided, note):
                return True
        return False

    async def answers(self, conversation_id: str, answers: list[ToolApprovalResponded], sdk: SdkVersion) -> Response:
        """The person's answers, sent back the AI SDK's way: applied, then the rest of the run streams."""
        run = await self.state.runs.find(self.runtime, conversation_id)
        if run is None:
            return _error(409, f"conversation {conversation_id!r} has no run in flight in this process")
        asked = {question.approval_id for question in run.asked}
        unknown = [answer.id for answer in answers if answer.id not in asked]
        if unknown:
            return _error(409, f"not a question of the run in flight: {', '.join(unknown)}")
        pending = {question.approval_id for question in run.pending}
        for answer in answers:
            if answer.id not in pending:  # answered elsewhere (another tab, the decisions endpoint): the first won
                continue
            choice = "approve" if answer.approved else "deny"
            try:
                await self.relay.decide(conversation_id, answer.id, choice, answer.reason)
            except DecisionTooLarge as error:
                return _error(413, str(error))
            except (DecisionRefused, DecisionUndelivered, LlmDoError):
                pass  # answered meanwhile: its stream says how
        return sse_response(sdk_lines(run, after=[answer.id for answer in answers], sdk_version=sdk))

    # -- starting a run ----------------------------------------------------------------------------------------

    async def start(self, conversation_id: str, text: str) -> RunInFlight:
        """Claim the conversation's turn and start its run, which goes on without its page; the turn is let go,
        and the run no longer held for decisions, when it ends."""
        try:
            await self.turns.claim(conversation_id)
        except ConversationBusy as busy:
            raise ChatRefused(409, str(busy)) from None
        except TurnsUnavailable as unavailable:
            raise ChatRefused(503, str(unavailable)) from None
        state, turns = self.state, self.turns
        try:
            job = await self.held(conversation_id)
        except BaseException:
            await turns.release(conversation_id)
            raise
        if job is not None:  # its history must stay the one the job's run started from
            await turns.release(conversation_id)
            raise ChatRefused(
                409,
                f"conversation {conversation_id!r} is still answering, in job {job.job_id} ({job.status}): its "
                f"answer joins the conversation when it ends (GET the conversation: its job and open questions)",
            )
        ready = asyncio.Event()
        held: list[AbstractContextManager[None]] = []
        started: list[LiveRun] = []

        async def on_end(outcome: Any) -> Any:
            await ready.wait()
            try:
                for holding in held:
                    holding.__exit__(None, None, None)
                if started:
                    state.running.discard(started[0])
                    await state.runs.ended(conversation_id, started[0])
            except Exception:
                logger.exception("conversation %r: letting its run go failed", conversation_id)
            finally:
                try:
                    await turns.release(conversation_id)
                except Exception:
                    logger.exception("conversation %r: releasing its turn failed", conversation_id)
            return outcome  # the run's own, whatever letting it go did

        entered = False
        try:
            session = await self.runtime.session(conversation_id)
            if self.parking is not None:  # a job from its first request: it survives this process
                stream = self.parking.stream(self.entry, text, session=session, resumable=True, on_end=on_end)
            else:
                stream = self.runtime.stream(self.entry, text, session=session, resumable=True, on_end=on_end)
            async with stream as run:
                entered = True
                try:
                    started.append(run)
                    state.running.add(run)
                    holding = self.relay.hold(conversation_id, run)
                    holding.__enter__()
                    held.append(holding)
                    in_flight = await state.runs.started(conversation_id, run, text)
                finally:
                    ready.set()
        except BaseException as error:
            if not entered:  # else the run's end lets the turn go
                await turns.release(conversation_id)
            if isinstance(error, HistoryError):  # the conversation so far could not be read
                raise ChatRefused(503, str(error)) from None
            raise
        return in_flight

    # -- the request ----------------------------------------------------------------------------------------------

    async def allow(self, conversation_id: str, action: ChatAction) -> None:
        verdict = self.access(self.request, conversation_id, action)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if not verdict:
            raise ChatRefused(403, f"you may not {_VERBS[action]} conversation {conversation_id!r}")

    async def body(self) -> bytes:
        """The request's body, refused with 413 past `limits.body_bytes`."""
        if self._body is not None:
            return self._body
        limit = self.limits.body_bytes
        declared = self.request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ChatRefused(413, _body_too_large(int(declared), limit))
        parts: list[bytes] = []
        size = 0
        async for part in self.request.stream():
            size += len(part)
            if size > limit:
                raise ChatRefused(413, _body_too_large(size, limit))
            parts.append(part)
        self._body = b"".join(parts)
        return self._body

    async def json(self) -> Any:
        import json

        body = await self.body()
        try:
            return json.loads(body)
        except ValueError:
            raise ChatRefused(400, "the request's body is not JSON") from None
        except RecursionError:  # within the bytes it may have, deeper than the reader goes
            raise ChatRefused(400, "the request's body nests deeper than this chat reads JSON: send it flat") from None

    def check_message(self, text: str) -> None:
        limit = self.limits.message_chars
        if len(text) > limit:
            raise ChatRefused(
                413,
                f"the message is {len(text):,} characters long; this chat takes messages of at most {limit:,} "
                "characters: shorten it, or send it in parts",
            )

    def check_note(self, note: str | None, approval_id: str) -> None:
        limit = self.limits.note_chars
        if note is not None and len(note) > limit:
            raise ChatRefused(
                413,
                f"the note of the decision on {shortened(approval_id, 60, quoted=True)} is {len(note):,} characters "
                f"long; a note takes at most {limit:,}: shorten it",
            )


def _checked_id(conversation_id: str) -> str:
    if not _CONVERSATION_ID.fullmatch(conversation_id):
        shown = shortened(conversation_id, 60, quoted=True)
        raise ChatRefused(400, f"conversation id {shown}: use 1 to 100 letters, digits, '_' or '-'")
    return conversation_id


_LAST_CHUNK = 2**63 - 1
"""The highest number a chunk of a stream may have (PostgreSQL's bigint)."""


def _last_event_id(given: str) -> int:
    """The chunk number of a `Last-Event-ID` header (-1: none given)."""
    if not given:
        return -1
    if not (given.isascii() and given.isdigit()):
        raise ChatRefused(
            400,
            f"Last-Event-ID {shortened(given, 60, quoted=True)} is not a chunk's number: give the id of the last "
            "event the reader had, or none to read from the start",
        )
    return int(given) if len(given) <= len(str(_LAST_CHUNK)) else _LAST_CHUNK + 1  # (past every chunk: refused)


def _body_too_large(size: int, limit: int) -> str:
    return f"the request's body is {size:,} bytes or more; this chat takes at most {limit:,}"


def _answered(message: UIMessage) -> list[ToolApprovalResponded]:
    return [
        part.approval
        for part in message.parts
        if isinstance(part, ToolApprovalRespondedPart | DynamicToolApprovalRespondedPart)
        and isinstance(part.approval, ToolApprovalResponded)
    ]


def _question(question: OpenQuestion, run: RunInFlight | None) -> dict[str, Any]:
    """An open question as the conversation's reader gets it: its ids, what it asks, whose it is and where it
    waits (`held`: `live`, in the run in flight, or `parked`, in a job), and what an answer may be."""
    asked = question.request
    shown: dict[str, Any] = {
        "approval_id": asked.approval_id,
        "tool_call_id": asked.tool_call_id,
        "call_id": asked.call_id,
        "entry": asked.entry,
        "toolset": asked.toolset,
        "tool": asked.tool,
        "args": dict(asked.args),
        "description": asked.description,
        "session_id": asked.session_id,
        "held": question.held,
        "run": question.run if question.run is not None or run is None else run.message_id,
        "choices": list(question.choices),
    }
    if asked.attachments:
        shown["attachments"] = [info.to_json() for info in asked.attachments]
    if question.job_id is not None:
        shown["job_id"] = question.job_id
    if question.asked_at is not None:
        shown["asked_at"] = question.asked_at.isoformat()
    return shown


def chat_router(
    runtime: Any,
    *,
    entry: str,
    access: Access | None = None,
    allow_anyone: bool = False,
    prefix: str = "/chats",
    limits: ChatLimits | None = None,
    database_url: Any = None,
    relay: Any = None,
    turns: Any = None,
    runs: ChatRuns | None = None,
    parking: Any = None,
) -> APIRouter:
    """The endpoints of a conversation's live runs of `entry` (see the module's docstring), as a FastAPI router.

    `runtime` is a `Runtime`, a dependency-injector provider of one (`RuntimeResource`, `container.runtime`: called
    at each request, so an override is honoured) or a FastAPI dependency that returns one (`request.state.runtime`).

    `access(request, conversation_id, action)` says who may do what (see `Access`). Without it every request is
    refused with 401: a conversation's messages, questions and decisions are a person's. `allow_anyone=True` lets
    anyone read, write and decide in any conversation whose id they know: for a demo on your own machine.

    `database_url` (a PostgreSQL URL, or a provider or callable that gives one, read at start-up): the router's
    start-up opens a `DecisionRelay`, `PostgresTurns` and `PostgresRuns` on that database, so that one message at a
    time per conversation holds in every web process, a decision reaches its run in whichever process runs it, and
    any process streams a conversation's run and lists its questions. Without it, in this process only. `relay`,
    `turns` (each an object, a provider or a FastAPI dependency) and `runs` (a `ChatRuns`) replace those parts; the
    application then opens and closes them.

    `parking` (an `llm_do.jobs.LiveParking`, a provider of one or a FastAPI dependency giving one, on the runtime
    the router serves): each run is streamed through it, a job of its queue from its first request, so that a
    question that waits too long parks it, and a worker goes on with it if this process dies; `GET {prefix}/{id}`
    names the job that holds a conversation's run (`job`), and a message is refused (409) while one does.

    The router's start-up and shutdown run in the application's lifespan (FastAPI merges them when the router is
    included); its shutdown waits for the runs it started.
    """
    allowed = _access(access, allow_anyone)
    chat_limits = limits if limits is not None else ChatLimits()
    if not prefix.startswith("/") or prefix.endswith("/"):
        raise ConfigurationError(f"chat_router: prefix {prefix!r} must start with '/' and not end with one")
    key = f"llm_do_chat_{uuid.uuid4().hex}"
    runtime_of = _dependency(runtime, "runtime")
    relay_of = _dependency(relay, "relay") if relay is not None else _nothing
    turns_of = _dependency(turns, "turns") if turns is not None else _nothing
    parking_of = _dependency(parking, "parking") if parking is not None else _nothing

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        async with AsyncExitStack() as stack:
            shared_relay: Relay = LocalRelay()
            shared_turns: Turns = LocalTurns()
            dsn = None
            if database_url is not None and (relay is None or turns is None or runs is None):
                dsn = await _dsn(database_url)
                if relay is None:
                    shared_relay = await stack.enter_async_context(DecisionRelay(dsn))
                if turns is None:
                    shared_turns = await stack.enter_async_context(PostgresTurns(dsn))
            shared_runs: ChatRuns | None = runs
            if shared_runs is None and dsn is not None:  # found by every process, their streams too
                shared_runs = await stack.enter_async_context(PostgresRuns(dsn))
            elif shared_runs is None:
                local = LocalRuns()
                stack.push_async_callback(local.aclose)  # after the runs: their streams written to their end
                shared_runs = local
            state = _ChatState(shared_relay, shared_turns, shared_runs)
            stack.callback(state.forget_inboxes)
            if isinstance(runtime, Runtime):  # (one given by a provider or a dependency: at its first request)
                state.serves(runtime)
            stack.push_async_callback(state.wait_for_runs)  # before the relay, the turns and the runs close
            yield {key: state}

    async def seams(
        request: Request,
        given_runtime: Annotated[Any, Depends(runtime_of)],
        given_relay: Annotated[Any, Depends(relay_of)],
        given_turns: Annotated[Any, Depends(turns_of)],
        given_parking: Annotated[Any, Depends(parking_of)],
    ) -> _Chat:
        state = getattr(request.state, key, None)
        if not isinstance(state, _ChatState):
            raise ConfigurationError(
                "the chat router's start-up has not run: serve the application with its lifespan (uvicorn does; "
                "in tests, llm_do.testing.asgi_client), and include the router with app.include_router"
            )
        if not isinstance(given_runtime, Runtime):
            raise ConfigurationError(
                f"chat_router: the runtime it was given gave {type(given_runtime).__name__}, not a Runtime"
            )
        state.serves(given_runtime)
        return _Chat(
            runtime=given_runtime,
            relay=given_relay if given_relay is not None else state.relay,
            turns=given_turns if given_turns is not None else state.turns,
            state=state,
            entry=entry,
            limits=chat_limits,
            access=allowed,
            request=request,
            parking=given_parking,
        )

    Chat = Annotated[_Chat, Depends(seams)]
    Sdk = Annotated[int, Query(ge=6, le=7, description="the AI SDK's major version: 7 is told of every answer")]
    Seen = Annotated[
        int | None,
        Query(ge=-1, description="the number of the last chunk the reader had (its event id): the rest follows"),
    ]
    router = APIRouter(prefix=prefix, lifespan=lifespan)

    @router.post("", status_code=201)
    async def sdk_request(chat: Chat, sdk: Sdk = 6) -> Response:
        return await _refusing(chat.sdk_request(_version(sdk)))

    @router.post("/{conversation_id}/messages")
    async def message(conversation_id: str, chat: Chat) -> Response:
        return await _refusing(chat.message(conversation_id))

    @router.get("/{conversation_id}/stream")
    async def resume(
        conversation_id: str, chat: Chat, follow: bool = False, sdk: Sdk = 6, seen: Seen = None
    ) -> Response:
        return await _refusing(chat.resume(conversation_id, follow, _version(sdk), seen))

    @router.get("/{conversation_id}")
    async def conversation(conversation_id: str, chat: Chat, sdk: Sdk = 6) -> Response:
        return await _refusing(chat.conversation(conversation_id, _version(sdk)))

    @router.post("/{conversation_id}/decisions", status_code=204)
    async def decide(conversation_id: str, chat: Chat) -> Response:
        return await _refusing(chat.decide(conversation_id))

    return router
