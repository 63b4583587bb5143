"""`ReplayModel`: answers model requests from a recording, offline."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models import CompletedStreamedResponse, Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.settings import ModelSettings

from .keys import RequestKey, request_key
from .recording import Recording

__all__ = ["MissingResponse", "ReplayModel"]


class MissingResponse(LookupError):
    """The recording has no answer for a request the agent made."""

    def __init__(self, request: RequestKey, source: str) -> None:
        self.request = request
        super().__init__(
            f"{source} has no recorded response for {request.describe()} (key {request.key[:12]}). "
            "The conversation differs from the one recorded (prompt, instructions, tools or tool results "
            "changed). Re-record it by running the same code with "
            f"RecordingModel(<a real model>, {source!r}) as the model."
        )


class ReplayModel(Model):
    """A model that answers each request with the response recorded for it; it never goes online.

    Requests are matched by `llm_do.models.keys.request_key`, a hash of the conversation without
    volatile fields, so nested calls, parallel tool calls and concurrent runs replay the same
    whatever order they run in. Tool calls in a replayed response get ids derived from that key.
    Both `request` and `request_stream` are supported (a stream delivers each part whole).
    """

    def __init__(self, recording: Recording, *, source: str = "the recording") -> None:
        super().__init__()
        self.recording = recording
        self.source = source

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ReplayModel:
        """Replay the recording file at `path` (raises `RecordingError` if it cannot be read)."""
        return cls(Recording.load(path), source=str(path))

    @property
    def model_name(self) -> str:
        return f"replay:{self.source}"

    @property
    def system(self) -> str:
        return "replay"

    def answer(self, messages: list[ModelMessage], params: ModelRequestParameters) -> ModelResponse:
        """The recorded response to this request, with fresh deterministic tool call ids."""
        request = request_key(messages, params)
        found = self.recording.find(request)
        if found is None:
            raise MissingResponse(request, self.source)
        parts = [
            replace(part, tool_call_id=f"replay_{request.key[:12]}_{index}") if isinstance(part, ToolCallPart) else part
            for index, part in enumerate(found.response.parts)
        ]
        return replace(found.response, parts=parts)

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        return self.answer(messages, model_request_parameters)

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        response = self.answer(messages, model_request_parameters)
        yield CompletedStreamedResponse(response, model_request_parameters=model_request_parameters, replay_events=True)
