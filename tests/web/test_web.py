"""llm_do.web: a live run as the Vercel AI data stream (pydantic-ai's encoder, plus llm-do's calls and
approvals), and the decisions a page sends back."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic_ai import Agent

from llm_do import (
    AgentEntry,
    ApprovalRequested,
    Attachment,
    Decision,
    LiveRun,
    LlmDoError,
    Runtime,
    RuntimeConfig,
    StreamEvent,
    ToolPolicy,
    Toolset,
    tool,
)
from llm_do.approvals import ApprovalMode
from llm_do.testing import ScriptedModel, Turn, tool_call
from llm_do.web import SSE_HEADERS, decision_of, vercel_chunks, vercel_sse


class Vault(Toolset):
    @tool
    def open_vault(self, door: str) -> str:
        """Open a door of the vault."""
        if door == "jammed":
            raise RuntimeError("the door is jammed")
        if door == "wired":
            raise ConnectionError("could not reach postgresql://vault:s3cret-pw@10.0.3.4/vault")
        return f"{door} is open"


def runtime(*boss_steps: Any, child: bool = False, opening: Decision = "ask", mode: ApprovalMode = "prompt") -> Runtime:
    """`boss` opens doors itself (top-level call) or through `porter` (a child call); opening asks (or `opening`)."""
    porter = AgentEntry(
        Agent(ScriptedModel(tool_call("open_vault", door="north"), lambda turn: "porter done")),
        name="porter",
        toolsets=["vault"],
    )
    boss = AgentEntry(Agent(ScriptedModel(*boss_steps)), name="boss", toolsets=["porter" if child else "vault"])
    return Runtime(
        None,
        entries=[boss, porter],
        toolsets={"vault": Vault},
        policies={"vault": ToolPolicy(tools={"open_vault": opening})},
        config=RuntimeConfig(approval_mode=mode),
    )


async def answering(run: LiveRun, *choices: str) -> AsyncIterator[StreamEvent]:
    """The run's events, deciding each approval as it is asked (as a page's click would)."""
    answers = iter(choices)
    async for event in run:
        yield event
        if isinstance(event, ApprovalRequested):
            run.decide(event.request.approval_id, next(answers), "no entry")  # type: ignore[arg-type]


async def chunks_of(rt: Runtime, *choices: str, **on: Any) -> list[dict[str, Any]]:
    async with rt, rt.stream("boss", "go") as run:
        return [
            chunk.model_dump(mode="json", by_alias=True, exclude_none=True)
            async for chunk in vercel_chunks(answering(run, *choices), **on)
        ]


async def test_a_top_level_approval_is_the_protocols_tool_approval_request() -> None:
    chunks = await chunks_of(runtime(tool_call("open_vault", door="east"), lambda turn: "all open"), "approve")
    kinds = [chunk["type"] for chunk in chunks]
    announced = [chunk for chunk in chunks if chunk["type"] == "tool-input-available"]
    assert len(announced) == 1 and announced[0]["toolName"] == "open_vault"  # by pydantic-ai's encoder, once
    asked = chunks[kinds.index("tool-approval-request")]
    assert asked["toolCallId"] == announced[0]["toolCallId"] and asked["approvalId"].startswith("apr_")
    assert kinds.index("tool-input-available") < kinds.index("tool-approval-request")
    assert kinds.index("tool-approval-request") < kinds.index("tool-output-available")
    approvals = [chunk["data"] for chunk in chunks if chunk["type"] == "data-llm-do-approval"]
    assert [approval["state"] for approval in approvals] == ["pending", "approved"]
    assert "open_vault" in approvals[0]["description"]
    assert "".join(chunk["delta"] for chunk in chunks if chunk["type"] == "text-delta") == "all open"
    assert kinds[0] == "start" and kinds[-2:] == ["finish", "done"]


async def test_a_child_calls_approval_announces_its_tool_call_and_the_tree_goes_out_as_data_parts() -> None:
    steps = (tool_call("porter", input="open up"), lambda turn: "porter says so")
    chunks = await chunks_of(runtime(*steps, child=True), "deny")
    calls = [chunk for chunk in chunks if chunk["type"] == "data-llm-do-call"]
    tree = {chunk["id"]: (chunk["data"]["entry"], chunk["data"]["parent"]) for chunk in calls}
    assert tree == {"call_1": ("boss", None), "call_2": ("porter", "call_1")}
    assert [chunk["data"]["state"] for chunk in calls if chunk["id"] == "call_2"] == ["running", "ok"]
    porter_call = next(
        chunk for chunk in chunks if chunk["type"] == "tool-input-available" and not chunk.get("dynamic")
    )
    assert calls[1]["data"]["tool_call_id"] == porter_call["toolCallId"]  # the parent's tool call that started it
    child_tool = next(chunk for chunk in chunks if chunk["type"] == "tool-input-available" and chunk.get("dynamic"))
    assert (child_tool["toolName"], child_tool["input"]) == ("open_vault", {"door": "north"})
    asked = next(chunk for chunk in chunks if chunk["type"] == "tool-approval-request")
    assert asked["toolCallId"] == child_tool["toolCallId"]
    assert {"type": "tool-output-denied", "toolCallId": child_tool["toolCallId"]} in chunks
    tools = [chunk["data"] for chunk in chunks if chunk["type"] == "data-llm-do-tool"]
    assert [(data["tool"], data["state"]) for data in tools] == [("open_vault", "running"), ("open_vault", "denied")]
    assert "no entry" in tools[-1]["result"]
    # nothing of the child's own text reaches the page's text: only the top-level call's
    assert "".join(chunk["delta"] for chunk in chunks if chunk["type"] == "text-delta") == "porter says so"


async def test_a_child_calls_tool_calls_are_protocol_tool_parts_tagged_with_their_call_in_a_step_of_their_own() -> None:
    steps = (tool_call("porter", input="open up"), lambda turn: "porter says so")
    chunks = await chunks_of(runtime(*steps, child=True), "approve")
    porter_call = next(
        chunk for chunk in chunks if chunk["type"] == "tool-input-available" and not chunk.get("dynamic")
    )
    assert "providerExecuted" not in porter_call and "providerMetadata" not in porter_call  # the top-level model's
    (child_tool,) = [chunk for chunk in chunks if chunk["type"] == "tool-input-available" and chunk.get("dynamic")]
    assert child_tool["providerExecuted"] is True  # executed by the run: not for the page's own tool handling
    assert child_tool["providerMetadata"] == {
        "llm_do": {"call": "call_2", "entry": "porter", "parent_tool_call_id": porter_call["toolCallId"]}
    }
    (output,) = [chunk for chunk in chunks if chunk["type"] == "tool-output-available" and chunk.get("dynamic")]
    assert output == {
        "type": "tool-output-available",
        "toolCallId": child_tool["toolCallId"],
        "output": "north is open",
        "providerExecuted": True,
        "dynamic": True,
    }
    kinds = [chunk["type"] for chunk in chunks]
    child_started = next(
        at for at, chunk in enumerate(chunks) if chunk["type"] == "data-llm-do-call" and chunk["id"] == "call_2"
    )
    assert kinds[child_started - 1] == "start-step"  # the child's parts: a step of their own
    assert kinds.index("tool-input-available") < child_started - 1 < chunks.index(child_tool)


@pytest.mark.parametrize("sdk_version", [6, 7])
async def test_ai_sdk_7_is_told_of_every_answer_and_6_never_sees_the_chunk_it_cannot_read(sdk_version: int) -> None:
    steps = (tool_call("porter", input="open up"), lambda turn: "porter says so")
    chunks = await chunks_of(runtime(*steps, child=True), "deny", sdk_version=sdk_version)
    answers = [chunk for chunk in chunks if chunk["type"] == "tool-approval-response"]
    if sdk_version == 6:
        assert answers == []
        return
    (asked,) = [chunk for chunk in chunks if chunk["type"] == "tool-approval-request"]
    (answer,) = answers
    assert (
        answer["approvalId"] == asked["approvalId"] and answer["approved"] is False and "no entry" in answer["reason"]
    )
    kinds = [chunk["type"] for chunk in chunks]
    assert (
        kinds.index("tool-approval-request") < kinds.index("tool-approval-response") < kinds.index("tool-output-denied")
    )


async def test_ai_sdk_7_hears_of_no_answer_to_a_question_nobody_was_asked() -> None:
    rt = runtime(tool_call("porter", input="open up"), lambda turn: "told no", child=True, opening="deny")
    chunks = await chunks_of(rt, sdk_version=7)
    kinds = [chunk["type"] for chunk in chunks]
    assert "tool-approval-request" not in kinds and "tool-approval-response" not in kinds  # it has no tool part
    assert "tool-output-denied" in kinds


async def test_a_data_part_sent_again_under_its_id_keeps_every_field_it_had() -> None:
    """The AI SDK replaces a data part by the later one with the same type and id: an update that sent only
    what changed would lose the call's place in the tree, a tool call's arguments, an approval's question."""
    steps = (tool_call("porter", input="open up"), lambda turn: "porter says so")
    chunks = await chunks_of(runtime(*steps, child=True), "approve")
    last: dict[tuple[str, str], dict[str, Any]] = {}
    for chunk in chunks:
        if chunk["type"].startswith("data-llm-do-"):
            before = last.get((chunk["type"], chunk["id"]), {})
            assert set(before) <= set(chunk["data"]), chunk  # nothing sent earlier is missing from an update
            last[chunk["type"], chunk["id"]] = chunk["data"]
    porter = last["data-llm-do-call", "call_2"]
    assert (porter["state"], porter["entry"], porter["parent"], porter["toolsets"]) == (
        "ok",
        "porter",
        "call_1",
        ["vault"],
    )
    (tool,) = [data for (kind, _), data in last.items() if kind == "data-llm-do-tool"]
    assert (tool["state"], tool["call"], tool["args"]) == ("done", "call_2", {"door": "north"})
    (approval,) = [data for (kind, _), data in last.items() if kind == "data-llm-do-approval"]
    assert (
        approval["state"] == "approved" and approval["tool"] == "open_vault" and "open_vault" in approval["description"]
    )


@pytest.mark.parametrize("child", [False, True])
async def test_a_call_its_policy_denies_never_reaches_the_page_as_a_question(child: bool) -> None:
    rt = runtime(
        tool_call("porter", input="open up") if child else tool_call("open_vault", door="east"),
        lambda turn: "told no",
        child=child,
        opening="deny",
    )
    seen: list[StreamEvent] = []

    async def kept(run: LiveRun) -> AsyncIterator[StreamEvent]:
        async for event in run:
            seen.append(event)
            yield event

    async with rt, rt.stream("boss", "go") as run:
        chunks = [
            chunk.model_dump(mode="json", by_alias=True, exclude_none=True) async for chunk in vercel_chunks(kept(run))
        ]
        assert run.pending == ()
    kinds = [chunk["type"] for chunk in chunks]
    assert "tool-approval-request" not in kinds
    assert not [
        chunk for chunk in chunks if chunk["type"] == "data-llm-do-approval" and chunk["data"]["state"] == "pending"
    ]
    assert not [event for event in seen if isinstance(event, ApprovalRequested)]
    tools = [chunk["data"] for chunk in chunks if chunk["type"] == "data-llm-do-tool"]
    if child:
        assert [(data["tool"], data["state"]) for data in tools] == [
            ("open_vault", "running"),
            ("open_vault", "denied"),
        ]
        assert "denied by policy" in tools[-1]["result"]
    assert "".join(chunk["delta"] for chunk in chunks if chunk["type"] == "text-delta") == "told no"


@pytest.mark.parametrize("mode", ["approve_all", "reject_all"])
async def test_a_call_the_approval_mode_decides_never_reaches_the_page_as_a_question(mode: ApprovalMode) -> None:
    rt = runtime(tool_call("open_vault", door="east"), lambda turn: "done", mode=mode)
    async with rt, rt.stream("boss", "go") as run:
        chunks = [chunk.model_dump(by_alias=True, exclude_none=True) async for chunk in vercel_chunks(run)]
    assert "tool-approval-request" not in [chunk["type"] for chunk in chunks]
    decided = [chunk["data"] for chunk in chunks if chunk["type"] == "data-llm-do-approval"]
    assert [approval["state"] for approval in decided] == ["approved" if mode == "approve_all" else "denied"]


async def test_the_result_is_handed_over_before_the_stream_closes() -> None:
    seen: list[str] = []

    async def on_result(result: Any) -> None:
        seen.append(str(result.output))

    rt = runtime(lambda turn: "nothing to open")
    async with rt, rt.stream("boss", "go") as run:
        lines = [line async for line in vercel_sse(run, on_result=on_result)]
        assert seen == ["nothing to open"]
    assert lines[-1] == "data: [DONE]\n\n"
    assert json.loads(lines[-2].removeprefix("data: "))["type"] == "finish"
    assert SSE_HEADERS["x-vercel-ai-ui-message-stream"] == "v1"


async def test_a_failed_run_ends_with_the_protocols_error_chunk() -> None:
    def unreachable(turn: Turn) -> str:
        raise AssertionError("the run should have failed first")

    rt = Runtime(
        None,
        entries=[AgentEntry(Agent(ScriptedModel(tool_call("open_vault", door="east"), unreachable)), name="boss")],
    )
    async with rt, rt.stream("boss", "go") as run:
        chunks = [chunk.model_dump(by_alias=True, exclude_none=True) async for chunk in vercel_chunks(run)]
    errors = [chunk for chunk in chunks if chunk["type"] == "error"]
    assert errors == [{"type": "error", "errorText": "the run failed (ScriptError); the server's log has the details"}]


async def test_the_page_reads_that_a_run_failed_and_the_exceptions_type_the_log_reads_its_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An exception's message can hold a server's address, a DSN with its password, a path: the page is read by the
    person using the service, so it gets the exception's type; the message goes to the `llm_do` logger."""
    caplog.set_level(logging.ERROR, logger="llm_do")
    rt = runtime(tool_call("open_vault", door="wired"), "unreachable", opening="allow")
    async with rt, rt.stream("boss", "go") as run:
        chunks = [chunk.model_dump(by_alias=True, exclude_none=True) async for chunk in vercel_chunks(run)]
    page = json.dumps(chunks)
    [error] = [chunk for chunk in chunks if chunk["type"] == "error"]
    assert error["errorText"] == "the run failed (ConnectionError); the server's log has the details"
    [ended] = [c["data"] for c in chunks if c["type"] == "data-llm-do-call" and c["data"]["state"] == "error"]
    assert ended["error"] == "ConnectionError"
    assert "s3cret" not in page and "10.0.3.4" not in page
    assert any("s3cret-pw" in str(record.exc_info[1]) for record in caplog.records if record.exc_info)


def test_decisions_in_llm_dos_shape_and_the_ai_sdks() -> None:
    assert decision_of({"approval_id": "apr_1", "choice": "approve_for_session"}) == (
        "apr_1",
        "approve_for_session",
        None,
    )
    assert decision_of({"id": "apr_2", "approved": False, "reason": "no"}) == ("apr_2", "deny", "no")
    assert decision_of({"id": "apr_3", "approved": True}) == ("apr_3", "approve", None)
    with pytest.raises(LlmDoError, match="choose one of approve, approve_for_session, deny"):
        decision_of({"approval_id": "apr_1", "choice": "maybe"})
    with pytest.raises(LlmDoError, match="a decision is"):
        decision_of({"approved": True})
    with pytest.raises(LlmDoError, match="needs the approval's id as a string"):
        decision_of({"approval_id": 7, "choice": "deny"})


async def test_the_files_a_call_receives_and_an_approval_hands_over_are_named_never_sent() -> None:
    """The page sees each file's name, type, size and digest in the call's and the question's data parts."""
    picture = Attachment.from_bytes("pic.png", b"\x89PNG\r\n\x1a\n" + b"SECRET" * 50)
    child = AgentEntry(Agent(ScriptedModel(lambda turn: "child ok")), name="child")
    steps = (tool_call("child", input="look", attachments=["pic.png"]), lambda turn: "done")
    parent = AgentEntry(Agent(ScriptedModel(*steps)), name="boss", toolsets=["child"])
    rt = Runtime(None, entries=[parent, child], policies={"child": ToolPolicy(attachments="ask")})
    async with rt, rt.stream("boss", "go", attachments=[picture]) as run:
        lines = [line async for line in vercel_sse(answering(run, "approve"))]
    chunks = [json.loads(line[len("data: ") :]) for line in lines if line.startswith("data: {")]
    described = [picture.info.to_json()]
    calls = [chunk["data"] for chunk in chunks if chunk["type"] == "data-llm-do-call"]
    running = [data for data in calls if data["state"] == "running"]
    assert [(data["entry"], data.get("attachments")) for data in running] == [
        ("boss", described),
        ("child", described),
    ]
    [pending] = [
        chunk["data"]
        for chunk in chunks
        if chunk["type"] == "data-llm-do-approval" and chunk["data"]["state"] == "pending"
    ]
    assert pending["attachments"] == described
    assert "SECRET" not in "".join(lines)
