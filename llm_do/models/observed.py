"""`ObservedModel`: the one wrapper base for models that see each response of the model they wrap."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

__all__ = ["ObservedModel"]


class ObservedModel(WrapperModel):
    """Passes every request, streamed or not, to the wrapped model and hands each response to `responded`
    (a streamed one once the stream is complete). Subclasses override `responded`."""

    def responded(self, messages: list[ModelMessage], params: ModelRequestParameters, response: ModelResponse) -> None:
        """Called with each response to a request (`messages`, `params`), after the model gave it."""

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        response = await super().request(messages, model_settings, model_request_parameters)
        self.responded(messages, model_request_parameters, response)
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        async with super().request_stream(messages, model_settings, model_request_parameters, run_context) as stream:
            yield stream
        self.responded(messages, model_request_parameters, stream.get())
