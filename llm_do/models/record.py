"""`RecordingModel`: passes requests to a real model and records each response under its request key."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters

from .keys import request_key
from .observed import ObservedModel
from .recording import Recording, RecordingError

__all__ = ["RecordingModel"]

logger = logging.getLogger("llm_do.models")


def _shown(response: ModelResponse) -> list[Any]:
    """What replay shows of a response: its parts, tool call ids and timestamps aside."""
    return [
        (part.part_kind, getattr(part, "tool_name", None), getattr(part, "args", None), getattr(part, "content", None))
        for part in response.parts
    ]


class RecordingModel(ObservedModel):
    """Wraps `wrapped` and records the response to every request it answers, for `ReplayModel`.

    Nothing is written until `save()` (or the end of `async with RecordingModel(...)`, even on error):
    the file is then replaced atomically, keeping the entries it already had for other requests (a file that
    cannot be read as a recording is replaced whole, with a warning).
    Only responses and what identifies their requests are recorded: no API keys, headers or settings.
    """

    def __init__(self, wrapped: Model, path: str | os.PathLike[str]) -> None:
        super().__init__(wrapped)
        self.path = Path(path)
        self.recording = Recording()
        """What this model recorded so far (not yet merged with the file)."""

    def responded(
        self, messages: list[ModelMessage], params: ModelRequestParameters, response: ModelResponse, note: Any
    ) -> None:
        if response.state != "complete":
            return
        request = request_key(messages, params)
        earlier = self.recording.record(request, response)
        if earlier is not None and _shown(earlier.response) != _shown(response):
            logger.warning(
                "%s: %s was asked again and answered differently; the recording keeps the first answer, and "
                "replay gives it each time the request is asked (make the requests differ, e.g. in the prompt, "
                "to record both answers)",
                self.path,
                request.describe(),
            )

    def save(self) -> Recording:
        """Merge what was recorded into the file at `path` (atomically) and return the file's new content."""
        try:
            older = Recording.load(self.path) if self.path.exists() else Recording()
        except RecordingError as error:  # an unreadable or older-format file is replaced, not merged
            logger.warning("%s. The file was replaced by the new recording: its entries were not kept", error)
            older = Recording()
        merged = self.recording.merged_into(older)
        merged.save(self.path)
        return merged

    async def __aenter__(self) -> RecordingModel:
        await super().__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        try:
            self.save()
        finally:
            await super().__aexit__(exc_type, exc_val, exc_tb)
        return None
