"""Watching a run as it goes: a wrapper model that reports each model request and response.

Every agent of a loaded project gets its model wrapped in a `WatchedModel` (`watch_project`). The
wrapper learns which call asks (the `CallScope` pydantic-ai hands the agent as `deps`) and tells a
`Board`: the calls seen so far with their entry, depth, model and usage so far (for the live tree;
counted as `CallRecord.usage` counts, which the final reports show), and, for `-v`, the tool calls a
response asks for and their results. Function entries make no model requests: they appear in the
final tree (from `RunResult.calls`), not live.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import (
    AgentStreamEvent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RunUsage

from ..call import current_scope
from ..entries import AgentEntry
from ..project import Project
from ..project.models import model_id
from ..run import usage_of

__all__ = ["Board", "LiveCall", "WatchedModel", "watch_project"]


@dataclass
class LiveCall:
    """One call of the run, as far as its model requests show it."""

    id: str
    parent: str | None
    entry: str
    depth: int
    model: str
    usage: RunUsage = field(default_factory=RunUsage)
    """What this call used so far: its responses, and the tool results its requests carried back."""


Echo = Callable[[str, str, str], None]
"""`echo(kind, where, text)`: kind is `call`, `result` or `text`; where is the entry chain."""


class Board:
    """The calls seen during a run, and what to echo of their tool calls (`verbosity` 1); `stream`
    echoes the model's text as it streams (`verbosity` 2)."""

    def __init__(self, *, verbosity: int = 0, echo: Echo | None = None) -> None:
        self.verbosity = verbosity
        self.echo = echo
        self.calls: dict[str, LiveCall] = {}
        self.active: str | None = None
        """The call that made the latest request."""

    def clear(self) -> None:
        self.calls.clear()
        self.active = None

    def models(self) -> dict[str, str]:
        """Model name by call id."""
        return {call.id: call.model for call in self.calls.values()}

    def model_of(self, call_id: str) -> str | None:
        """The model the call asked, if it asked one."""
        call = self.calls.get(call_id)
        return None if call is None else call.model

    def request(self, scope: Any, model: str, messages: list[ModelMessage]) -> None:
        call_id = str(getattr(scope, "id", "?"))
        if call_id not in self.calls:
            parent = getattr(scope, "parent", None)
            self.calls[call_id] = LiveCall(
                call_id,
                None if parent is None else str(parent.id),
                _entry_name(scope),
                int(getattr(scope, "depth", 0)),
                model,
            )
        self.active = call_id
        if not messages or not isinstance(messages[-1], ModelRequest):
            return
        self.calls[call_id].usage.tool_calls += usage_of(messages[-1:]).tool_calls
        results = [part for part in messages[-1].parts if isinstance(part, ToolReturnPart)]
        if self.verbosity >= 1 and self.echo is not None:
            for part in results:
                self.echo("result", _where(scope), f"{part.tool_name} -> {_short(part.model_response_str())}")

    def response(self, scope: Any, response: ModelResponse) -> None:
        call = self.calls.get(str(getattr(scope, "id", "?")))
        if call is not None:
            call.usage.incr(usage_of([response]))
        if self.echo is None:
            return
        for part in response.parts:
            if isinstance(part, ToolCallPart) and self.verbosity >= 1:
                self.echo("call", _where(scope), f"{part.tool_name}({_short(part.args_as_json_str())})")

    async def stream(self, ctx: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
        """An event stream handler (`-vv`): echo the model's text as it streams, a line at a time."""
        where = _where(ctx.deps)
        pending = ""
        async for event in events:
            if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                pending += event.part.content
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                pending += event.delta.content_delta
            elif isinstance(event, PartEndEvent) and pending:
                pending += "\n"
            *lines, pending = pending.split("\n")
            for line in lines:
                if line.strip() and self.echo is not None:
                    self.echo("text", where, line)
        if pending.strip() and self.echo is not None:
            self.echo("text", where, pending)


class WatchedModel(WrapperModel):
    """Passes every request to `wrapped` and tells `board` about it and its response."""

    def __init__(self, wrapped: Model, board: Board) -> None:
        super().__init__(wrapped)
        self.board = board
        name = model_id(wrapped)  # by name: a model that is built when first used stays unbuilt
        system = name.partition(":")[0]
        self.watched_id = name.split(":", 1)[1] if name.startswith(f"{system}:{system}:") else name

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        scope = current_scope()
        self.board.request(scope, self.watched_id, messages)
        response = await super().request(messages, model_settings, model_request_parameters)
        self.board.response(scope, response)
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        scope = run_context.deps if run_context is not None else current_scope()
        self.board.request(scope, self.watched_id, messages)
        async with super().request_stream(messages, model_settings, model_request_parameters, run_context) as stream:
            yield stream
        self.board.response(scope, stream.get())


def watch_project(project: Project, board: Board) -> None:
    """Wrap the model of every agent entry of `project` to report to `board`."""
    for entry in project.entries.values():
        if isinstance(entry, AgentEntry) and isinstance(entry.agent.model, Model):
            entry.agent.model = WatchedModel(entry.agent.model, board)


def _entry_name(scope: Any) -> str:
    entry = getattr(scope, "entry", None)
    return str(getattr(entry, "name", "?"))


def _where(scope: Any) -> str:
    chain = getattr(scope, "chain", None)
    return " > ".join(chain()) if callable(chain) else _entry_name(scope)


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
