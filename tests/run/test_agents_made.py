"""Agents that call agents, and agents made by agents (`dynamic_agents`, `CallScope.make_agent`): the made
agent's calls are children like any entry's, pass the same approvals, stay under the depth limit, count in
the usage, and are forgotten with the run; a tool can run any entry of its runtime, in parallel."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from llm_do import (
    AgentEntry,
    Approval,
    ApprovalDenied,
    ApprovalRequest,
    CallEnded,
    CallScope,
    CallStarted,
    Handles,
    MaxDepthExceeded,
    Runtime,
    RuntimeConfig,
    ToolPolicy,
    Toolset,
    run_report,
    tool,
)
from llm_do.testing import call_tree
from llm_do.toolsets import DynamicAgents


class Notes(Toolset):
    """A notebook per call; `write` is the risky tool (declared safe here; a test gates it by policy)."""

    default_policy: ClassVar[ToolPolicy | None] = ToolPolicy()

    def __init__(self) -> None:
        self.lines: list[str] = []

    @tool
    def write(self, line: str) -> str:
        """Write a line."""
        self.lines.append(line)
        WRITTEN.append(line)
        return f"wrote {line!r}"


class Secret(Toolset):
    default_policy: ClassVar[ToolPolicy | None] = ToolPolicy()

    @tool
    def reveal(self) -> str:
        """Reveal the secret."""
        return "s3cret"


WRITTEN: list[str] = []


def text(content: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(content)])


def returns(messages: list[ModelMessage]) -> list[Any]:
    """What the tools returned (or the retry prompts said) in the last request."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    return [part.content for part in last.parts if isinstance(part, ToolReturnPart | RetryPromptPart)]


def all_returns(messages: list[ModelMessage]) -> list[ToolReturnPart | RetryPromptPart]:
    """What every tool returned (or every retry prompt said) in the conversation, in order."""
    return [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart | RetryPromptPart)
    ]


def call(tool_name: str, /, **args: Any) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(tool_name, args)])


def model(maker_steps: list[ModelResponse | Any], made_steps: list[ModelResponse | Any]) -> FunctionModel:
    """The maker's script (an agent offered `agent_create`), else the made agent's (index by its responses)."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        index = sum(isinstance(message, ModelResponse) for message in messages)
        tools = {definition.name for definition in info.function_tools}
        steps = maker_steps if "agent_create" in tools else made_steps
        step = steps[index]
        return step(messages) if callable(step) else step

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        for index, part in enumerate(respond(messages, info).parts):
            if isinstance(part, TextPart):
                yield part.content
            elif isinstance(part, ToolCallPart):
                yield {index: DeltaToolCall(part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id)}

    return FunctionModel(respond, stream_function=stream)


def maker(toolsets: list[str]) -> AgentEntry:
    return AgentEntry(Agent(), name="main", toolsets=toolsets)


class MadeFreely(DynamicAgents):
    """`DynamicAgents` that makes agents without asking, so that these tests are about what a made agent does
    (the built-in's own policy, which asks before `agent_create`, is tested below)."""

    default_policy: ClassVar[ToolPolicy | None] = ToolPolicy()


TOOLSETS: dict[str, Any] = {"agents": MadeFreely, "notes": Notes, "secret": Secret}


@pytest.fixture(autouse=True)
def _forget_written() -> None:
    WRITTEN.clear()


async def test_a_made_agent_is_a_child_call_with_its_makers_toolsets_and_usage() -> None:
    script = model(
        [
            call("agent_create", name="scribe", instructions="Write what you are told.", toolsets=["notes"]),
            call("agent_call", agent="scribe", input="note milk"),
            lambda messages: text(f"scribe said: {returns(messages)[0]}"),
        ],
        [call("write", line="milk"), text("noted milk")],
    )
    config = RuntimeConfig(model=script)
    async with Runtime(None, entries=[maker(["agents", "notes"])], toolsets=TOOLSETS, config=config) as runtime:
        result = await runtime.run("main", "go")
    assert result.output == "scribe said: noted milk"
    assert WRITTEN == ["milk"]
    top, child = result.calls
    assert (child.entry, child.parent, child.depth) == ("scribe", top.id, 1)
    assert child.usage.requests == 2 and child.usage.tool_calls == 1
    assert result.usage.requests == 5  # three of the maker's, two of the made agent's
    assert "scribe" in call_tree(result)


async def test_a_made_agent_may_use_only_toolsets_its_maker_has() -> None:
    script = model(
        [
            call("agent_create", name="spy", instructions="Reveal.", toolsets=["secret"]),
            lambda messages: text(str(returns(messages)[0])),
        ],
        [],
    )
    config = RuntimeConfig(model=script)
    toolsets = {**TOOLSETS}
    async with Runtime(None, entries=[maker(["agents", "notes"])], toolsets=toolsets, config=config) as runtime:
        result = await runtime.run("main", "go")
    assert "may use only its toolsets (agents, notes), not secret" in result.output
    assert len(result.calls) == 1  # nothing was made, nothing called


class Vault(Toolset):
    """Secrets in boxes named by handles, per call."""

    default_policy: ClassVar[ToolPolicy | None] = ToolPolicy()

    def __init__(self) -> None:
        self.boxes: Handles[str] = Handles("box", opened_by="put")

    @tool
    def put(self, secret: str) -> str:
        """Put a secret in a box; its handle comes back."""
        return self.boxes.open(secret)

    @tool
    def peek(self, box: str) -> str:
        """What a box holds."""
        return self.boxes.get(box)


async def test_a_made_agent_given_its_makers_toolset_gets_its_own_instance_and_none_of_its_handles() -> None:
    """The maker opens a handle and hands it to the agent it made with the same toolset: unknown there."""

    def handed(messages: list[ModelMessage]) -> ModelResponse:
        box = all_returns(messages)[0].content  # what put returned
        assert str(box).startswith("box_")
        return call("agent_call", agent="thief", input=box)

    def peek_at_the_input(messages: list[ModelMessage]) -> ModelResponse:
        first = messages[0]
        assert isinstance(first, ModelRequest)
        return call("peek", box=str(first.parts[-1].content))

    script = model(
        [
            call("put", secret="s3cret"),
            call("agent_create", name="thief", instructions="Look in the box.", toolsets=["vault"]),
            handed,
            lambda messages: text(f"thief said: {returns(messages)[0]}"),
        ],
        [peek_at_the_input, lambda messages: text(str(returns(messages)[0]))],
    )
    config = RuntimeConfig(model=script)
    toolsets = {"agents": MadeFreely, "vault": Vault}
    async with Runtime(None, entries=[maker(["agents", "vault"])], toolsets=toolsets, config=config) as runtime:
        result = await runtime.run("main", "go")
    assert result.output.startswith("thief said: Unknown handle 'box_")
    assert "No box handle is open" in result.output and "s3cret" not in result.output


async def test_a_made_agents_calls_pass_the_same_approvals() -> None:
    asked: list[tuple[str, str, tuple[str, ...]]] = []

    def approver(request: ApprovalRequest) -> Approval:
        asked.append((request.toolset, request.tool, tuple(request.chain)))
        return Approval.deny("not today")

    script = model(
        [
            call("agent_create", name="scribe", instructions="Write.", toolsets=["notes"]),
            call("agent_call", agent="scribe", input="note milk"),
            lambda messages: text(str(returns(messages)[0])),
        ],
        [call("write", line="milk"), lambda messages: text(str(returns(messages)[0]))],
    )
    config = RuntimeConfig(model=script)
    policies = {"notes": ToolPolicy(default="ask")}
    entries = [maker(["agents", "notes"])]
    async with Runtime(
        None, entries=entries, toolsets=TOOLSETS, config=config, policies=policies, approver=approver
    ) as rt:
        result = await rt.run("main", "go")
    assert asked == [("notes", "write", ("main", "scribe"))]
    assert WRITTEN == []
    assert "not today" in result.output


async def test_making_an_agent_can_be_forbidden_by_policy() -> None:
    script = model(
        [
            call("agent_create", name="scribe", instructions="Write.", toolsets=["notes"]),
            lambda messages: text(str(returns(messages)[0])),
        ],
        [],
    )
    config = RuntimeConfig(model=script, approval_mode="reject_all")
    policies = {"agents": ToolPolicy(tools={"agent_create": "deny"})}
    entries = [maker(["agents", "notes"])]
    async with Runtime(None, entries=entries, toolsets=TOOLSETS, config=config, policies=policies) as runtime:
        result = await runtime.run("main", "go")
    assert "agent_create" in result.output and "not run" in result.output
    assert len(result.calls) == 1


async def test_making_an_agent_asks_by_default_and_calling_it_does_not() -> None:
    asked: list[tuple[str, str]] = []

    def approver(request: ApprovalRequest) -> Approval:
        asked.append((request.toolset, request.tool))
        return Approval.approve()

    script = model(
        [
            call("agent_create", name="scribe", instructions="Write.", toolsets=["notes"]),
            call("agent_call", agent="scribe", input="note milk"),
            lambda messages: text(str(returns(messages)[0])),
        ],
        [call("write", line="milk"), text("noted milk")],
    )
    toolsets = {**TOOLSETS, "agents": DynamicAgents}
    config = RuntimeConfig(model=script)
    entries = [maker(["agents", "notes"])]
    async with Runtime(None, entries=entries, toolsets=toolsets, config=config, approver=approver) as runtime:
        result = await runtime.run("main", "go")
    assert asked == [("agents", "agent_create")]
    assert result.output == "noted milk" and WRITTEN == ["milk"]


async def test_under_reject_all_no_agent_is_made_and_an_entry_is_still_called() -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if "agent_create" not in {definition.name for definition in info.function_tools}:
            return text("helper here")
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart("agent_create", {"name": "scribe", "instructions": "Write."}),
                    ToolCallPart("agent_call", {"agent": "helper", "input": "hi"}),
                ]
            )
        return text(" | ".join(map(str, returns(messages))))

    entries = [maker(["agents"]), AgentEntry(Agent(), name="helper")]
    config = RuntimeConfig(model=FunctionModel(respond), approval_mode="reject_all")
    async with Runtime(None, entries=entries, toolsets={"agents": DynamicAgents}, config=config) as runtime:
        result = await runtime.run("main", "go")
    created, called = result.output.split(" | ")
    assert "agent_create" in created and "toolset 'agents' policy: tool 'agent_create' is 'ask'" in created
    assert called == "helper here"
    assert [call.entry for call in result.calls] == ["main", "helper"]


async def test_a_policy_on_attachments_decides_the_agent_calls_that_hand_over_files(tmp_path: Path) -> None:
    (tmp_path / "deck.pdf").write_bytes(b"%PDF-1.4 a deck")
    asked: list[tuple[str, tuple[str, ...]]] = []

    def approver(request: ApprovalRequest) -> Approval:
        asked.append((request.tool, tuple(info.name for info in request.attachments)))
        return Approval.approve()

    script = model(
        [
            call("agent_call", agent="helper", input="plain"),
            call("agent_call", agent="helper", input="with a file", attachments=["deck.pdf"]),
            lambda messages: text("done"),
        ],
        [text("read")],
    )
    entries = [maker(["agents"]), AgentEntry(Agent(script), name="helper")]
    config = RuntimeConfig(model=script, project_root=tmp_path)
    policies = {"agents": ToolPolicy(tools={"agent_create": "ask"}, attachments="ask")}
    async with Runtime(
        None, entries=entries, toolsets={"agents": DynamicAgents}, config=config, policies=policies, approver=approver
    ) as runtime:
        await runtime.run("main", "go")
    assert asked == [("agent_call", ("deck.pdf",))]


async def test_a_made_agent_stays_under_the_depth_limit() -> None:
    script = model(
        [
            call("agent_create", name="scribe", instructions="Write.", toolsets=["notes"]),
            call("agent_call", agent="scribe", input="note milk"),
            text("unreachable"),
        ],
        [text("noted")],
    )
    config = RuntimeConfig(model=script, max_depth=0)
    async with Runtime(None, entries=[maker(["agents", "notes"])], toolsets=TOOLSETS, config=config) as runtime:
        with pytest.raises(MaxDepthExceeded, match="main -> scribe"):
            await runtime.run("main", "go")


async def test_a_made_agent_is_forgotten_with_its_run() -> None:
    first = model(
        [
            call("agent_create", name="scribe", instructions="Write.", toolsets=[]),
            text("made"),
        ],
        [],
    )
    second = model([call("agent_call", agent="scribe", input="hi"), lambda m: text(str(returns(m)[0]))], [])
    entry = maker(["agents"])
    async with Runtime(None, entries=[entry], toolsets=TOOLSETS, config=RuntimeConfig(model=first)) as runtime:
        assert (await runtime.run("main", "go")).output == "made"
        with entry.agent.override(model=second):
            result = await runtime.run("main", "go")
    assert "cannot call 'scribe': it is neither an entry (main) nor an agent made in this run" in result.output
    assert "or kept by its session (none)" in result.output


async def test_names_already_taken_are_refused() -> None:
    script = model(
        [
            ModelResponse(
                parts=[
                    ToolCallPart("agent_create", {"name": "main", "instructions": "x"}),
                    ToolCallPart("agent_create", {"name": "two words", "instructions": "x"}),
                ]
            ),
            lambda messages: text(" | ".join(map(str, returns(messages)))),
        ],
        [],
    )
    async with Runtime(None, entries=[maker(["agents"])], toolsets=TOOLSETS, config=RuntimeConfig(model=script)) as rt:
        result = await rt.run("main", "go")
    assert "the name 'main' is taken" in result.output
    assert "an agent's name must be letters, digits, '_' or '-' (at most 64), got 'two words'" in result.output


class Orchestrator(Toolset):
    """A tool that runs an entry its caller does not list, three times at once."""

    default_policy: ClassVar[ToolPolicy | None] = ToolPolicy()

    @tool
    async def fan_out(self, ctx: RunContext[CallScope], question: str) -> list[str]:
        """Ask three helpers at once."""
        asks = (ctx.deps.call_agent("helper", f"{question} #{index}") for index in range(3))
        return list(await asyncio.gather(*asks))


async def test_a_tool_runs_any_entry_in_parallel_as_children_of_its_call() -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tools = {definition.name for definition in info.function_tools}
        if "fan_out" in tools:
            if len(messages) == 1:
                return call("fan_out", question="why")
            return text(repr(returns(messages)[0]))
        return text(f"helper answers {messages[0].parts[-1].content}")  # type: ignore[union-attr]

    entries = [
        AgentEntry(Agent(), name="main", toolsets=["orchestrate"]),
        AgentEntry(Agent(), name="helper"),
    ]
    config = RuntimeConfig(model=FunctionModel(respond))
    async with Runtime(None, entries=entries, toolsets={"orchestrate": Orchestrator}, config=config) as runtime:
        result = await runtime.run("main", "go")
    assert result.output == repr([f"helper answers why #{index}" for index in range(3)])
    top, *children = result.calls
    assert [(child.entry, child.parent, child.depth) for child in children] == [("helper", top.id, 1)] * 3
    assert result.usage.requests == 5


async def test_a_policy_still_forbids_calling_an_entry_from_a_tool() -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return call("fan_out", question="why")
        return text(str(returns(messages)[0]))

    entries = [AgentEntry(Agent(), name="main", toolsets=["orchestrate"]), AgentEntry(Agent(), name="helper")]
    config = RuntimeConfig(model=FunctionModel(respond))
    policies = {"helper": ToolPolicy(default="deny")}
    async with Runtime(
        None, entries=entries, toolsets={"orchestrate": Orchestrator}, config=config, policies=policies
    ) as runtime:
        with pytest.raises(ApprovalDenied, match="toolset 'helper' policy: default is 'deny'") as denied:
            await runtime.run("main", "go")
    report = run_report(denied.value)
    assert report is not None and [call.entry for call in report.calls] == ["main"]


async def test_a_made_agents_call_streams_tagged_as_a_child_of_its_maker() -> None:
    script = model(
        [
            call("agent_create", name="scribe", instructions="Write.", toolsets=["notes"]),
            call("agent_call", agent="scribe", input="note milk"),
            text("done"),
        ],
        [call("write", line="milk"), text("noted")],
    )
    config = RuntimeConfig(model=script)
    async with (
        Runtime(None, entries=[maker(["agents", "notes"])], toolsets=TOOLSETS, config=config) as runtime,
        runtime.stream("main", "go") as run,
    ):
        events = [event async for event in run]
    started = [event.call for event in events if isinstance(event, CallStarted)]
    assert [(tag.entry, tag.parent, tag.chain) for tag in started] == [
        ("main", None, ("main",)),
        ("scribe", "call_1", ("main", "scribe")),
    ]
    ended = [event for event in events if isinstance(event, CallEnded) and event.call.entry == "scribe"]
    assert [(event.outcome, event.usage.requests, event.usage.tool_calls) for event in ended] == [("ok", 2, 1)]


async def test_instructions_over_the_limit_are_refused_with_the_limit_and_their_size() -> None:
    """A made agent's instructions go with every request it makes: a model that writes megabytes of them reads why
    they were refused (a tool error), and nothing is made."""
    huge = "x" * (10 * 1024 * 1024)
    script = model(
        [
            call("agent_create", name="scribe", instructions=huge, toolsets=[]),
            call("agent_call", agent="scribe", input="hi"),
            lambda messages: text(" | ".join(str(part.content) for part in all_returns(messages))),
        ],
        [],
    )
    config, making = RuntimeConfig(model=script), {"agents": ToolPolicy()}  # making agents asks nobody
    async with Runtime(None, entries=[maker(["agents"])], toolsets=TOOLSETS, config=config, policies=making) as rt:
        result = await rt.run("main", "go")
    assert "the instructions are 10485760 bytes, over the limit of 32768 bytes" in result.output
    assert "LLM_DO_MADE_AGENT_MAX_INSTRUCTIONS_BYTES" in result.output
    assert "cannot call 'scribe'" in result.output
    assert len(result.calls) == 1


async def test_the_limit_on_instructions_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DO_MADE_AGENT_MAX_INSTRUCTIONS_BYTES", "8")
    script = model(
        [
            ModelResponse(
                parts=[
                    ToolCallPart("agent_create", {"name": "fits", "instructions": "Write é"}),  # 8 bytes in UTF-8
                    ToolCallPart("agent_create", {"name": "over", "instructions": "Write éé"}),
                ]
            ),
            lambda messages: text(" | ".join(map(str, returns(messages)))),
        ],
        [],
    )
    config = RuntimeConfig.from_settings(model=script)
    assert config.made_agent_max_instructions_bytes == 8
    making = {"agents": ToolPolicy()}  # making agents asks nobody
    async with Runtime(None, entries=[maker(["agents"])], toolsets=TOOLSETS, config=config, policies=making) as rt:
        result = await rt.run("main", "go")
    made, refused = result.output.split(" | ")
    assert made.startswith("Made agent 'fits'")
    assert "the instructions are 10 bytes, over the limit of 8 bytes" in refused
    with pytest.raises(ValueError, match="made_agent_max_instructions_bytes must be >= 1"):
        RuntimeConfig(made_agent_max_instructions_bytes=0)
