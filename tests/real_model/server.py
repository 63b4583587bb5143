"""An OpenAI-compatible server on 127.0.0.1 that answers with recorded responses.

A request is answered with the recorded response to the same conversation: the same messages
(roles, texts, tool calls by name and arguments, tool results), the same tool names, and the same
`stream` flag. Tool call ids are compared by position and handles (`txn_1a2b3c4d`) by order of first
appearance, as llm-do's own replay keys do; a handle in the recorded response becomes the live one
at the same position. Tool schemas, model settings and headers are not compared: what llm-do sent
is kept in `received` for the test to check.

The server answers only the exchanges it is given (`recorded_server(exchanges(), [2, 3, 4])`), each
once, in order when several fit: the log holds the same first request asked several times, each
answered differently. A request nothing answers gets the next of the `borrowed` responses (recorded
answers to another conversation, for a turn the recorded model never saw: what a model says after
llm-do's own retry prompt), else a 500 whose body says what was asked.

`drip` serves a runaway reply instead: the recorded text of an exchange streamed one small delta
at a time, again and again, until the client goes away (`gone` is then set). `stall` streams a given text once,
a word at a time, and then never ends the reply (`sent` is set once the text is out): it waits for the client to go
away (`"hang"`), or closes the connection as a server that died would (`"drop"`).
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from .httplog import Exchange, sse_text

__all__ = ["Received", "RecordedServer", "conversation_key", "dead_url", "recorded_server"]

_HANDLE = re.compile(r"\b[a-z][a-z0-9_]*_[0-9a-f]{8}\b")


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def conversation_key(body: dict[str, Any]) -> tuple[str, list[str]]:
    """What a request asks, with tool call ids and handles made positional; and its handles, in order."""
    ids: dict[str, int] = {}
    messages = []
    for message in body.get("messages", []):
        item: dict[str, Any] = {"role": message["role"], "content": message.get("content")}
        calls = message.get("tool_calls") or []
        if calls:
            item["tool_calls"] = [
                [ids.setdefault(call["id"], len(ids)), call["function"]["name"], _arguments(call)] for call in calls
            ]
        if "tool_call_id" in message:
            item["tool_call_id"] = ids.setdefault(message["tool_call_id"], len(ids))
        messages.append(item)
    tools = sorted(tool["function"]["name"] for tool in body.get("tools", []))
    text = json.dumps({"messages": messages, "tools": tools, "stream": bool(body.get("stream"))}, sort_keys=True)
    handles: list[str] = []
    for found in _HANDLE.findall(text):
        if found not in handles:
            handles.append(found)
    for position, handle in enumerate(handles):
        text = text.replace(handle, f"<handle#{position + 1}>")
    return text, handles


def _arguments(call: dict[str, Any]) -> Any:
    arguments = call["function"]["arguments"]
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments


@dataclass
class RecordedServer:
    """The answers a server has left, and what it was sent."""

    answers: list[Exchange]
    borrowed: list[Exchange] = field(default_factory=list)
    drip: Exchange | None = None
    drip_delay: float = 0.02
    received: list[Received] = field(default_factory=list)
    served: list[int] = field(default_factory=list)
    """The numbers of the recorded exchanges served, in order."""
    gone: threading.Event = field(default_factory=threading.Event)
    """Set when a client left a dripping or stalled stream (it closed the connection)."""
    stall: tuple[str, Literal["hang", "drop"]] | None = None
    sent: threading.Event = field(default_factory=threading.Event)
    """Set when a stalled stream has sent all its text."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, body: dict[str, Any]) -> tuple[Exchange, list[tuple[str, str]]] | None:
        key, live = conversation_key(body)
        with self.lock:
            for exchange in self.answers:
                recorded_key, recorded = conversation_key(exchange.request)
                if recorded_key == key:
                    self.answers.remove(exchange)
                    self.served.append(exchange.number)
                    return exchange, list(zip(recorded, live, strict=True))
        return None


def _handler(server: RecordedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            server.received.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            if not self.path.endswith("/chat/completions"):
                self._send(404, "application/json", b'{"error": {"message": "not found"}}')
                return
            if server.drip is not None:
                self._drip(server.drip)
                return
            if server.stall is not None:
                self._stall(*server.stall)
                return
            found = server.take(body)
            if found is None and server.borrowed:
                with server.lock:
                    lent = server.borrowed.pop(0)
                    server.served.append(lent.number)
                found = lent, []
            if found is None:
                message = {"error": {"message": f"no recorded answer for: {conversation_key(body)[0][-600:]}"}}
                self._send(500, "application/json", json.dumps(message).encode())
                return
            exchange, handles = found
            answer = exchange.body.decode()
            for recorded, live in handles:
                answer = answer.replace(recorded, live)
            self._send(exchange.status, exchange.content_type, answer.encode())

        def _send(self, status: int, content_type: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _drip(self, exchange: Exchange) -> None:
            """The recorded text, a few characters per event, over and over, until the client leaves."""
            text = sse_text(exchange.body)[0] or "more "
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            head = {"id": "chatcmpl-drip", "object": "chat.completion.chunk", "created": 1_795_775_901, "model": "qwen"}
            try:
                for index in range(10**9):
                    piece = text[(index * 4) % len(text) :][:4]
                    chunk = {**head, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                    data = f"data: {json.dumps(chunk)}\n\n".encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                    time.sleep(server.drip_delay)
            except OSError:  # the client closed the connection: the request was cancelled
                server.gone.set()

        def _stall(self, text: str, end: Literal["hang", "drop"]) -> None:
            """`text`, a word per event, then no end: wait for the client to leave, or drop the connection."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            head = {"id": "chatcmpl-stall", "object": "chat.completion.chunk", "created": 1_795_918_676}
            for piece in re.findall(r"\S+\s*|\s+", text):
                chunk = {**head, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                data = f"data: {json.dumps(chunk)}\n\n".encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
            server.sent.set()
            if end == "drop":
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            with contextlib.suppress(OSError):
                self.rfile.read(1)  # b"" once the client closes its end
            server.gone.set()
            self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def recorded_server(
    recorded: Sequence[Exchange],
    numbers: Sequence[int] = (),
    *,
    borrowed: Sequence[int | Exchange] = (),
    drip: int | None = None,
    stall: tuple[str, Literal["hang", "drop"]] | None = None,
) -> Iterator[tuple[str, RecordedServer]]:
    """A server on loopback answering with the recorded exchanges `numbers`, then `borrowed` ones (numbers, or
    answers made otherwise: `toolcalls.replies_in`), or dripping exchange `drip`, or streaming `stall`'s text
    without an end: its base URL (`http://127.0.0.1:PORT/v1`) and its state."""
    state = RecordedServer(
        [recorded[n] for n in numbers],
        [recorded[n] if isinstance(n, int) else n for n in borrowed],
        drip=recorded[drip] if drip is not None else None,
        stall=stall,
    )
    http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    http.daemon_threads = True
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{http.server_address[1]}/v1", state
    finally:
        http.shutdown()
        http.server_close()
        thread.join()


def dead_url() -> str:
    """The base URL of a port on loopback where nothing listens (it was free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
