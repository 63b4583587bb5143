"""`ObservedModel`: the one wrapper base for models that see each response of the model they wrap."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import CompletedStreamedResponse, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

__all__ = ["ObservedModel"]


class ObservedModel(WrapperModel):
    """Passes every request, streamed or not, to the wrapped model unless `answer` gives its response, and
    hands each response the model gave to `responded` (a streamed one once the stream is complete).
    Subclasses override `answer` and `responded`."""

    def answer(
        self, messages: list[ModelMessage], settings: ModelSettings | None, params: ModelRequestParameters
    ) -> tuple[ModelResponse | None, Any]:
        """The response to give without asking the wrapped model (None: ask it), and a note handed to
        `responded` with the model's response."""
        return None, None

    def responded(
        self, messages: list[ModelMessage], params: ModelRequestParameters, response: ModelResponse, note: Any
    ) -> None:
        """Called with each response the wrapped model gave to a request (`messages`, `params`)."""

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        given, note = self.answer(messages, model_settings, model_request_parameters)
        if given is not None:
            return given
        response = await super().request(messages, model_settings, model_request_parameters)
        self.responded(messages, model_request_parameters, response, note)
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        given, note = self.answer(messages, model_settings, model_request_parameters)
        if given is not None:
            params = model_request_parameters
            yield CompletedStreamedResponse(given, model_request_parameters=params, replay_events=True)
            return
        async with super().request_stream(messages, model_settings, model_request_parameters, run_context) as stream:
            yield stream
        self.responded(messages, model_request_parameters, stream.get(), note)
