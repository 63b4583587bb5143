"""The recorded HTTP log: blocks of bytes as they crossed the wire, put back together into exchanges.

Each block starts with `==== #N >>> TIME BYTES` (bytes llm-do sent on connection N) or
`==== #N <<< TIME BYTES` (bytes the server sent back). A connection carries several requests in
turn, and one message may span several blocks: the bytes of each direction of a connection are
joined, then cut into HTTP messages by their `Content-Length`.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LOG", "Exchange", "exchanges", "sse_text"]

LOG = Path(__file__).with_name("llama-server-qwen2.5-coder-1.5b.http.log")
_BLOCK = re.compile(rb"(?:^|\n)==== #(\d+) (>>>|<<<) (\S+) (\d+) bytes\n")


@dataclass(frozen=True)
class Exchange:
    """One request and the response it got, in the order the requests were sent (`number`, from 0)."""

    number: int
    connection: int
    request: dict[str, Any]
    """The request's JSON body."""
    status: int
    content_type: str
    body: bytes
    """The response's body as sent: SSE events (`data: ...`) for a streamed request, else JSON."""

    @property
    def streamed(self) -> bool:
        return "event-stream" in self.content_type


@functools.cache
def exchanges(path: Path = LOG) -> tuple[Exchange, ...]:
    """Every exchange of the log, in the order the requests were sent."""
    data = path.read_bytes()
    parts = _BLOCK.split(data)
    if parts[0].strip():
        raise ValueError(f"{path}: text before the first block")
    sent: dict[tuple[int, str], bytearray] = {}
    first_seen: dict[int, int] = {}
    for index in range(1, len(parts), 5):
        connection, direction = int(parts[index]), parts[index + 1].decode()
        size, body = int(parts[index + 3]), parts[index + 4]
        if len(body) != size:
            raise ValueError(f"{path}: block of connection #{connection} holds {len(body)} bytes, not {size}")
        sent.setdefault((connection, direction), bytearray()).extend(body)
        first_seen.setdefault(connection, index)
    found: list[tuple[int, int, Exchange]] = []
    for connection in sorted(first_seen, key=first_seen.__getitem__):
        requests = _messages(bytes(sent.get((connection, ">>>"), b"")))
        responses = _messages(bytes(sent.get((connection, "<<<"), b"")))
        for turn, (request, response) in enumerate(zip(requests, responses, strict=True)):
            _, _, request_body = request
            status_line, headers, response_body = response
            exchange = Exchange(
                number=0,
                connection=connection,
                request=json.loads(request_body),
                status=int(status_line.split()[1]),
                content_type=headers.get("content-type", ""),
                body=response_body,
            )
            found.append((first_seen[connection], turn, exchange))
    ordered = [exchange for _, _, exchange in sorted(found, key=lambda item: (item[0], item[1]))]
    return tuple(Exchange(n, e.connection, e.request, e.status, e.content_type, e.body) for n, e in enumerate(ordered))


def _messages(stream: bytes) -> list[tuple[str, dict[str, str], bytes]]:
    """The HTTP messages of one direction of a connection: start line, headers (lower-cased names), body."""
    found: list[tuple[str, dict[str, str], bytes]] = []
    while stream:
        head, separator, rest = stream.partition(b"\r\n\r\n")
        if not separator:
            raise ValueError(f"an HTTP message without the end of its headers: {stream[:80]!r}")
        start, *lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        size = int(headers["content-length"])
        found.append((start, headers, rest[:size]))
        stream = rest[size:]
    return found


def sse_text(body: bytes) -> tuple[str, list[tuple[str, str]], str | None, dict[str, Any] | None]:
    """What a streamed response says: its text, its tool calls (name, arguments), its finish reason, its usage."""
    text, calls, finish, usage = "", {}, None, None
    for event in body.decode().split("\n\n"):
        event = event.strip()
        if not event or event == "data: [DONE]":
            continue
        chunk = json.loads(event.removeprefix("data: "))
        for choice in chunk["choices"]:
            delta = choice.get("delta", {})
            text += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                name, arguments = calls.get(call["index"], ("", ""))
                function = call.get("function", {})
                more = (function.get("name") or "", function.get("arguments") or "")
                calls[call["index"]] = (name + more[0], arguments + more[1])
            finish = choice.get("finish_reason") or finish
        usage = chunk.get("usage") or usage
    return text, list(calls.values()), finish, usage
