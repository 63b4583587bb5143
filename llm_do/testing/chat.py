"""Read a Vercel AI data stream in a test, and answer its questions by a policy.

`read_vercel_stream(response, on_question=...)` reads a streamed `httpx` response (from `llm_do.testing.asgi_client`,
or any server) to its end and gives what a test asserts on: the answer's text, the tool calls and their outcomes, the
questions asked. `ChatClient` speaks to `llm_do.web.chat_router`'s endpoints: `await chat.send(conversation, text,
answer=lambda question: "approve")` sends a message and answers every question the run asks, either through the
decisions endpoint while the stream goes on (a page's way) or in the next request, as the AI SDK's own chat does.

Needs httpx.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import httpx

__all__ = [
    "AnswerPolicy",
    "ChatClient",
    "ChatReply",
    "ChatResponseError",
    "Question",
    "SeenToolCall",
    "read_vercel_stream",
]

Choice = Literal["approve", "approve_for_session", "deny"]


@dataclass(frozen=True, slots=True)
class Question:
    """A question the stream asked (`tool-approval-request`, described by its `data-llm-do-approval` part)."""

    approval_id: str
    tool_call_id: str
    tool: str
    args: Mapping[str, Any]
    description: str | None = None
    entry: str | None = None
    toolset: str | None = None


AnswerPolicy = Callable[[Question], "Choice | tuple[Choice, str | None] | Awaitable[Any] | None"]
"""A policy: the answer to a question, `"approve"`, `"approve_for_session"` or `"deny"`, or with a note
(`("deny", "not today")`), or None to leave it open (the reply then ends at it). May be async."""


@dataclass(slots=True)
class SeenToolCall:
    """A tool call the stream showed, and how it ended."""

    tool_call_id: str
    tool: str
    args: Any
    state: str = "called"
    """`called` (no outcome seen yet), `done`, `failed` or `denied`."""
    output: Any = None
    error: str | None = None
    call: Mapping[str, Any] | None = None
    """For a child call's tool call: its call (`call`, `entry`, `parent_tool_call_id`); None for the top level's."""


@dataclass(slots=True)
class ChatReply:
    """What a streamed answer showed, merged over the responses that carried it."""

    message_id: str | None = None
    text: str = ""
    tool_calls: list[SeenToolCall] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    """Every question asked, in order."""
    answers: dict[str, str] = field(default_factory=dict)
    """The answers the policy gave, by approval id."""
    decided: dict[str, str] = field(default_factory=dict)
    """Each question's outcome the stream told (`approved`, `denied`, `parked`), by approval id."""
    data: list[dict[str, Any]] = field(default_factory=list)
    """The `data-*` parts, as sent."""
    chunks: list[dict[str, Any]] = field(default_factory=list)
    """Every chunk, as sent."""
    error: str | None = None
    """The stream's `error` chunk's text, if it ended with one."""
    finished: bool = False
    """Whether a `finish` chunk came."""

    @property
    def open(self) -> list[Question]:
        """The questions asked that the stream did not tell the outcome of (the run waits on them)."""
        return [question for question in self.questions if question.approval_id not in self.decided]

    def tool_call(self, tool: str) -> SeenToolCall:
        """The one call of `tool` the stream showed (AssertionError if none, or several)."""
        found = [seen for seen in self.tool_calls if seen.tool == tool]
        if len(found) != 1:
            raise AssertionError(f"the stream showed {len(found)} calls of {tool!r}: {self.tool_calls}")
        return found[0]


class ChatResponseError(AssertionError):
    """A chat endpoint answered with an unexpected status."""

    def __init__(self, method: str, url: str, status: int, body: str) -> None:
        super().__init__(f"{method} {url} answered {status}: {body[:2000]}")
        self.status = status
        self.body = body


class _Reading:
    """The reply as the chunks come."""

    def __init__(self, reply: ChatReply) -> None:
        self.reply = reply
        self.calls = {seen.tool_call_id: seen for seen in reply.tool_calls}
        self.asking: Question | None = None
        """A question announced whose description may follow."""

    def take(self, chunk: dict[str, Any]) -> Question | None:
        """Record `chunk`; the question now complete, if one is (its description came, or did not follow)."""
        reply = self.reply
        reply.chunks.append(chunk)
        kind = chunk.get("type")
        ready = None
        if self.asking is not None and not (
            kind == "data-llm-do-approval" and chunk.get("id") == self.asking.approval_id
        ):
            ready, self.asking = self.asking, None
        if kind == "start":
            reply.message_id = chunk.get("messageId") or reply.message_id
        elif kind == "text-delta":
            reply.text += chunk.get("delta", "")
        elif kind == "tool-input-available":
            metadata = chunk.get("providerMetadata") or {}
            new = SeenToolCall(chunk["toolCallId"], chunk["toolName"], chunk.get("input"), call=metadata.get("llm_do"))
            if new.tool_call_id not in self.calls:
                reply.tool_calls.append(new)
                self.calls[new.tool_call_id] = new
        elif kind in ("tool-output-available", "tool-output-error", "tool-output-denied"):
            seen = self.calls.get(chunk["toolCallId"])
            if seen is not None:
                seen.state = {"tool-output-available": "done", "tool-output-error": "failed"}.get(kind, "denied")
                seen.output = chunk.get("output")
                seen.error = chunk.get("errorText")
        elif kind == "tool-approval-request":
            called = self.calls.get(chunk["toolCallId"])
            question = Question(
                chunk["approvalId"], chunk["toolCallId"], called.tool if called else "", called.args if called else {}
            )
            reply.questions.append(question)
            self.asking = question
        elif kind == "error":
            reply.error = chunk.get("errorText")
        elif kind == "finish":
            reply.finished = True
        if isinstance(kind, str) and kind.startswith("data-"):
            reply.data.append(chunk)
            if kind == "data-llm-do-approval":
                ready = self._approval(chunk.get("data") or {}) or ready
        return ready

    def _approval(self, data: Mapping[str, Any]) -> Question | None:
        approval_id = data.get("approval_id")
        if data.get("state") in ("approved", "denied", "parked"):
            self.reply.decided[str(approval_id)] = str(data["state"])
        asking = self.asking
        if asking is None or approval_id != asking.approval_id:
            return None
        self.asking = None
        described = Question(
            asking.approval_id,
            asking.tool_call_id,
            data.get("tool") or asking.tool,
            data.get("args") or asking.args,
            data.get("description"),
            data.get("entry"),
            data.get("toolset"),
        )
        questions = self.reply.questions
        questions[questions.index(asking)] = described
        return described


async def read_vercel_stream(
    response: httpx.Response,
    *,
    on_question: Callable[[Question], Awaitable[bool | None]] | None = None,
    reply: ChatReply | None = None,
) -> ChatReply:
    """Read the Vercel AI data stream of `response` (streamed: `client.stream(...)`) to `data: [DONE]` or its end.

    `on_question(question)` is awaited as each question is asked (its description read); when it returns False the
    reading stops there (the response is left for the caller to close). `reply`: a reply to add this stream to (the
    same answer continued by another response)."""
    reading = _Reading(reply if reply is not None else ChatReply())
    async for line in response.aiter_lines():
        if not line.startswith("data: "):
            continue
        payload = line.removeprefix("data: ")
        if payload == "[DONE]":
            break
        ready = reading.take(json.loads(payload))
        if ready is not None and on_question is not None and await on_question(ready) is False:
            return reading.reply
    if reading.asking is not None and on_question is not None:  # asked last: its description never came
        asking, reading.asking = reading.asking, None
        await on_question(asking)
    return reading.reply


async def _answer_of(answer: AnswerPolicy | None, question: Question) -> tuple[Choice, str | None] | None:
    if answer is None:
        return None
    given = answer(question)
    if inspect.isawaitable(given):
        given = await given
    if given is None:
        return None
    if isinstance(given, tuple):
        choice, note = given
        return choice, note
    return given, None


class ChatClient:
    """A test's client of `llm_do.web.chat_router`'s endpoints under `api` (the router's prefix).

    `headers` go with every request (who the caller is, for the application's `access` hook).
    """

    def __init__(
        self, client: httpx.AsyncClient, api: str = "/chats", *, headers: Mapping[str, str] | None = None
    ) -> None:
        self.client = client
        self.api = api.rstrip("/")
        self.headers = dict(headers or {})

    async def open(self) -> str:
        """A new conversation's id (`POST {api}` with no body)."""
        response = await self.client.post(self.api, headers=self.headers)
        self._expect(response, 201)
        return str(response.json()["id"])

    async def send(
        self,
        conversation_id: str,
        text: str,
        *,
        answer: AnswerPolicy | None = None,
        via: Literal["decisions", "sdk"] = "decisions",
        sdk_version: Literal[6, 7] = 6,
    ) -> ChatReply:
        """Send `text` to the conversation and read the answer, each question answered by `answer`.

        `via="decisions"`: the message endpoint, read to the run's end; each answer is posted to the decisions
        endpoint meanwhile. `via="sdk"`: the AI SDK's own request; its stream ends at a question, and the answers go
        back in the next request's assistant message, whose stream continues the same reply. Without `answer` (or
        when it gives None) the reply ends at the first question, which stays open (`reply.open`).
        """
        if via == "sdk":
            return await self._sdk(conversation_id, text, answer, sdk_version)
        url = f"{self.api}/{conversation_id}/messages"
        reply = ChatReply()
        deciding = self._deciding(conversation_id, answer, reply)
        async with self.client.stream("POST", url, json={"text": text}, headers=self.headers) as response:
            await self._expect_streaming(response)
            return await read_vercel_stream(response, on_question=deciding, reply=reply)

    async def resume(self, conversation_id: str, *, follow: bool = False, sdk_version: int = 6) -> ChatReply | None:
        """The run in flight's stream from its start (`GET {api}/{id}/stream`), to its first open question or, with
        `follow`, to its end; None when no run is in flight (204)."""
        url = f"{self.api}/{conversation_id}/stream"
        params: dict[str, Any] = {"follow": "true" if follow else "false", "sdk": sdk_version}
        async with self.client.stream("GET", url, params=params, headers=self.headers) as response:
            if response.status_code == 204:
                return None
            await self._expect_streaming(response)
            return await read_vercel_stream(response)

    async def conversation(self, conversation_id: str) -> dict[str, Any]:
        """`GET {api}/{id}`: the conversation's UI messages, its open questions, the run in flight's message id."""
        response = await self.client.get(f"{self.api}/{conversation_id}", headers=self.headers)
        self._expect(response, 200)
        found: dict[str, Any] = response.json()
        return found

    async def answer_open(
        self,
        conversation_id: str,
        reply: ChatReply,
        answer: AnswerPolicy,
        *,
        via: Literal["decisions", "sdk"] = "sdk",
        sdk_version: Literal[6, 7] = 6,
    ) -> ChatReply:
        """Answer the questions `reply` left open (a reply read without a policy, or a stream resumed after a
        reload), and read the rest of the run, its later questions answered by `answer` too.

        `via="sdk"`: the AI SDK's next request, whose stream continues the same message (the reply returned holds
        what that stream sent: the rest of the run). `via="decisions"`: each answer posted to the decisions
        endpoint, then the run followed from its start to its end (`GET .../stream?follow=true`).
        """
        if via == "sdk":
            continued = ChatReply(message_id=reply.message_id)
            return await self._continue(conversation_id, reply.open, answer, sdk_version, continued)
        for question in reply.open:
            answered = await _answer_of(answer, question)
            if answered is None:
                return reply
            await self._decide(conversation_id, question, *answered, reply)
        followed = ChatReply(answers=dict(reply.answers))
        url = f"{self.api}/{conversation_id}/stream"
        params = {"follow": "true", "sdk": sdk_version}
        async with self.client.stream("GET", url, params=params, headers=self.headers) as response:
            await self._expect_streaming(response)
            deciding = self._deciding(conversation_id, answer, followed)
            return await read_vercel_stream(response, on_question=deciding, reply=followed)

    def _deciding(
        self, conversation_id: str, answer: AnswerPolicy | None, reply: ChatReply
    ) -> Callable[[Question], Awaitable[bool]]:
        """Answers each question through the decisions endpoint (False, to stop reading, when the policy gives
        none); questions answered already are passed by."""

        async def decide(question: Question) -> bool:
            if question.approval_id in reply.answers:
                return True
            answered = await _answer_of(answer, question)
            if answered is None:
                return False
            await self._decide(conversation_id, question, *answered, reply)
            return True

        return decide

    async def _decide(
        self, conversation_id: str, question: Question, choice: Choice, note: str | None, reply: ChatReply
    ) -> None:
        reply.answers[question.approval_id] = choice
        body = {"approval_id": question.approval_id, "choice": choice, "note": note}
        decided = await self.client.post(f"{self.api}/{conversation_id}/decisions", json=body, headers=self.headers)
        self._expect(decided, 204)

    async def _sdk(
        self, conversation_id: str, text: str, answer: AnswerPolicy | None, sdk_version: Literal[6, 7]
    ) -> ChatReply:
        said = {"id": f"user_{len(text)}", "role": "user", "parts": [{"type": "text", "text": text}]}
        body: dict[str, Any] = {"id": conversation_id, "messages": [said], "trigger": "submit-message"}
        reply = ChatReply()
        async with self.client.stream("POST", f"{self.api}?sdk={sdk_version}", json=body, headers=self.headers) as sent:
            await self._expect_streaming(sent)
            await read_vercel_stream(sent, reply=reply)
        return await self._continue(conversation_id, reply.open, answer, sdk_version, reply)

    async def _continue(
        self,
        conversation_id: str,
        asked: list[Question],
        answer: AnswerPolicy | None,
        sdk_version: Literal[6, 7],
        reply: ChatReply,
    ) -> ChatReply:
        """The AI SDK's requests that carry answers to `asked`, each stream read into `reply`, until no question is
        left open (or the policy leaves one)."""
        while asked and reply.error is None:
            parts: list[dict[str, Any]] = []
            for question in asked:
                answered = await _answer_of(answer, question)
                if answered is None:
                    return reply
                choice, note = answered
                if choice == "approve_for_session":
                    raise ValueError(
                        f"question {question.approval_id} ({question.tool}): the AI SDK's approval response cannot "
                        "say 'approve_for_session' (it is approved or not); answer 'approve', or answer through the "
                        "decisions endpoint (via='decisions'), which can"
                    )
                reply.answers[question.approval_id] = choice
                approval = {"id": question.approval_id, "approved": choice != "deny", "reason": note}
                parts.append(
                    {
                        "type": "dynamic-tool",
                        "toolName": question.tool,
                        "toolCallId": question.tool_call_id,
                        "state": "approval-responded",
                        "input": dict(question.args),
                        "approval": approval,
                    }
                )
            assistant = {"id": reply.message_id, "role": "assistant", "parts": [{"type": "step-start"}, *parts]}
            body = {
                "id": conversation_id,
                "messages": [assistant],
                "trigger": "submit-message",
                "messageId": reply.message_id,
            }
            before = len(reply.questions)
            url = f"{self.api}?sdk={sdk_version}"
            async with self.client.stream("POST", url, json=body, headers=self.headers) as response:
                await self._expect_streaming(response)
                await read_vercel_stream(response, reply=reply)
            asked = [question for question in reply.questions[before:] if question.approval_id not in reply.decided]
        return reply

    @staticmethod
    def _expect(response: httpx.Response, status: int) -> None:
        if response.status_code != status:
            raise ChatResponseError(response.request.method, str(response.url), response.status_code, response.text)

    @staticmethod
    async def _expect_streaming(response: httpx.Response) -> None:
        if response.status_code != 200:
            body = (await response.aread()).decode(errors="replace")
            raise ChatResponseError(response.request.method, str(response.url), response.status_code, body)
