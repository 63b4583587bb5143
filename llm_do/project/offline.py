"""The model named `test`: pydantic-ai's `TestModel`, which leaves a worker's native tools out of its requests.

Imported only when a project asks for `test` (`models.resolve_model`): it imports pydantic-ai's test models.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import ModelRequestParameters, StreamedResponse
from pydantic_ai.models.test import TestModel

if TYPE_CHECKING:
    from pydantic_ai import RunContext
    from pydantic_ai.settings import ModelSettings

__all__ = ["OfflineTestModel"]


class OfflineTestModel(TestModel):
    """The model named `test`: pydantic-ai's `TestModel`, which leaves native tools (web search, code execution, ...)
    out of its requests. pydantic-ai's claims every native tool, so that loading finds no model that cannot run one,
    then fails the first request of a worker that has any (`UserError`): offline, it cannot run them. `left_out`
    names those it left out, which `llm-do run -m test` notes."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.left_out: list[str] = []
        """The kinds of the native tools it left out of a request (`web_search`, ...), each once."""

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        return await super().request(messages, model_settings, self._without_native_tools(model_request_parameters))

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        parameters = self._without_native_tools(model_request_parameters)
        async with super().request_stream(messages, model_settings, parameters, run_context) as streamed:
            yield streamed

    def _without_native_tools(self, parameters: ModelRequestParameters) -> ModelRequestParameters:
        if not parameters.native_tools:
            return parameters
        for tool in parameters.native_tools:
            if tool.kind not in self.left_out:
                self.left_out.append(tool.kind)
        return replace(parameters, native_tools=[])
