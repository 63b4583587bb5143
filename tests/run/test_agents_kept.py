"""Agents made to be kept by a session (`agent_create(..., keep="session")`, `CallScope.make_agent(keep=...)`):
callable in the session's later runs, never from another session or a run of none, gone when the session closes,
using only toolsets of their maker, and their calls asking as any call does."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from llm_do import (
    AgentEntry,
    Approval,
    ApprovalRequest,
    CallScope,
    Runtime,
    RuntimeConfig,
    ToolPolicy,
    ToolsetError,
    entry,
)

from .test_agents_made import TOOLSETS, WRITTEN, call, returns, text


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The maker reads its prompt as an order: `make KEEP NAME [TOOLSET...]` makes an agent, `call NAME LINE`
    calls one; then it answers with what its tool returned. A made agent writes its prompt with `write`, then
    answers with what the write returned."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    prompt = next((part.content for part in last.parts if isinstance(part, UserPromptPart)), None)
    if "agent_create" in {definition.name for definition in info.function_tools}:
        if not isinstance(prompt, str):
            return text(" | ".join(map(str, returns(messages))))
        verb, *words = prompt.split()
        if verb == "make":
            keep, name, *toolsets = words
            toolsets = toolsets or ["notes"]
            return call("agent_create", name=name, instructions="Write.", toolsets=toolsets, keep=keep)
        name, line = words
        return call("agent_call", agent=name, input=line)
    if isinstance(prompt, str):
        return call("write", line=prompt)
    return text(f"wrote: {returns(messages)[0]}")


def runtime(**options: Any) -> Runtime:
    config = RuntimeConfig(model=FunctionModel(respond))
    entries = [AgentEntry(Agent(), name="main", toolsets=["agents", "notes"])]
    return Runtime(None, entries=entries, toolsets=TOOLSETS, config=config, **options)


@pytest.fixture(autouse=True)
def _forget_written() -> None:
    WRITTEN.clear()


async def test_an_agent_kept_by_a_session_is_called_in_its_later_runs_and_by_no_other_session() -> None:
    async with runtime() as rt:
        session = await rt.session("ada")
        made = await session.run("main", "make session scribe")
        assert "Made agent 'scribe'" in made.output and "kept for this conversation" in made.output
        assert sorted(session.made) == ["scribe"]
        later = await session.run("main", "call scribe milk")
        assert later.output == "wrote: wrote 'milk'"
        top, child = later.calls
        assert (child.entry, child.parent, child.depth) == ("scribe", top.id, 1)
        other = await rt.session("bob")
        refused = await other.run("main", "call scribe eggs")
        alone = await rt.run("main", "call scribe eggs")  # a run of no session: a session of its own
        assert "cannot call 'scribe'" in refused.output and "cannot call 'scribe'" in alone.output
        assert "kept by its session (none)" in refused.output
        taken = await session.run("main", "make run scribe")  # the session's name is taken for its runs
        assert "the name 'scribe' is taken" in taken.output
        free = await other.run("main", "make session scribe")  # ... not for another session's
        assert "Made agent 'scribe'" in free.output
    assert WRITTEN == ["milk"]


async def test_an_agent_kept_by_a_session_is_gone_when_the_session_closes() -> None:
    async with runtime() as rt:
        session = await rt.session("ada")
        await session.run("main", "make session scribe")
        assert (await session.run("main", "call scribe milk")).output == "wrote: wrote 'milk'"
        await session.aclose()
        assert session.made == {}
        again = await rt.session("ada")  # the same id, opened again: its history goes on, its agents do not
        assert again is not session
        result = await again.run("main", "call scribe eggs")
        assert "cannot call 'scribe'" in result.output
        assert "Made agent 'scribe'" in (await again.run("main", "make session scribe")).output
    assert WRITTEN == ["milk"]


async def test_an_agent_made_for_the_run_is_still_forgotten_with_its_run_in_a_session() -> None:
    async with runtime() as rt:
        session = await rt.session("ada")
        assert "kept for" not in (await session.run("main", "make run temp")).output
        assert session.made == {}
        result = await session.run("main", "call temp milk")
    assert "cannot call 'temp'" in result.output
    assert WRITTEN == []


async def test_an_agent_kept_by_a_session_uses_only_toolsets_its_maker_has() -> None:
    async with runtime() as rt:
        session = await rt.session("ada")
        result = await session.run("main", "make session spy secret")
        assert "may use only its toolsets (agents, notes), not secret" in result.output
        assert session.made == {}
        assert "cannot call 'spy'" in (await session.run("main", "call spy now")).output


async def test_a_kept_agents_calls_in_a_later_run_pass_the_same_approvals() -> None:
    asked: list[tuple[str, str, tuple[str, ...]]] = []
    answers = iter([Approval.deny("not today"), Approval.approve()])

    def approver(request: ApprovalRequest) -> Approval:
        asked.append((request.toolset, request.tool, tuple(request.chain)))
        return next(answers)

    async with runtime(policies={"notes": ToolPolicy(default="ask")}, approver=approver) as rt:
        session = await rt.session("ada")
        await session.run("main", "make session scribe")
        assert asked == []  # making it asks nothing; its tools ask when it uses them
        denied = await session.run("main", "call scribe milk")
        approved = await session.run("main", "call scribe eggs")
    assert asked == [("notes", "write", ("main", "scribe"))] * 2
    assert "not today" in denied.output and approved.output == "wrote: wrote 'eggs'"
    assert WRITTEN == ["eggs"]


async def test_make_agent_from_python_keeps_for_the_session_and_refuses_an_unknown_keep() -> None:
    @entry(toolsets=["notes"])
    async def planner(scope: CallScope, order: str) -> Any:
        if order == "make":
            scope.make_agent("scribe", "Write.", toolsets=["notes"], keep="session")
            return "made"
        if order == "forever":
            scope.make_agent("scribe", "Write.", keep="forever")  # type: ignore[arg-type]
        return await scope.call_agent("scribe", "milk")

    config = RuntimeConfig(model=FunctionModel(respond))
    async with Runtime(None, entries=[planner], toolsets=TOOLSETS, config=config) as rt:
        session = await rt.session("ada")
        assert (await session.run("planner", "make")).output == "made"
        assert (await session.run("planner", "call")).output == "wrote: wrote 'milk'"
        with pytest.raises(ToolsetError, match="keep must be one of run, session, got 'forever'"):
            await session.run("planner", "forever")
        with pytest.raises(ToolsetError, match="cannot call 'scribe'"):
            await rt.run("planner", "call")


async def test_a_session_keeps_at_most_32_made_agents_and_a_run_makes_at_most_32() -> None:
    @entry(toolsets=["notes"])
    async def planner(scope: CallScope, order: str) -> Any:
        keep, first, count = order.split()
        for n in range(int(first), int(first) + int(count)):
            scope.make_agent(f"scribe{n}", "Write.", toolsets=["notes"], keep=keep)  # type: ignore[arg-type]
        return "made"

    config = RuntimeConfig(model=FunctionModel(respond))
    async with Runtime(None, entries=[planner], toolsets=TOOLSETS, config=config) as rt:
        session = await rt.session("ada")
        assert (await session.run("planner", "session 0 20")).output == "made"
        assert (await session.run("planner", "session 20 12")).output == "made"  # 32 kept, over two runs
        with pytest.raises(ToolsetError, match="this session keeps 32 made agents, the most a session may keep"):
            await session.run("planner", "session 32 1")
        assert (await session.run("planner", "run 100 32")).output == "made"  # the run's own are counted apart
        with pytest.raises(ToolsetError, match="this run keeps 32 made agents, the most a run may keep"):
            await rt.run("planner", "run 0 33")
