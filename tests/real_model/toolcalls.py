"""The recorded tool-call traffic (`tool-calls.jsonl`): 144 requests llm-do sent to a small model that makes real
tool calls, each with the response it got, as `Exchange`s the recorded server answers with.

One JSON object a line (see README.md): `request` (the body llm-do sent), `response` (the JSON reply) or
`response_sse` (the exact SSE text of a streamed reply), `raw_model_text` (what the model generated), and
`aborted: true` where llm-do went away mid-reply. An aborted request has no response: `streamed_text` is what the
model had generated when llm-do left. "Loops were trimmed to their first requests": what the model said in the
rest of a loop is in the history of its last request, which `replies_in` turns into answers again.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from .httplog import Exchange

__all__ = ["TOOL_CALLS", "recorded_line", "replies_in", "streamed_text", "tool_exchanges"]

TOOL_CALLS = Path(__file__).with_name("tool-calls.jsonl")


@functools.cache
def _lines() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(line) for line in TOOL_CALLS.read_text().splitlines() if line.strip())


def recorded_line(number: int) -> dict[str, Any]:
    """Line `number` (from 0) of the file, as recorded."""
    return _lines()[number]


@functools.cache
def tool_exchanges() -> tuple[Exchange, ...]:
    """Every request of the file with its response, numbered from 0 in the file's order; an aborted request's
    response is empty (`status` 0): the server never finished it."""
    found = []
    for number, line in enumerate(_lines()):
        if line.get("response_sse") is not None:
            status, kind, body = 200, "text/event-stream", line["response_sse"].encode()
        elif line.get("response") is not None:
            status, kind, body = 200, "application/json", json.dumps(line["response"]).encode()
        else:
            status, kind, body = 0, "", b""
        found.append(Exchange(number, 0, line["request"], status, kind, body))
    return tuple(found)


def streamed_text(number: int) -> str:
    """What the model of exchange `number` generated (for an aborted one: before llm-do went away)."""
    text: str = recorded_line(number)["raw_model_text"] or ""
    return text


def replies_in(number: int, *, first: int = 0) -> list[Exchange]:
    """The model's replies recorded in the history of exchange `number`'s request, from its `first` (counted from
    0, after the prompt: the first user message; a retry prompt is one too): each as the answer to the request that
    asked it, in the form the request was sent (streamed or not), with its recorded tool call ids. Numbered
    `1000 * number + position`."""
    request = recorded_line(number)["request"]
    messages = request["messages"]
    start = min(index for index, message in enumerate(messages) if message["role"] == "user")
    said = [message for message in messages[start + 1 :] if message["role"] == "assistant"]
    streamed = bool(request.get("stream"))
    return [
        _answer(1000 * number + position, messages[: messages.index(message)], message, streamed)
        for position, message in enumerate(said)
        if position >= first
    ]


def _answer(number: int, asked: list[dict[str, Any]], said: dict[str, Any], streamed: bool) -> Exchange:
    calls = said.get("tool_calls") or []
    finish = "tool_calls" if calls else "stop"
    head = {"id": f"chatcmpl-replayed-{number}", "created": 1_795_918_676, "model": "qwen"}
    request = {"model": "qwen", "messages": asked}
    if not streamed:
        message = {"role": "assistant", "content": said.get("content"), **({"tool_calls": calls} if calls else {})}
        choice = {"index": 0, "message": message, "finish_reason": finish}
        reply = {**head, "object": "chat.completion", "choices": [choice]}
        return Exchange(number, 0, request, 200, "application/json", json.dumps(reply).encode())
    chunk = {**head, "object": "chat.completion.chunk"}
    delta: dict[str, Any] = {"role": "assistant", "content": said.get("content") or ""}
    if calls:
        delta["tool_calls"] = [{"index": index, **call} for index, call in enumerate(calls)]
    events = [
        {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
    ]
    body = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
    return Exchange(number, 0, {**request, "stream": True}, 200, "text/event-stream", body.encode())
