"""What a small model is offered and told, on the recorded HTTP server: an agent called as a tool takes
`attachments` only where it takes files, or where its caller has files to hand on; the `sql` tools say what to
pass when a model makes handles up or writes its whole plan at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import SecretStr
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from llm_do import AgentEntry, Attachment, Runtime

from ..cli_projects import llm_do
from ..real_model.httplog import exchanges
from ..real_model.projects import bank, desk, run
from ..real_model.server import recorded_server

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


def test_what_the_sql_tools_tell_a_model_that_wrote_its_whole_plan_with_made_up_handles(tmp_path: Path) -> None:
    # Exchange 36: the recorded model wrote five calls at once, on a handle it made up (txn_1). Told why (retry),
    # it called begin (exchange 39, borrowed), then wrote its query as text again (40): the run stops there.
    url = bank(tmp_path / "bank.db")
    move = "Please move 30 from alice to carol."
    document, _, code, server = run(
        desk(tmp_path / "desk"), "clerk", move, [36], borrowed=(39, 40), LLM_DO_DATABASE_URL=url,
        LLM_DO_SUSPECT_OUTPUT="retry",
    )  # fmt: skip
    assert server.served == [36, 39, 40]
    told = server.received[1].body["messages"][-1]["content"]
    assert "You wrote 5 calls at once: call one tool, wait for its result, then the next" in told
    assert "never make such values up" in told
    begun = server.received[2].body["messages"][-1]
    assert begun["role"] == "tool" and begun["content"].startswith("txn_")  # a real handle, from begin
    assert code == 1 and document["error"].startswith("RepliesRefused: entry 'clerk'")
    query = next(t for t in server.received[0].body["tools"] if t["function"]["name"] == "query")
    assert query["function"]["parameters"]["properties"]["txn"]["description"] == (
        "The handle `begin` returned, exactly as it was written (like txn_1a2b3c4d)."
    )


async def test_a_made_up_handle_is_told_what_to_pass_instead(tmp_path: Path) -> None:
    from containers import BuiltinToolsets
    from llm_do import RuntimeConfig
    from llm_do.testing import ScriptedModel, returned, tool_call

    app = BuiltinToolsets()
    app.config.database_url.from_value(SecretStr(bank(tmp_path / "bank.db")))
    model = ScriptedModel(
        tool_call("query", txn="txn_1", sql="SELECT balance FROM accounts"),
        tool_call("begin"),
        tool_call("query", txn="txn_123", sql="SELECT balance FROM accounts"),
        tool_call("rollback", txn=returned("begin")),
        lambda turn: "\n".join(str(content) for content in turn.returns),
    )
    clerk = AgentEntry(Agent(model), name="clerk", toolsets=["sql"])
    async with Runtime(app, entries=[clerk], config=RuntimeConfig.from_container(app)) as runtime:
        result = await runtime.run("clerk", "Move 30.")
    said = [str(p.content) for m in result.messages for p in getattr(m, "parts", ()) if p.part_kind == "tool-return"]
    assert said[0] == (
        "Unknown handle 'txn_1': it is not open here (never opened, or already closed). No txn handle is open: "
        "call begin first, then pass the handle it returns (like 'txn_1a2b3c4d')."
    )
    handle = said[1]
    assert said[2] == (
        "Unknown handle 'txn_123': it is not open here (never opened, or already closed); pass a handle exactly as "
        f"begin returned it. Open txn handles: {handle}."
    )


def test_a_tool_choice_list_reaches_a_compatible_server_as_required_with_only_those_tools(tmp_path: Path) -> None:
    # The form of a forced choice every OpenAI-compatible server reads, not OpenAI's newer `allowed_tools`.
    forced = "output: answer.py:Answer\nmodel_settings: {tool_choice: [read_text, final_result]}\n"
    project = desk(tmp_path / "desk", extra={"files": forced})
    (project / "answer.py").write_text("from pydantic import BaseModel\n\n\nclass Answer(BaseModel):\n    text: str\n")
    # The recorded model answered "`list_dir`" in prose (exchange 59), which an output model does not take.
    document, _, code, server = run(project, "files", "todo.md", [], borrowed=(59, 59))
    assert code == 1
    assert document["error"] == (
        "RepliesRefused: entry 'files': the model gave no answer the entry takes before its retries ran out "
        "(Exceeded maximum output retries (1)); the last reply was the text '`list_dir`', and its answer must be a "
        "call of its output tool 'final_result' with arguments its output model takes. Give the model clearer "
        "instructions or one that calls tools, or let text_tool_calls run the calls it writes as JSON "
        "(docs/local-models.md)."
    )
    sent = server.received[0].body
    assert sent["tool_choice"] == "required"
    assert [tool["function"]["name"] for tool in sent["tools"]] == ["read_text", "final_result"]
