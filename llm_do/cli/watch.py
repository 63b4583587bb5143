"""Watching a run as it goes: the command reads the run's live stream (`Runtime.stream`).

A `Board` hears every event of the run: the calls of agents with their entry, depth, model and usage
so far (for the live tree; counted as `CallRecord.usage` counts, which the final reports show),
and, for `-v`, the tool calls a response asks for and their results and the warnings about a call's
replies, and for `-vv` the model's text as it streams: each line when it ends, and the text of a line not ended
yet once it has waited `flush_after` seconds (a reply that is one long line shows as it comes), and whatever is
left when the run ends (`flush`), however it ends. Function entries make no model requests: they appear in the
final tree (from `RunResult.calls`), not live.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import (
    FunctionToolResultEvent,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    NativeToolCallPart,
    NativeToolReturnPart,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model
from pydantic_ai.usage import RunUsage
from pydantic_core import to_json

from ..errors import shortened
from ..events import AgentStarted, CallEvent, CallTag, CallWarning, Event, ResponseCompleted
from ..project.models import model_id
from ..results import LogEntry
from ..run import usage_of

__all__ = ["Board", "LiveCall"]


@dataclass
class LiveCall:
    """One call of the run, as far as its agent's events show it."""

    id: str
    parent: str | None
    entry: str
    depth: int
    model: str
    usage: RunUsage = field(default_factory=RunUsage)
    """What this call used so far: its responses, and the tool calls that ran."""


Echo = Callable[[str, str, str], None]
"""`echo(kind, where, text)`: kind is `call`, `result`, `text` or `warning`; where is the entry chain."""


FLUSH_AFTER = 0.5
"""Seconds the streamed text of a line not ended yet waits before it is shown anyway (`-vv`)."""


class Board:
    """The calls seen during a run, and what to echo of their tool calls (`verbosity` 1) and of the
    model's text as it streams (`verbosity` 2: each line, and a line's text so far after `flush_after` seconds)."""

    def __init__(
        self,
        *,
        verbosity: int = 0,
        echo: Echo | None = None,
        flush_after: float = FLUSH_AFTER,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.verbosity = verbosity
        self.echo = echo
        self.flush_after = flush_after
        self.clock = clock
        self.calls: dict[str, LiveCall] = {}
        self.active: str | None = None
        """The call that asked its model last."""
        self._text: dict[str, tuple[CallTag, str, float]] = {}
        """Text streamed by each call and not echoed yet (`-vv`), with the call and when it began to wait."""
        self.native: dict[str, list[dict[str, Any]]] = {}
        """The native tool calls (run at the model's provider: web search, ...) of each call, by call id: each
        `{"tool", "args", "result"}`, the result `None` until the provider returns one."""

    def clear(self) -> None:
        self.flush()
        self.calls.clear()
        self.active = None
        self.native.clear()

    def flush(self) -> None:
        """Echo the streamed text not echoed yet, of every call: the run ended (or a response did) before its line
        did."""
        pending, self._text = self._text, {}
        for tag, text, _ in pending.values():
            if text.strip() and self.echo is not None:
                self.echo("text", _where(tag), text)

    def native_calls(self, call_id: str) -> list[dict[str, Any]]:
        """The native tool calls the call's model made at its provider, in order."""
        return self.native.get(call_id, [])

    def models(self) -> dict[str, str]:
        """Model name by call id."""
        return {call.id: call.model for call in self.calls.values()}

    def model_of(self, call_id: str) -> str | None:
        """The model the call asked, if it asked one."""
        call = self.calls.get(call_id)
        return None if call is None else call.model

    def see(self, event: Event) -> None:
        """One event of the run's stream."""
        if isinstance(event, CallEvent):
            self._model_event(event)
        elif isinstance(event, ResponseCompleted):
            self._responded(event)
        elif isinstance(event, AgentStarted):
            tag = event.call
            self.calls[tag.id] = LiveCall(tag.id, tag.parent, tag.entry, tag.depth, _shown(event.model))
            self.active = tag.id
        elif isinstance(event, CallWarning) and self.verbosity >= 1 and self.echo is not None:
            self.echo("warning", _where(event.call), event.message)

    def _model_event(self, event: CallEvent) -> None:
        tag, inner = event.call, event.event
        if isinstance(inner, FunctionToolResultEvent):
            part = inner.part
            call = self.calls.get(tag.id)
            if call is not None:
                call.usage.tool_calls += usage_of([ModelRequest(parts=[part])]).tool_calls
            if isinstance(part, ToolReturnPart) and self.verbosity >= 1 and self.echo is not None:
                self.echo(
                    "result",
                    _where(tag),
                    part.tool_name + " -> " + shortened(part.model_response_str(), 200, one_line=True),
                )
            return
        self.active = tag.id
        if self.verbosity < 2:
            return
        if isinstance(inner, PartStartEvent) and isinstance(inner.part, TextPart):
            self._stream_text(tag, inner.part.content)
        elif isinstance(inner, PartDeltaEvent) and isinstance(inner.delta, TextPartDelta):
            self._stream_text(tag, inner.delta.content_delta)
        elif isinstance(inner, PartEndEvent) and tag.id in self._text:
            self._stream_text(tag, "\n")

    def _stream_text(self, tag: CallTag, text: str) -> None:
        now = self.clock()
        _, before, since = self._text.get(tag.id, (tag, "", now))
        *lines, rest = (before + text).split("\n")
        if lines:
            since = now
        for line in lines:
            if line.strip() and self.echo is not None:
                self.echo("text", _where(tag), line)
        if rest and now - since >= self.flush_after:
            if rest.strip() and self.echo is not None:
                self.echo("text", _where(tag), rest)
            rest, since = "", now
        if rest:
            self._text[tag.id] = (tag, rest, since)
        else:
            self._text.pop(tag.id, None)

    def _responded(self, event: ResponseCompleted) -> None:
        tag, response = event.call, event.response
        _, pending, _ = self._text.pop(tag.id, (tag, "", 0.0))
        if pending.strip() and self.echo is not None:
            self.echo("text", _where(tag), pending)
        call = self.calls.get(tag.id)
        if call is not None:
            call.usage.incr(usage_of([response]))
        self._native(tag.id, response.parts)
        if self.echo is None or self.verbosity < 1:
            return
        for part in response.parts:
            if isinstance(part, NativeToolCallPart):
                self.echo(
                    "call",
                    _where(tag),
                    f"{part.tool_name}(" + shortened(part.args_as_json_str(), 200, one_line=True) + ") [native: "
                    f"run by {part.provider_name or 'the provider'}]",
                )
            elif isinstance(part, NativeToolReturnPart):
                self.echo(
                    "result", _where(tag), part.tool_name + " -> " + shortened(_content(part), 200, one_line=True)
                )
            elif isinstance(part, ToolCallPart):
                self.echo(
                    "call",
                    _where(tag),
                    f"{part.tool_name}(" + shortened(part.args_as_json_str(), 200, one_line=True) + ")",
                )

    def read_log(self, log: Iterable[LogEntry]) -> None:
        """Note the native tool calls of the run's message log, for the calls whose responses the stream did not
        show."""
        for entry in log:
            if entry.call_id in self.native:
                continue
            for message in entry.messages:
                if isinstance(message, ModelResponse):
                    self._native(entry.call_id, message.parts)

    def _native(self, call_id: str, parts: Sequence[ModelResponsePart]) -> None:
        """Note the native tool calls of a response, and the results the provider returned in it."""
        for part in parts:
            if isinstance(part, NativeToolCallPart):
                made = self.native.setdefault(call_id, [])
                made.append(
                    {"tool": part.tool_name, "id": part.tool_call_id, "args": part.args_as_dict(), "result": None}
                )
            elif isinstance(part, NativeToolReturnPart):
                made = self.native.setdefault(call_id, [])
                found = next((item for item in made if item["id"] == part.tool_call_id), None)
                if found is None:
                    found = {"tool": part.tool_name, "id": part.tool_call_id, "args": None, "result": None}
                    made.append(found)
                found["result"] = shortened(_content(part), 2000, one_line=True)


def _content(part: NativeToolReturnPart) -> str:
    """What a native tool returned, as text."""
    content = part.content
    if isinstance(content, str):
        return content
    return to_json(content, fallback=str).decode()


def _shown(model: Model | str | None) -> str:
    """The model's name as the command shows it (`replay:PATH`, `openai:gpt-5.2`)."""
    if model is None:
        return "-"
    name = model_id(model)
    system = name.partition(":")[0]
    return name.split(":", 1)[1] if name.startswith(f"{system}:{system}:") else name


def _where(tag: CallTag) -> str:
    return " > ".join(tag.chain)
