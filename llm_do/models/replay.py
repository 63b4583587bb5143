"""`ReplayModel`: answers model requests from a recording, offline."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models import CompletedStreamedResponse, Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.native_tools import SUPPORTED_NATIVE_TOOLS, AbstractNativeTool
from pydantic_ai.settings import ModelSettings

from ..errors import listing
from .keys import HANDLE_PATTERN, RequestKey, request_key
from .recording import RecordedResponse, Recording

__all__ = ["AttachmentMismatch", "MissingResponse", "ReplayModel", "UnknownRecordedHandle", "replayed"]

_HANDLE_OR_PLACEHOLDER = re.compile(rf"{HANDLE_PATTERN.pattern}|<handle#([0-9]+)>")


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


class AttachmentMismatch(MissingResponse):
    """The recording answers this request for other files: an attachment changed since it was recorded."""

    def __init__(self, request: RequestKey, source: str, recorded: RecordedResponse) -> None:
        self.request = request
        self.recorded = recorded.attachments
        now = {info.name: info for info in request.attachments}
        then = {info.name: info for info in recorded.attachments}
        changes = [
            f"{name!r} was {then[name].size:,} bytes with sha256 {then[name].sha256[:12]}, now "
            f"{now[name].size:,} bytes with sha256 {now[name].sha256[:12]}"
            for name in then
            if name in now and then[name].sha256 != now[name].sha256
        ]
        changes += [f"{name!r} is no longer attached" for name in then if name not in now]
        changes += [f"{name!r} was not attached when it was recorded" for name in now if name not in then]
        LookupError.__init__(
            self,
            f"{source}: the attachments of {request.describe()} differ from the recorded ones: "
            f"{'; '.join(changes)}. Replay answers only the files it recorded: restore them, or re-record "
            f"with RecordingModel(<a real model>, {source!r}).",
        )


class UnknownRecordedHandle(MissingResponse):
    """A recorded response passes a handle that its recorded conversation never showed, so replay cannot map it: the
    recording has no answer replay can give (a `MissingResponse`, as an `AttachmentMismatch` is)."""

    def __init__(
        self, request: RequestKey, source: str, tool_name: str, handle: str, recorded: tuple[str, ...]
    ) -> None:
        self.request = request
        self.handle = handle
        shown = listing(recorded, ordered=False)
        LookupError.__init__(
            self,
            f"{source}: the recorded response to {request.describe()} passes handle {handle!r} to tool "
            f"{tool_name!r}, but the recorded conversation never showed that handle (it showed: {shown}). "
            "Replay maps each recorded handle to the live handle at the same position, so it cannot tell which "
            f"live handle this one stands for. Re-record it with RecordingModel(<a real model>, {source!r}); "
            "a scripted step writes '<handle#1>' for the conversation's first handle.",
        )


class _HandleMap:
    """Recorded handles (and `<handle#N>` placeholders) to the live conversation's handles, by position."""

    def __init__(self, found: RecordedResponse, request: RequestKey, source: str) -> None:
        self.live = request.handles
        self.recorded = found.handles
        self.mapping = dict(zip(found.handles, request.handles, strict=False))
        self.request = request
        self.source = source

    def text(self, text: str, tool_name: str | None) -> str:
        """`text` with its handles mapped; in a tool call (`tool_name`), an unmapped handle is an error."""

        def live(match: re.Match[str]) -> str:
            token = match.group(0)
            if match.group(1) is not None:  # <handle#N>
                number = int(match.group(1))
                if 1 <= number <= len(self.live):
                    return self.live[number - 1]
            elif token in self.mapping:
                return self.mapping[token]
            if tool_name is None:
                return token  # prose that merely looks like a handle stays as written
            raise UnknownRecordedHandle(self.request, self.source, tool_name, token, self.recorded)

        return _HANDLE_OR_PLACEHOLDER.sub(live, text)

    def value(self, value: Any, tool_name: str) -> Any:
        """Tool-call arguments (a dict, or JSON text: handles need no escaping) with their handles mapped."""
        if isinstance(value, str):
            return self.text(value, tool_name)
        if isinstance(value, list):
            return [self.value(item, tool_name) for item in value]
        if isinstance(value, dict):
            return {key: self.value(item, tool_name) for key, item in value.items()}
        return value


def replayed(found: RecordedResponse, request: RequestKey, source: str, *, keep_ids: bool = False) -> ModelResponse:
    """The recorded response `found` as the answer to `request`: its handles mapped to the live conversation's,
    and its tool calls given ids derived from the request's key (or, with `keep_ids`, the recorded ids)."""
    handles = _HandleMap(found, request, source)
    parts = [
        replace(
            part,
            tool_call_id=part.tool_call_id if keep_ids else f"replay_{request.key[:12]}_{index}",
            args=handles.value(part.args, part.tool_name),
        )
        if isinstance(part, ToolCallPart)
        else replace(part, content=handles.text(part.content, None))
        if isinstance(part, TextPart)
        else part
        for index, part in enumerate(found.response.parts)
    ]
    return replace(found.response, parts=parts)


class ReplayModel(Model):
    """A model that answers each request with the response recorded for it; it never goes online.

    Requests are matched by `llm_do.models.keys.request_key`, a hash of the conversation without
    volatile fields, so nested calls, parallel tool calls and concurrent runs replay the same
    whatever order they run in. Tool calls in a replayed response get ids derived from that key, and
    the handles they pass are the live conversation's handles at the recorded positions.
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

    @classmethod
    def supported_native_tools(cls) -> frozenset[type[AbstractNativeTool]]:
        """Every native tool: a replay answers with what the recorded model answered, native tool parts included."""
        return SUPPORTED_NATIVE_TOOLS

    def answer(self, messages: list[ModelMessage], params: ModelRequestParameters) -> ModelResponse:
        """The recorded response to this request, with fresh deterministic tool call ids and the live handles."""
        request = request_key(messages, params)
        found = self.recording.find(request)
        if found is None:
            other = next((item for item in self.recording.responses if item.differs_only_in_attachments(request)), None)
            if other is not None:
                raise AttachmentMismatch(request, self.source, other)
            raise MissingResponse(request, self.source)
        return replayed(found, request, self.source)

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
