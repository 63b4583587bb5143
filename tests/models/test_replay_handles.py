"""Replay survives handles: recorded handles map to the live run's handles by position."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.tools import ToolDefinition

from llm_do import AgentEntry, Handles, Runtime, RuntimeConfig, Toolset, tool
from llm_do.models import (
    HANDLE_PATTERN,
    KeyCache,
    MissingResponse,
    Recording,
    RecordingModel,
    ReplayModel,
    UnknownRecordedHandle,
    request_key,
)
from llm_do.testing import Step, Turn, answering

pytestmark = pytest.mark.usefixtures("tools_without_a_policy_run")  # not about approvals: undeclared tools run


class Tab:
    def __init__(self) -> None:
        self.items: list[int] = []

    def rollback(self) -> None:
        self.items.clear()


class Till(Toolset):
    committed: ClassVar[list[int]] = []

    def __init__(self) -> None:
        self.tabs: Handles[Tab] = Handles("txn")

    @tool
    def open_tab(self) -> str:
        """Open a tab; returns its handle."""
        return self.tabs.open(Tab())

    @tool
    def add(self, txn: str, amount: int) -> str:
        """Add an amount to an open tab."""
        tab = self.tabs.get(txn)
        tab.items.append(amount)
        return f"{txn} holds {sum(tab.items)}"

    @tool
    def close(self, txn: str) -> int:
        """Close a tab and return its total."""
        total = sum(self.tabs.pop(txn).items)
        Till.committed.append(total)
        return total


def cashier(turn: Turn) -> Step:
    """Opens a tab, adds to it twice in parallel, closes it, and names the handle in its answer."""
    results, step = turn.returns, turn.step
    if step == 0:
        return ModelResponse(parts=[ToolCallPart("open_tab", {})])
    if step == 1:
        txn = str(results[0])
        return ModelResponse(
            parts=[
                ToolCallPart("add", {"txn": txn, "amount": 3}),
                ToolCallPart("add", f'{{"txn": "{txn}", "amount": 4}}'),
            ]
        )
    if step == 2:
        txn = str(results[0]).split()[0]
        return ModelResponse(parts=[ToolCallPart("close", {"txn": txn})])
    opened = next(
        part.content for m in turn.messages for part in getattr(m, "parts", []) if part.part_kind == "tool-return"
    )
    return ModelResponse(parts=[TextPart(f"Tab {opened} closed at {results[0]}.")])


entry = AgentEntry(Agent(instructions="Run the till."), name="cashier", toolsets=["till"])


def app(model: object) -> Runtime:
    return Runtime(
        None, entries=[entry], toolsets={"till": Till}, config=RuntimeConfig(model=model, approval_default="allow")
    )


def opened_handle(messages: list[ModelMessage]) -> str:
    for message in messages:
        for part in getattr(message, "parts", []):
            if part.part_kind == "tool-return" and part.tool_name == "open_tab":
                return str(part.content)
    raise AssertionError("no tab opened")


async def test_a_recording_with_handles_replays_with_the_live_handles(tmp_path: Path) -> None:
    path = tmp_path / "till.json"
    Till.committed.clear()
    recorder = RecordingModel(answering(cashier), path)
    async with recorder, app(recorder) as runtime:
        live = await runtime.run("cashier", "Ring up 3 and 4.")
    recorded_handle = opened_handle(live.messages)
    assert live.output == f"Tab {recorded_handle} closed at 7."

    data = json.loads(path.read_text())
    by_index = {item["request_index"]: item for item in data["responses"]}
    assert "handles" not in by_index[0]
    assert by_index[1]["handles"] == by_index[3]["handles"] == [recorded_handle]

    seen = set()
    for _ in range(3):
        async with app(ReplayModel.from_file(path)) as runtime:
            replayed = await runtime.run("cashier", "Ring up 3 and 4.")
        handle = opened_handle(replayed.messages)
        assert HANDLE_PATTERN.fullmatch(handle) and handle != recorded_handle
        assert replayed.output == f"Tab {handle} closed at 7."
        assert replayed.usage == live.usage
        seen.add(handle)
    assert len(seen) == 3  # a new random handle on every run, each mapped
    assert Till.committed == [7, 7, 7, 7]


async def test_a_handle_the_recording_never_saw_is_a_clear_error(tmp_path: Path) -> None:
    script = Recording.from_script(
        [ToolCallPart("open_tab", {}), ToolCallPart("close", {"txn": "txn_0badcafe"})], entry="cashier"
    )
    async with app(ReplayModel(script, source="till.json")) as runtime:
        with pytest.raises(UnknownRecordedHandle) as raised:
            await runtime.run("cashier", "Ring up nothing.")
    message = str(raised.value)
    assert raised.value.handle == "txn_0badcafe"
    assert "passes handle 'txn_0badcafe' to tool 'close'" in message
    assert "never showed that handle (it showed: none)" in message
    assert "entry chain cashier, request #1" in message
    assert "RecordingModel(<a real model>, 'till.json')" in message


async def test_a_handle_the_recording_never_saw_is_caught_as_a_missing_response(tmp_path: Path) -> None:
    """Replay that cannot answer is one error to catch, whatever it could not map (a request, a file, a handle)."""
    script = Recording.from_script([ToolCallPart("close", {"txn": "txn_0badcafe"})], entry="cashier")
    async with app(ReplayModel(script, source="till.json")) as runtime:
        with pytest.raises(MissingResponse, match="passes handle 'txn_0badcafe' to tool 'close'"):
            await runtime.run("cashier", "Ring up nothing.")


async def test_a_script_names_the_conversations_handles_by_position() -> None:
    script = Recording.from_script(
        [
            ToolCallPart("open_tab", {}),
            ToolCallPart("add", {"txn": "<handle#1>", "amount": 5}),
            ToolCallPart("close", {"txn": "<handle#1>"}),
            "Closed <handle#1>; txn_12345678 is only prose.",
        ],
        entry="cashier",
    )
    async with app(ReplayModel(script)) as runtime:
        result = await runtime.run("cashier", "Ring up 5.")
    handle = opened_handle(result.messages)
    assert result.output == f"Closed {handle}; txn_12345678 is only prose."


def test_a_handle_after_an_escaped_character_is_still_numbered() -> None:
    """Handles are numbered by first appearance, also after characters JSON escapes (a newline, a quote, a tab):
    two conversations that differ only in their handles have the same key."""

    def key(first: str, second: str) -> tuple[str, tuple[str, ...]]:
        prompt = f'move from\n{first} to "{second}"\tnow'
        found = request_key([ModelRequest(parts=[UserPromptPart(prompt)])], ModelRequestParameters(), ())
        return found.key, found.handles

    (one, handles), (other, others) = key("acct_1a2b3c4d", "acct_0f0f0f0f"), key("acct_deadbeef", "acct_12345678")
    assert handles == ("acct_1a2b3c4d", "acct_0f0f0f0f") and others == ("acct_deadbeef", "acct_12345678")
    assert one == other
    assert key("acct_1a2b3c4d", "acct_1a2b3c4d")[0] != one  # one handle twice is another conversation


def test_a_conversations_key_cache_gives_every_request_the_key_it_has_in_full() -> None:
    """Keyed through one `KeyCache`, request after request (handles, parallel calls, a file, a lone surrogate,
    other tools, settings and chains; a message replaced; the same cache for another conversation), every key
    and its handles equal the key computed in full."""
    cache = KeyCache()
    photo = BinaryContent(b"\x89PNG...", media_type="image/png")
    conversation: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(["open acct_1a2b3c4d", photo])])]
    calls = [
        ModelResponse(parts=[ToolCallPart("open", {"acct": "acct_1a2b3c4d"}, tool_call_id="a")]),
        ModelRequest(parts=[ToolReturnPart("open", "txn_00000001 opened \udcff", tool_call_id="a")]),
        ModelResponse(
            parts=[
                TextPart("two at once"),
                ToolCallPart("look", {"n": 1}, tool_call_id="b"),
                ToolCallPart("look", {"n": 2}, tool_call_id="c"),
            ]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("look", "second", tool_call_id="c"),
                ToolReturnPart("look", {"first": "txn_00000001"}, tool_call_id="b"),
            ]
        ),
        ModelResponse(parts=[ToolCallPart("close", {"txn": "txn_00000001"}, tool_call_id="d")]),
        ModelRequest(parts=[ToolReturnPart("close", "closed", tool_call_id="d")]),
    ]
    tools = ModelRequestParameters(function_tools=[ToolDefinition(name="look"), ToolDefinition(name="open")])
    asked = [
        (ModelRequestParameters(), ("clerk",), None),
        (tools, ("clerk",), {"temperature": 0.2}),
        (tools, ("boss", "clerk"), None),
    ]
    compared = 0

    def same(messages: list[ModelMessage], params: ModelRequestParameters, chain: tuple[str, ...], settings: Any):
        nonlocal compared
        cached = request_key(messages, params, chain, settings=settings, cache=cache)
        full = request_key(messages, params, chain, settings=settings)
        assert (cached.key, cached.handles) == (full.key, full.handles), (len(messages), chain, settings)
        compared += 1

    for message in calls:
        for params, chain, settings in asked:
            same(conversation, params, chain, settings)
        conversation.append(message)
    same(conversation, tools, ("clerk",), None)
    conversation[3] = ModelResponse(parts=[ToolCallPart("look", {"n": 3}, tool_call_id="b")])  # not the one seen
    same(conversation, tools, ("clerk",), None)
    same(conversation[:2], tools, ("clerk",), None)  # a shorter conversation: keyed from its start again
    same([ModelRequest(parts=[UserPromptPart("another conversation")])], tools, ("clerk",), None)
    assert compared == len(calls) * len(asked) + 4
