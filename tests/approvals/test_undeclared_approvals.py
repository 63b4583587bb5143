"""A tool nobody declared safe asks: no declared policy for its toolset, and not declared read-only. Read-only
tools and agents called as tools run; `approval_default="allow"` keeps the earlier behaviour. (What `llm-do list`
and `llm-do check` say of them: tests/cli/test_cli_undeclared_approvals.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from dependency_injector import providers
from pydantic_ai import Agent, Tool
from pydantic_ai.toolsets import FunctionToolset

from containers import AgentContainer
from llm_do import (
    AgentEntry,
    Approval,
    ApprovalRequest,
    ConfigurationError,
    LlmDoSettings,
    PolicySettings,
    Runtime,
    RuntimeConfig,
    ToolPolicy,
    Toolset,
    tool,
)
from llm_do.testing import Step, Turn, answering, tool_call

sent: list[str] = []


class Notify(Toolset):
    """A ported project's toolset: one tool reads, one sends; no policy is declared for it."""

    @tool(read_only=True)
    def unread(self) -> int:
        """How many notifications wait."""
        return 3

    @tool
    def send_notification(self, message: str) -> str:
        """Send a notification to the team."""
        sent.append(message)
        return f"sent {message!r}"


class App(AgentContainer):
    notify = providers.Factory(Notify)


@pytest.fixture(autouse=True)
def _fresh() -> None:
    sent.clear()


def job(
    *tool_calls: tuple[str, dict[str, Any]], toolsets: tuple[str, ...] = ("notify",), name: str = "job"
) -> AgentEntry:
    def script(turn: Turn) -> Step:
        if turn.step == 0:
            return [tool_call(tool, **args) for tool, args in tool_calls]
        return " | ".join(str(content) for content in turn.returns)

    return AgentEntry(Agent(answering(script)), name=name, toolsets=list(toolsets))


SEND = ("send_notification", {"message": "deploy done"})
UNREAD = ("unread", {})


async def test_a_python_tool_without_a_policy_is_refused_under_reject_all() -> None:
    config = RuntimeConfig(approval_mode="reject_all")
    async with Runtime(App(), entries=[job(SEND, UNREAD)], config=config) as runtime:
        result = await runtime.run("job", "go")
    refused, counted = result.output.split(" | ")
    assert sent == []
    assert "'send_notification' was not run: it needs approval (tool 'send_notification' of toolset 'notify' is " in (
        refused
    )
    assert "approval_default is 'ask'" in refused
    assert counted == "3"  # declared read-only: it runs


async def test_a_python_tool_without_a_policy_asks_the_approver_and_a_read_only_one_does_not() -> None:
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Approval:
        asked.append(request)
        return Approval.approve()

    async with Runtime(App(), entries=[job(SEND, UNREAD)], approver=approver) as runtime:
        result = await runtime.run("job", "go")
    assert result.output == "sent 'deploy done' | 3"
    assert [(request.toolset, request.tool) for request in asked] == [("notify", "send_notification")]
    assert "is not declared read-only" in asked[0].reason


async def test_approval_default_allow_keeps_the_earlier_behaviour() -> None:
    config = RuntimeConfig(approval_mode="reject_all", approval_default="allow")
    async with Runtime(App(), entries=[job(SEND)], config=config) as runtime:
        result = await runtime.run("job", "go")
    assert result.output == "sent 'deploy done'" and sent == ["deploy done"]
    assert RuntimeConfig.from_settings(LlmDoSettings(approval_default="allow")).approval_default == "allow"
    assert RuntimeConfig().approval_default == "ask"


def test_approval_default_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DO_APPROVAL_DEFAULT", "allow")
    assert RuntimeConfig.from_settings().approval_default == "allow"
    monkeypatch.setenv("LLM_DO_APPROVAL_DEFAULT", "maybe")
    with pytest.raises(Exception, match="LLM_DO_APPROVAL_DEFAULT"):
        RuntimeConfig.from_settings()


async def test_approval_default_deny_refuses_without_asking() -> None:
    config = RuntimeConfig(approval_default="deny")  # prompt mode, no approver: nobody would be asked
    async with Runtime(App(), entries=[job(SEND, UNREAD)], config=config) as runtime:
        result = await runtime.run("job", "go")
    assert result.output.startswith("The call to 'send_notification' was not run: denied by policy")
    assert result.output.endswith(" | 3") and sent == []


async def test_a_declared_policy_decides_every_tool_whatever_they_declare() -> None:
    policies = {"notify": ToolPolicy()}  # the class-level way too: `default_policy = ToolPolicy()`
    config = RuntimeConfig(approval_mode="reject_all")
    async with Runtime(App(), entries=[job(SEND)], config=config, policies=policies) as runtime:
        result = await runtime.run("job", "go")
    assert sent == ["deploy done"] and result.output == "sent 'deploy done'"

    class Declared(Notify):
        default_policy = ToolPolicy(tools={"unread": "ask"})

    async with Runtime(None, entries=[job(SEND, UNREAD)], toolsets={"notify": Declared}, config=config) as runtime:
        result = await runtime.run("job", "go")
    assert result.output.startswith("sent 'deploy done' | The call to 'unread' was not run")


async def test_settings_overrides_apply_on_top_of_what_tools_declare() -> None:
    overrides = {"notify": PolicySettings(tools={"send_notification": "allow", "unread": "deny"})}
    config = RuntimeConfig(approval_mode="reject_all", approval_policies=overrides)
    async with Runtime(App(), entries=[job(SEND, UNREAD)], config=config) as runtime:
        result = await runtime.run("job", "go")
        verdicts = runtime.tool_verdicts("notify")
    assert result.output.startswith("sent 'deploy done' | The call to 'unread' was not run: denied by policy")
    assert verdicts is not None
    assert {tool: verdict.decision for tool, verdict in verdicts.items()} == {
        "unread": "deny",
        "send_notification": "allow",
    }


async def test_a_function_toolset_tool_declared_read_only_runs() -> None:
    lookups = FunctionToolset[Any]()

    @lookups.tool_plain(metadata={"read_only": True})
    def unread() -> int:
        """How many notifications wait."""
        return 3

    @lookups.tool_plain
    def send_notification(message: str) -> str:
        """Send a notification."""
        sent.append(message)
        return "sent"

    config = RuntimeConfig(approval_mode="reject_all")
    async with Runtime(None, entries=[job(UNREAD, SEND)], toolsets={"notify": lambda: lookups}, config=config) as rt:
        result = await rt.run("job", "go")
        verdicts = rt.tool_verdicts("notify")
    assert result.output.startswith("3 | The call to 'send_notification' was not run") and sent == []
    assert verdicts is None  # a plain factory: its tools are known once it is built


async def test_an_agent_called_as_a_tool_runs_without_asking_and_its_own_tools_are_gated() -> None:
    config = RuntimeConfig(approval_mode="reject_all")
    helper = job(SEND, name="helper")
    boss = job(("helper", {"input": "tell them"}), toolsets=("helper",), name="boss")
    async with Runtime(App(), entries=[boss, helper], config=config) as runtime:
        result = await runtime.run("boss", "go")
        verdicts = runtime.tool_verdicts("helper")
    assert [call.entry for call in result.calls] == ["boss", "helper"]  # the agent call ran
    assert "'send_notification' was not run" in result.output and sent == []
    assert verdicts is not None and verdicts["helper"].decision == "allow"
    assert "is an agent" in (verdicts["helper"].reason or "")


def test_a_tool_cannot_be_both_read_only_and_asking() -> None:
    with pytest.raises(TypeError, match="both read_only and requires_approval"):
        tool(read_only=True, requires_approval=True)


def test_approval_default_must_be_a_decision() -> None:
    with pytest.raises(ConfigurationError, match="approval_default"):
        Runtime(App(), entries=[job(SEND)], config=RuntimeConfig(approval_default="sometimes"))  # type: ignore[arg-type]


async def test_an_agents_own_tools_nobody_declared_safe_are_named_at_load(caplog: pytest.LogCaptureFixture) -> None:
    def count(kind: str) -> int:
        """Count things of `kind`."""
        return 1

    def purge(kind: str) -> str:
        """Delete everything of `kind`."""
        return "purged"

    agent = Agent(answering(lambda turn: "done"), tools=[Tool(count, metadata={"read_only": True}), purge])
    quiet = Agent(answering(lambda turn: "done"), tools=[Tool(count, metadata={"read_only": True})])
    with caplog.at_level("WARNING", logger="llm_do"):
        async with Runtime(App(), entries=[AgentEntry(agent, name="janitor"), AgentEntry(quiet, name="counter")]):
            pass
    warned = [record.getMessage() for record in caplog.records if "own tools" in record.getMessage()]
    assert warned == [
        "entry 'janitor': its agent's own tools run without llm-do's approvals (policies and approvers gate the "
        "entry's toolsets only): purge. Declare a tool read-only if it is (Tool(f, metadata={'read_only': True})), "
        "or move the tools to a toolset the entry names (a provider of FunctionToolset([...])), where they are gated"
    ]


async def test_an_agents_own_tool_that_requires_approval_is_refused_at_load_naming_the_way_to_have_it_asked() -> None:
    def purge(kind: str) -> str:
        """Delete everything of `kind`."""
        return "purged"

    agent = Agent(answering(lambda turn: "done"), tools=[Tool(purge, requires_approval=True)])
    with pytest.raises(ConfigurationError) as refused:
        async with Runtime(App(), entries=[AgentEntry(agent, name="janitor")]):
            pass
    assert str(refused.value) == (
        "entry 'janitor': its agent's own tool 'purge' requires approval, which llm-do asks only for the tools of "
        "the entry's toolsets (pydantic-ai would end the run with a deferred call nobody answers): move it to a "
        "toolset the entry names (a provider of FunctionToolset([...])), where it asks"
    )
