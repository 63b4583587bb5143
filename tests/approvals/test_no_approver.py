"""A run that no one can answer says so, once per runtime: in `prompt` mode, with no approver for the run (none given
to it, its session or the `Runtime`, and not a live run), when some toolset's calls can ask. Runs that someone can
answer, and runtimes whose tools never ask, say nothing."""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import pytest
from pydantic_ai import Agent

from llm_do import (
    AgentEntry,
    Approval,
    ApprovalUnavailable,
    NoApproverWarning,
    Runtime,
    RuntimeConfig,
    ToolPolicy,
    Toolset,
    tool,
)
from llm_do.testing import answering, tool_call


class Notify(Toolset):
    """No policy is declared for it: `send` asks (nobody declared it safe), `unread` is read-only."""

    @tool(read_only=True)
    def unread(self) -> int:
        """How many notifications wait."""
        return 3

    @tool
    def send(self, message: str) -> str:
        """Send a notification."""
        return f"sent {message!r}"


class Inbox(Toolset):
    """Only read-only tools: nothing to ask."""

    @tool(read_only=True)
    def count(self) -> int:
        """How many messages wait."""
        return 3


class Guarded(Notify):
    default_policy: ClassVar[ToolPolicy | None] = ToolPolicy(tools={"send": "deny"})
    """Refuses what would write: nothing to ask either."""


def reader(toolsets: list[str]) -> AgentEntry:
    return AgentEntry(Agent(answering(lambda turn: "3 unread")), name="reader", toolsets=toolsets)


def runtime(toolsets: dict[str, Any] | None = None, **options: Any) -> Runtime:
    named = toolsets if toolsets is not None else {"notify": Notify}
    return Runtime(None, entries=[reader(list(named))], toolsets=named, **options)


async def test_a_run_no_one_can_answer_says_so_once_naming_the_toolsets_and_the_ways_out() -> None:
    async with runtime({"notify": Notify, "inbox": Inbox}) as rt:
        with pytest.warns(NoApproverWarning) as told:
            await rt.run("reader", "how many?")
        with warnings.catch_warnings():
            warnings.simplefilter("error", NoApproverWarning)
            await rt.run("reader", "how many now?")  # said once per runtime
    [warning] = told.list
    message = str(warning.message)
    assert "toolset 'notify' (entry reader)" in message and "inbox" not in message
    assert "ApprovalUnavailable" in message
    for way_out in (
        "Runtime(approver=...)",
        "runtime.session(id, approver=...)",
        "runtime.run(..., approver=...)",
        "approve_all",
        "reject_all",
        "ToolPolicy",
        "read_only=True",
    ):
        assert way_out in message
    assert warning.filename == __file__  # points at the run that has no approver


async def test_the_call_that_asks_still_fails_with_approval_unavailable() -> None:
    entry = AgentEntry(
        Agent(answering(lambda turn: tool_call("send", message="hi") if turn.step == 0 else "done")),
        name="sender",
        toolsets=["notify"],
    )
    async with Runtime(None, entries=[entry], toolsets={"notify": Notify}) as rt:
        with pytest.warns(NoApproverWarning), pytest.raises(ApprovalUnavailable, match=r"runtime\.session"):
            await rt.run("sender", "send hi")


def approve(request: object) -> Approval:
    return Approval.approve()


async def _run_with_approver(rt: Runtime) -> None:
    await rt.run("reader", "go", approver=approve)


async def _session_with_approver(rt: Runtime) -> None:
    session = await rt.session("ada", approver=approve)
    await session.run("reader", "go")


async def _stream(rt: Runtime) -> None:
    async with rt.stream("reader", "go", model_events=False) as live:
        await live.result()


async def _plain_run(rt: Runtime) -> None:
    await rt.run("reader", "go")


@pytest.mark.parametrize(
    ("options", "start"),
    [
        pytest.param({"approver": approve}, _plain_run, id="the runtime's approver"),
        pytest.param({}, _run_with_approver, id="the run's approver"),
        pytest.param({}, _session_with_approver, id="the session's approver"),
        pytest.param({}, _stream, id="a live run"),
        pytest.param({"config": RuntimeConfig(approval_mode="approve_all")}, _plain_run, id="approve_all"),
        pytest.param({"config": RuntimeConfig(approval_mode="reject_all")}, _plain_run, id="reject_all"),
        pytest.param({"toolsets": {"inbox": Inbox}}, _plain_run, id="read-only tools"),
        pytest.param({"toolsets": {"guarded": Guarded}}, _plain_run, id="a policy that denies"),
        pytest.param({"policies": {"notify": ToolPolicy()}}, _plain_run, id="a policy that allows"),
        pytest.param({"config": RuntimeConfig(approval_default="allow")}, _plain_run, id="approval_default allow"),
        pytest.param({"toolsets": {"notify": lambda: Notify()}}, _plain_run, id="tools known only once built"),
    ],
)
async def test_nothing_is_said_when_someone_can_answer_or_nothing_asks(
    options: dict[str, Any], start: Callable[[Runtime], Awaitable[None]]
) -> None:
    async with runtime(**options) as rt:
        with warnings.catch_warnings():
            warnings.simplefilter("error", NoApproverWarning)
            await start(rt)


async def test_what_the_entries_it_calls_can_ask_counts_and_what_is_declared_for_a_factory() -> None:
    writer = AgentEntry(Agent(answering(lambda turn: "written")), name="writer", toolsets=["notify"])
    boss = AgentEntry(Agent(answering(lambda turn: "done")), name="boss", toolsets=["writer", "later"])
    toolsets: dict[str, Any] = {"notify": Notify, "later": lambda: Inbox()}
    policies = {"later": ToolPolicy(default="ask")}  # declared for a toolset whose tools are known once built
    async with Runtime(None, entries=[boss, writer], toolsets=toolsets, policies=policies) as rt:
        with pytest.warns(NoApproverWarning) as told:
            await rt.run("boss", "go")
    assert "toolset 'later' (entry boss); toolset 'notify' (entry writer)" in str(told.list[0].message)
