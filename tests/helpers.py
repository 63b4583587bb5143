"""Scripted-model helpers for the test suite (offline and deterministic)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from llm_do import RunReport, Runtime, run_report

Step = ModelResponse | Callable[[list[ModelMessage]], ModelResponse]


def call(name: str, **args: Any) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(name, args)])


def calls(*pairs: tuple[str, dict[str, Any]]) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(name, args) for name, args in pairs])


def text(content: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(content)])


def returns(messages: list[ModelMessage]) -> list[Any]:
    """Contents of tool returns and retry prompts in the last request."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    out: list[Any] = []
    for part in last.parts:
        if isinstance(part, ToolReturnPart | RetryPromptPart):
            out.append(part.content)
    return out


def prompt(messages: list[ModelMessage]) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""


def scripted(*steps: Step) -> FunctionModel:
    """A model that answers request i of each agent run with steps[i]."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        index = sum(isinstance(message, ModelResponse) for message in messages)
        if index >= len(steps):
            raise AssertionError(f"script ran out after {len(steps)} steps")
        step = steps[index]
        return step if isinstance(step, ModelResponse) else step(messages)

    return FunctionModel(respond)


def by_prompt(
    script: Callable[[str, int, list[ModelMessage]], ModelResponse], *, threads: bool = True
) -> FunctionModel:
    """A model whose answer depends on the run's prompt and how many responses it already gave.

    pydantic-ai runs a sync model function in anyio's worker threads, and each idle thread keeps
    its last job (the messages it was given) until it takes another. `threads=False` answers on the
    event loop instead, as a real model's async client does: for tests that count what stays alive.
    """

    def answer(messages: list[ModelMessage]) -> ModelResponse:
        index = sum(isinstance(message, ModelResponse) for message in messages)
        return script(prompt(messages), index, messages)

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return answer(messages)

    async def respond_on_the_loop(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return answer(messages)

    return FunctionModel(respond if threads else respond_on_the_loop)


async def cancelled_run_report(runtime: Runtime, entry: str, input_data: Any, started: asyncio.Event) -> RunReport:
    """Run `entry`, cancel it once `started` is set, and return the report its cancellation carries."""
    import pytest  # here: the job workers import this module, and pytest costs them about 0.25 s

    started.clear()
    task = asyncio.create_task(runtime.run(entry, input_data))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as raised:
        await task
    report = run_report(raised.value)
    assert report is not None and report.outcome == "cancelled"
    return report
