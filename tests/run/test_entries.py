"""Entries: agents, orchestrating functions, agent-as-tool with typed input, chat continuation."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    AgentStreamEvent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage

from llm_do import (
    AgentEntry,
    CallScope,
    ConfigurationError,
    Runtime,
    RuntimeConfig,
    ToolsetError,
    entry,
)
from llm_do.testing import Step, Turn, answering, response, tool_call

from ..counter import Counter


class Order(BaseModel):
    sku: str
    quantity: int


async def test_function_entry_orchestrates_tools_and_agents() -> None:
    echo = AgentEntry(Agent(answering(lambda turn: f"echo:{turn.prompt}")), name="echo")

    @entry(toolsets=["counter", "echo"])
    async def pipeline(scope: CallScope, input_data: str) -> str:
        """Count twice, then ask echo."""
        await scope.call_tool("add", {"amount": 2})
        total = await scope.call_tool("add", {"amount": "3"})  # validated like a model's call
        reply = await scope.call_agent("echo", f"{input_data}={total}")
        return str(reply)

    assert pipeline.description == "Count twice, then ask echo."
    async with Runtime(None, entries=[pipeline, echo], toolsets={"counter": Counter}) as runtime:
        result = await runtime.run(pipeline, "sum")
    assert result.output == "echo:sum=5"
    assert [(r.entry, r.depth, r.parent) for r in result.calls] == [
        ("pipeline", 0, None),
        ("echo", 1, "call_1"),
    ]


async def test_call_tool_reports_an_unknown_tool_with_the_available_ones() -> None:
    @entry(toolsets=["counter"])
    async def lost(scope: CallScope, input_data: str) -> Any:
        return await scope.call_tool("substract", {})

    async with Runtime(None, entries=[lost], toolsets={"counter": Counter}) as runtime:
        with pytest.raises(ToolsetError, match="entry 'lost' has no tool 'substract'; its tools are: add"):
            await runtime.run("lost", "x")


async def test_agent_as_tool_with_typed_input() -> None:
    seen: list[str] = []

    def warehouse_model(turn: Turn) -> Step:
        seen.append(turn.prompt)
        order = Order.model_validate_json(turn.prompt)
        return f"reserved {order.quantity} x {order.sku}"

    warehouse = AgentEntry(
        Agent(answering(warehouse_model)), name="warehouse", schema_in=Order, description="Reserve stock."
    )
    captured: list[dict[str, Any]] = []

    def shop(turn: Turn) -> Step:
        if turn.step == 0:
            [tool_def] = turn.info.function_tools
            captured.append(tool_def.parameters_json_schema)
            assert tool_def.description == "Reserve stock."
            return tool_call("warehouse", sku="pen", quantity=3)
        return str(turn.returns[0])

    shop_entry = AgentEntry(Agent(answering(shop)), name="shop", toolsets=["warehouse"])
    async with Runtime(None, entries=[shop_entry, warehouse]) as runtime:
        result = await runtime.run("shop", "buy pens")
        direct = await runtime.run("warehouse", {"sku": "ink", "quantity": 1})
        with pytest.raises(ToolsetError, match="entry 'warehouse': input does not match Order"):
            await runtime.run("warehouse", {"sku": "ink"})
    assert result.output == "reserved 3 x pen"
    assert set(captured[0]["properties"]) == {"sku", "quantity"}  # its fields (no files to hand on: no attachments)
    assert direct.output == "reserved 1 x ink"


async def test_chat_continues_at_depth_zero_while_nested_calls_start_fresh() -> None:
    histories: dict[str, list[int]] = {"chat": [], "helper": []}

    def chat_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        histories["chat"].append(len(messages))
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        if any(isinstance(p, UserPromptPart) for p in last.parts):
            return response(tool_call("helper", input="lookup"))
        return response(f"turn with {len(messages)} messages")

    def helper_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        histories["helper"].append(len(messages))
        return response("found")

    chat = AgentEntry(Agent(FunctionModel(chat_model)), name="chat", toolsets=["helper"])
    helper = AgentEntry(Agent(FunctionModel(helper_model)), name="helper")
    async with Runtime(None, entries=[chat, helper]) as runtime:
        first = await runtime.run("chat", "hello")
        second = await runtime.run("chat", "and again", message_history=first.messages)
    assert first.output == "turn with 3 messages"
    assert second.output == "turn with 7 messages", "the second turn sees the first turn's messages"
    assert len(second.messages) == 8
    assert histories["helper"] == [1, 1], "nested calls never inherit the parent's history"


async def test_runtime_model_is_used_when_the_agent_has_none() -> None:
    model = FunctionModel(lambda messages, info: response("from the runtime's model"))
    bare = AgentEntry(Agent(), name="bare")
    async with Runtime(None, entries=[bare], config=RuntimeConfig(model=model)) as runtime:
        assert (await runtime.run("bare", "hi")).output == "from the runtime's model"


NO_MODEL = (
    "entry 'bare' has no model: its agent names none, and the runtime has none. Set LLM_DO_MODEL (provider:name, "
    "like openai:gpt-5.2), give the agent a model (Agent('provider:name', ...)), or give the runtime one "
    "(RuntimeConfig(model=...)); a test can put one in place with agent.override(model=...)"
)


async def test_an_entry_without_a_model_on_a_runtime_without_one_is_told_where_a_model_comes_from(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bare = AgentEntry(Agent(instructions="Answer."), name="bare")
    other = AgentEntry(Agent(instructions="Answer."), name="other")
    with caplog.at_level(logging.WARNING, logger="llm_do"):
        runtime = Runtime(None, entries=[bare])  # a warning at load: a model may still be put in place for a run
    assert [record.getMessage() for record in caplog.records] == [NO_MODEL]
    async with runtime:
        with pytest.raises(ConfigurationError) as raised:
            await runtime.run("bare", "hi")
        assert str(raised.value) == NO_MODEL
        with bare.agent.override(model=FunctionModel(lambda messages, info: response("put in place"))):
            assert (await runtime.run("bare", "hi")).output == "put in place"
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="llm_do"):
        Runtime(None, entries=[bare, other])
        Runtime(None, entries=[bare], config=RuntimeConfig(model="test"))  # the runtime's model: nothing to say
    assert [record.getMessage() for record in caplog.records] == [
        NO_MODEL.replace("entry 'bare' has", "entries 'bare', 'other' have").replace(
            "its agent names", "their agents name"
        )
    ]


async def test_text_entries_refuse_structured_input_with_advice() -> None:
    bare = AgentEntry(Agent(answering(lambda turn: "x")), name="bare")
    async with Runtime(None, entries=[bare]) as runtime:
        with pytest.raises(ToolsetError, match="give the entry a schema_in model"):
            await runtime.run("bare", {"a": 1})


def test_entry_names_must_be_identifiers() -> None:
    with pytest.raises(ValueError, match="entry name must look like an identifier"):
        AgentEntry(Agent(), name="two words")


async def test_scope_toolset_gives_the_call_s_own_instance_while_it_runs() -> None:
    seen: list[Counter] = []

    @entry(toolsets=["counter"])
    async def peek(scope: CallScope, input_data: str) -> int:
        await scope.call_tool("add", {"amount": 4})
        counter = scope.toolset("counter")
        assert isinstance(counter, Counter)
        seen.append(counter)
        with pytest.raises(ToolsetError, match="entry 'peek' has no open toolset 'nope'; its toolsets: counter"):
            scope.toolset("nope")
        return counter.value

    async with Runtime(None, entries=[peek], toolsets={"counter": Counter}) as runtime:
        assert (await runtime.run("peek", "x")).output == 4
        assert (await runtime.run("peek", "x")).output == 4, "a fresh instance per call"
    assert seen[0] is not seen[1]


async def test_an_event_stream_handler_sees_every_agent_runs_events_with_its_call_scope() -> None:
    streamed: dict[tuple[str, ...], str] = {}

    async def handler(ctx: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
        chain = ctx.deps.chain()
        async for event in events:
            if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                streamed[chain] = streamed.get(chain, "") + event.part.content
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                streamed[chain] = streamed.get(chain, "") + event.delta.content_delta

    child = AgentEntry(Agent(TestModel(custom_output_text="from the child")), name="child")
    parent = AgentEntry(Agent(TestModel(custom_output_text="from the parent")), name="parent", toolsets=["child"])
    async with Runtime(None, entries=[parent, child], event_stream_handler=handler) as runtime:
        result = await runtime.run("parent", "go")
    assert result.output == "from the parent"
    assert streamed == {("parent",): "from the parent", ("parent", "child"): "from the child"}


async def test_arguments_that_cannot_be_encoded_are_a_retry_the_model_reads() -> None:
    # A provider's SDK that decodes the arguments itself (json.loads) turns "\\ud800" into a lone surrogate:
    # pydantic-ai's retry prompt for the validation error dumps it as JSON, which failed the whole run.
    usage = RequestUsage(input_tokens=1, output_tokens=1)  # (FunctionModel's estimate would dump the history)
    shown: list[str] = []

    def boss(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        answered = [part for message in messages for part in message.parts if isinstance(part, ToolReturnPart)]
        if not answered:
            return ModelResponse(parts=[ToolCallPart("reader", {"input": {"\ud800": None}})], usage=usage)
        if len(answered) == 1:
            shown.append(answered[0].model_response_str())
            return ModelResponse(parts=[ToolCallPart("reader", {"input": "the memo"})], usage=usage)
        return ModelResponse(parts=[TextPart(f"reader said: {answered[-1].content}")], usage=usage)

    def reader(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("read it")], usage=usage)

    entries = [
        AgentEntry(Agent(FunctionModel(boss)), name="boss", toolsets=["reader"]),
        AgentEntry(Agent(FunctionModel(reader)), name="reader"),
    ]
    async with Runtime(None, entries=entries) as runtime:
        result = await runtime.run("boss", "go")
    assert result.output == "reader said: read it"
    [retry] = shown
    assert "\\ud800" in retry and "input" in retry, retry
    retry.encode()  # nothing left that cannot be sent to a model
