"""What a small model is offered, on the recorded HTTP server: an agent called as a tool takes `attachments`
only where it takes files, or where its caller has files to hand on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from llm_do import AgentEntry, Attachment, Runtime

from .cli_projects import llm_do
from .real_model.httplog import exchanges
from .real_model.projects import desk
from .real_model.server import recorded_server

INVOICE = "How much is the cloud invoice? It is in todo.md."
NESTED = [22, 23, 24, 25, 26, 27, 28]  # asker -> reader (read_text three times, an empty reply, ...) -> asker


def reader_parameters(project: Path) -> dict[str, Any]:
    with recorded_server(exchanges(), NESTED) as (url, server):
        ran = llm_do(
            "run", project, INVOICE, "--entry", "asker", "-m", "openai-chat:qwen", "-v",
            env={"LLM_DO_OPENAI_BASE_URL": url},
        )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert server.served == NESTED
    [reader] = server.received[0].body["tools"]
    assert reader["function"]["name"] == "reader"
    parameters: dict[str, Any] = reader["function"]["parameters"]
    return parameters


def test_an_agent_called_as_a_tool_is_offered_attachments_only_where_it_takes_files(tmp_path: Path) -> None:
    plain = reader_parameters(desk(tmp_path / "plain"))
    assert plain["properties"] == {"input": {"type": "string"}}
    assert plain["required"] == ["input"]
    takes = reader_parameters(desk(tmp_path / "takes", extra={"reader": "takes_attachments: true\n"}))
    assert set(takes["properties"]) == {"input", "attachments"}
    # The recorded model passed `"attachments": []` all the same: the call is accepted, and the run went on.


async def test_a_caller_holding_files_is_offered_attachments_to_hand_on() -> None:
    offered: list[set[str]] = []

    def boss(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            offered.append(set(info.function_tools[0].parameters_json_schema["properties"]))
            return ModelResponse(parts=[ToolCallPart("helper", {"input": "read it"})])
        return ModelResponse(parts=[TextPart("done")])

    helper = AgentEntry(Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("ok")]))), name="helper")
    top = AgentEntry(Agent(FunctionModel(boss)), name="boss", toolsets=["helper"])
    async with Runtime(None, entries=[top, helper]) as runtime:
        await runtime.run("boss", "go")
        await runtime.run("boss", "go", attachments=[Attachment.from_bytes("memo.txt", b"Budget approved.\n")])
    assert offered == [{"input"}, {"input", "attachments"}]
