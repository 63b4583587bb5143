"""Model limits in code and settings: a reply cut off at its token cap, a tool call cut off, the run's token budget,
and the readable problem of a wrong limit. (In a project's files: tests/project/test_project_limits.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from llm_do import (
    AgentEntry,
    InvalidSettings,
    LimitExceeded,
    LlmDoSettings,
    ModelLimits,
    Runtime,
    RuntimeConfig,
    run_report,
)
from llm_do.guards import ModelRules, ReplyTooLong, RequestTookTooLong, RunOverLimit


def cut(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("The answer is")], finish_reason="length")


def cut_call(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart("add", '{"amount": 4')], finish_reason="length")


def wordy(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        usage = RequestUsage(input_tokens=600, output_tokens=20)
        return ModelResponse(parts=[ToolCallPart("add", {"amount": 1})], usage=usage)
    return ModelResponse(parts=[TextPart("Done.")], usage=RequestUsage(input_tokens=700, output_tokens=5))


def add(amount: int) -> int:
    return amount


async def test_a_reply_cut_off_at_the_token_cap_is_flagged_naming_the_limit() -> None:
    seen: list[object] = []

    def capped(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info.model_settings)
        return cut(messages, info)

    writer = AgentEntry(Agent(FunctionModel(capped)), name="writer")
    async with Runtime(None, entries=[writer], config=RuntimeConfig(limits=ModelLimits(max_tokens=64))) as runtime:
        result = await runtime.run("writer", "Write.")
    assert seen == [{"max_tokens": 64}]
    assert result.output == "The answer is"
    assert result.calls[0].warnings == (
        "the reply was cut off at max_tokens=64 (LLM_DO_LIMITS__MAX_TOKENS): the output is incomplete",
    )


async def test_a_tool_call_cut_off_at_the_token_cap_ends_the_run_naming_the_limit() -> None:
    rules = ModelRules({"max_tokens": 32}, {"max_tokens": "limits.max_tokens in adder.worker"})
    adder = AgentEntry(Agent(FunctionModel(cut_call), tools=[add]), name="adder", rules=rules)
    async with Runtime(None, entries=[adder]) as runtime:
        with pytest.raises(ReplyTooLong) as raised:
            await runtime.run("adder", "Add four.")
    assert str(raised.value) == (
        "a reply of entry 'adder' reached 32 tokens before it was complete (a tool call was cut off) (limit "
        "max_tokens=32, set by limits.max_tokens in adder.worker). Raise the limit if replies this long are expected."
    )
    assert (raised.value.limit, raised.value.value, raised.value.set_by) == (
        "max_tokens",
        32,
        "limits.max_tokens in adder.worker",
    )


async def test_the_run_stops_at_its_token_budget_nested_calls_included() -> None:
    adder = AgentEntry(Agent(FunctionModel(wordy), tools=[add]), name="adder")
    config = RuntimeConfig(limits=ModelLimits(run_tokens=1000))
    async with Runtime(None, entries=[adder], config=config) as runtime:
        with pytest.raises(RunOverLimit) as raised:
            await runtime.run("adder", "Add one.")
    assert isinstance(raised.value, LimitExceeded)
    assert str(raised.value).startswith("the run reached its limit of 1000 tokens in entry 'adder' (Exceeded the ")
    assert "(limit run_tokens=1000, set by LLM_DO_LIMITS__RUN_TOKENS)" in str(raised.value)
    report = run_report(raised.value)
    assert report is not None and report.calls[0].outcome == "error"


async def endless(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    """A runaway reply: words without end, never waiting (the stream's readers are where the run waits)."""
    count = 0
    while True:
        count += 1
        yield f"word{count} "


async def test_a_streamed_runaway_reply_ends_at_request_timeout_every_time() -> None:
    # The deadline's cancellation lands wherever the reader of the stream waits, often outside the request's
    # own frames (pydantic-ai closes the request instead of throwing into it): it is named as the limit
    # every time, never a bare CancelledError.
    runaway = AgentEntry(Agent(FunctionModel(stream_function=endless)), name="runaway")
    config = RuntimeConfig(limits=ModelLimits(request_timeout=0.02))
    errors: list[BaseException] = []
    async with Runtime(None, entries=[runaway], config=config) as runtime:
        for _ in range(25):
            try:
                async with runtime.stream("runaway", "Go on.") as run:
                    async for _event in run:
                        pass
                    await run.result()
            except BaseException as error:  # a CancelledError here is the failure being tested
                errors.append(error)
    assert [type(error) for error in errors] == [RequestTookTooLong] * 25
    assert str(errors[0]).startswith("a model request of entry 'runaway' ")
    assert "(limit request_timeout=0.02, set by LLM_DO_LIMITS__REQUEST_TIMEOUT)" in str(errors[0])


def test_limits_are_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DO_LIMITS__REQUEST_TIMEOUT", "120")
    monkeypatch.setenv("LLM_DO_SUSPECT_OUTPUT", "retry")
    config = RuntimeConfig.from_settings()
    assert (config.limits.request_timeout, config.limits.max_tokens, config.suspect_output) == (120, 8192, "retry")
    monkeypatch.setenv("LLM_DO_LIMITS__MAX_TOKENS", "-1")
    with pytest.raises(InvalidSettings) as raised:
        LlmDoSettings()
    assert str(raised.value).startswith(
        "invalid setting LLM_DO_LIMITS__MAX_TOKENS='-1': expected greater than or equal to 0\n"
    )
