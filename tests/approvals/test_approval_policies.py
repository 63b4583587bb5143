"""Approval policies: declared per toolset name in the container or the runtime, overridden from settings,
with rules that see the arguments; bad declarations are reported at load time."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest
from dependency_injector import providers
from pydantic import ValidationError
from pydantic_ai import Agent

from containers import AgentContainer
from llm_do import (
    AgentEntry,
    ApprovalRequest,
    ConfigurationError,
    LlmDoSettings,
    PolicySettings,
    Runtime,
    RuntimeConfig,
    ToolPolicy,
    Toolset,
    Verdict,
    tool,
)
from llm_do.testing import Step, Turn, answering, tool_call

ran: list[str] = []


class Shell(Toolset):
    @tool
    def ls(self, path: str) -> str:
        """List a directory."""
        ran.append(f"ls {path}")
        return f"listed {path}"

    @tool
    def rm(self, path: str) -> str:
        """Remove a file."""
        ran.append(f"rm {path}")
        return f"removed {path}"


class App(AgentContainer):
    shell = providers.Factory(Shell)  # the same class under two names, with two policies
    sandbox = providers.Factory(Shell)
    approval_policies = providers.Dict(
        shell=ToolPolicy(default="ask", tools={"ls": "allow"}),
        sandbox=ToolPolicy(default="allow", rule=lambda tool, args: "deny" if args["path"] == "/" else None),
    )


@pytest.fixture(autouse=True)
def _fresh_record() -> None:
    ran.clear()


def job(*tool_calls: tuple[str, dict[str, Any]], toolset: str = "shell") -> AgentEntry:
    def script(turn: Turn) -> Step:
        if turn.step == 0:
            return [tool_call(name, **args) for name, args in tool_calls]
        return " | ".join(str(content) for content in turn.returns)

    return AgentEntry(Agent(answering(script)), name="job", toolsets=[toolset])


async def test_the_same_toolset_class_under_two_names_has_two_policies() -> None:
    config = RuntimeConfig(approval_mode="reject_all")
    calls_ = (("ls", {"path": "."}), ("rm", {"path": "a"}), ("rm", {"path": "/"}))
    async with Runtime(App(), entries=[job(*calls_, toolset="shell")], config=config) as runtime:
        gated = await runtime.run("job", "go")
    async with Runtime(App(), entries=[job(*calls_, toolset="sandbox")], config=config) as runtime:
        sandboxed = await runtime.run("job", "go")
    assert gated.output.split(" | ")[0] == "listed ."
    assert "approval_mode is 'reject_all'" in gated.output.split(" | ")[1]
    assert "approval_mode is 'reject_all'" in gated.output.split(" | ")[2]
    assert sandboxed.output.split(" | ")[:2] == ["listed .", "removed a"]
    assert "the approval rule of toolset 'sandbox' said 'deny'" in sandboxed.output.split(" | ")[2]
    assert ran == ["ls .", "ls .", "rm a"]


async def test_runtime_policies_replace_the_containers_per_name() -> None:
    runtime = Runtime(
        App(),
        entries=[job(("rm", {"path": "a"}))],
        policies={"shell": ToolPolicy(tools={"rm": "deny"})},
        config=RuntimeConfig(approval_mode="approve_all"),
    )
    async with runtime:
        result = await runtime.run("job", "go")
    assert "toolset 'shell' policy: tool 'rm' is 'deny'" in result.output
    assert ran == []


async def test_settings_override_the_declared_policies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DO_APPROVAL_MODE", "approve_all")
    monkeypatch.setenv("LLM_DO_APPROVAL_POLICIES__shell__tools__ls", "deny")
    monkeypatch.setenv("LLM_DO_APPROVAL_POLICIES", '{"sandbox": {"default": "ask"}}')
    settings = LlmDoSettings()
    assert settings.approval_policies["shell"] == PolicySettings(tools={"ls": "deny"})
    config = RuntimeConfig.from_settings(settings)
    async with Runtime(App(), entries=[job(("ls", {"path": "."}))], config=config) as runtime:
        result = await runtime.run("job", "go")
    assert result.output.startswith("The call to 'ls' was not run: denied by policy")
    assert ran == []

    monkeypatch.setenv("LLM_DO_APPROVAL_MODE", "reject_all")
    config = RuntimeConfig.from_settings()
    sandboxed = job(("rm", {"path": "a"}), ("rm", {"path": "/"}), toolset="sandbox")
    async with Runtime(App(), entries=[sandboxed], config=config) as runtime:
        result = await runtime.run("job", "go")
    first, second = result.output.split(" | ")
    assert "toolset 'sandbox' policy: default is 'ask'" in first, "the settings' default replaced the declared one"
    assert "the approval rule of toolset 'sandbox' said 'deny'" in second, "the declared rule still applies"
    assert ran == []


async def test_a_rule_sees_tool_and_arguments_and_the_strictest_decision_wins() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    asked: list[str] = []

    async def rule(tool_name: str, args: Mapping[str, Any]) -> Verdict | None:
        seen.append((tool_name, dict(args)))
        path = str(args["path"])
        if path.startswith("/etc"):
            return Verdict("deny", "system files are off limits")
        if not path.startswith("tmp/"):
            return Verdict("ask", "outside tmp/")
        return Verdict("allow")

    def approver(request: ApprovalRequest) -> str:
        asked.append(f"{request.tool} {request.args['path']}: {request.reason}")
        return "approve"

    entry_ = job(
        ("rm", {"path": "tmp/a"}),  # rule allows, default allows
        ("rm", {"path": "home/a"}),  # rule asks
        ("ls", {"path": "/etc"}),  # the tool is allowed, the rule denies: deny
        ("rm", {"path": "tmp/keep"}),  # allowed here; denied below, where the per-tool entry says deny
    )
    policy = ToolPolicy(tools={"ls": "allow"}, rule=rule)
    runtime = Runtime(
        None,
        entries=[entry_],
        toolsets={"shell": Shell},
        policies={"shell": policy},
        approver=approver,
        config=RuntimeConfig(approval_mode="prompt"),
    )
    async with runtime:
        first = (await runtime.run("job", "go")).output.split(" | ")
        runtime_with_deny = Runtime(
            None,
            entries=[job(("rm", {"path": "tmp/keep"}))],
            toolsets={"shell": Shell},
            policies={"shell": ToolPolicy(tools={"rm": "deny"}, rule=rule)},
            config=RuntimeConfig(approval_mode="approve_all"),
        )
        async with runtime_with_deny:
            second = (await runtime_with_deny.run("job", "go")).output
    assert sorted(seen[:4], key=str) == sorted(
        [("rm", {"path": "tmp/a"}), ("rm", {"path": "home/a"}), ("ls", {"path": "/etc"}), ("rm", {"path": "tmp/keep"})],
        key=str,
    )
    assert asked == ["rm home/a: outside tmp/"]
    assert first[:2] == ["removed tmp/a", "removed home/a"]
    assert (
        first[2]
        == "The call to 'ls' was not run: denied by policy (system files are off limits). Do not retry the same call."
    )
    assert first[3] == "removed tmp/keep"
    assert "toolset 'shell' policy: tool 'rm' is 'deny'" in second
    assert sorted(ran) == ["rm home/a", "rm tmp/a", "rm tmp/keep"]


def _refuse_to_connect(tool: str, args: Any) -> None:
    raise ConnectionError("could not reach postgresql://policy:s3cret-pw@10.0.3.4/rules for user 'alice@corp'")


@pytest.mark.parametrize(
    ("rule", "failure", "detail"),
    [
        (lambda tool, args: 1 / 0, "ZeroDivisionError", "division by zero"),
        (lambda tool, args: "yes", "TypeError", "it returned 'yes'"),
        (_refuse_to_connect, "ConnectionError", "s3cret-pw"),
    ],
)
async def test_a_rule_that_fails_is_reported_and_the_call_is_denied_not_approved(
    rule: Any, failure: str, detail: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The model (and so the person using it) reads that the rule failed; the message, which can hold a server's
    secrets or another person's data, is for the log."""
    caplog.set_level(logging.ERROR, logger="llm_do")
    runtime = Runtime(
        None,
        entries=[job(("rm", {"path": "a"}))],
        toolsets={"shell": Shell},
        policies={"shell": ToolPolicy(default="allow", rule=rule)},
        config=RuntimeConfig(approval_mode="approve_all"),
    )
    async with runtime:
        result = await runtime.run("job", "go")
    assert ran == []
    assert result.output.startswith(
        f"The call to 'rm' was not run: denied by policy (the approval rule of toolset 'shell' failed ({failure}; "
    )
    assert detail not in result.output
    [record] = [r for r in caplog.records if r.name == "llm_do"]
    assert record.getMessage() == "approval rule of toolset 'shell' failed for tool 'rm'; the call is denied"
    assert record.exc_info is not None and detail in str(record.exc_info[1])


def test_policy_declarations_are_checked() -> None:
    with pytest.raises(ValueError, match=r"ToolPolicy.tools\['rm'\] must be 'allow', 'ask' or 'deny', got 'maybe'"):
        ToolPolicy(tools={"rm": "maybe"})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match=r"ToolPolicy\.default must be"):
        ToolPolicy(default="yes")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        PolicySettings.model_validate({"default": "ask", "rule": "anything"})


def test_policies_naming_unknown_toolsets_or_tools_fail_at_load_time(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="an approval policy names toolset 'shel', which is neither"):
        Runtime(App(), entries=[job()], policies={"shel": ToolPolicy(default="deny")})
    with pytest.raises(ConfigurationError, match=r"toolset 'shell' names tool\(s\) 'rmm'.*its tools: ls, rm"):
        Runtime(App(), entries=[job()], policies={"shell": ToolPolicy(tools={"rmm": "deny"})})
    with pytest.raises(ConfigurationError, match=r"toolset 'sandbox' names tool\(s\) 'del'"):
        Runtime(
            App(),
            entries=[job()],
            config=RuntimeConfig(approval_policies={"sandbox": PolicySettings(tools={"del": "deny"})}),
        )
    with pytest.raises(ConfigurationError, match=r"toolset 'runtime_shell' names tool\(s\) 'x'"):
        Runtime(None, toolsets={"runtime_shell": Shell}, policies={"runtime_shell": ToolPolicy(tools={"x": "ask"})})
    monkeypatch.setenv("LLM_DO_APPROVAL_POLICIES__Shel__default", "deny")
    with pytest.raises(ConfigurationError, match="names toolset 'shel'"):
        Runtime(App(), entries=[job()], config=RuntimeConfig.from_settings())


def test_bad_approval_settings_fail_at_load_time() -> None:
    with pytest.raises(ConfigurationError, match="approval_mode must be one of 'prompt', 'approve_all', 'reject_all'"):
        Runtime(None, config=RuntimeConfig(approval_mode="ask_me"))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="approval_on_deny must be one of 'tell_model', 'raise'"):
        Runtime(None, config=RuntimeConfig(approval_on_deny="shout"))  # type: ignore[arg-type]

    class Broken(AgentContainer):
        approval_policies = providers.Dict(shell={"default": "ask"})

    with pytest.raises(ConfigurationError, match="the approval policy for toolset 'shell' is a dict"):
        Runtime(Broken(), config=RuntimeConfig())


class Guarded(Toolset):
    default_policy = ToolPolicy(tools={"rm": "deny"})

    @tool
    def ls(self, path: str) -> str:
        """List a directory."""
        return f"listed {path}"

    @tool
    def rm(self, path: str) -> str:
        """Remove a file."""
        ran.append(f"rm {path}")
        return f"removed {path}"


class GuardedApp(AgentContainer):
    guarded = providers.Factory(Guarded)


async def test_a_toolset_class_default_policy_applies_until_a_policy_is_declared_for_its_name() -> None:
    entry = job(("ls", {"path": "."}), ("rm", {"path": "a"}), toolset="guarded")
    async with Runtime(GuardedApp(), entries=[entry]) as runtime:
        defaulted = await runtime.run("job", "go")
    assert defaulted.output.startswith("listed . | The call to 'rm' was not run: denied by policy")
    assert ran == []
    policies = {"guarded": ToolPolicy()}  # declared for the name: replaces the class default
    async with Runtime(GuardedApp(), entries=[entry], policies=policies) as runtime:
        declared = await runtime.run("job", "go")
    assert declared.output == "listed . | removed a"
    assert ran == ["rm a"]


async def test_settings_overrides_apply_on_top_of_a_class_default_policy() -> None:
    entry = job(("ls", {"path": "."}), ("rm", {"path": "a"}), toolset="guarded")
    config = RuntimeConfig(approval_policies={"guarded": PolicySettings(tools={"ls": "deny"})})
    async with Runtime(GuardedApp(), entries=[entry], config=config) as runtime:
        result = await runtime.run("job", "go")
    assert [part.split(": ")[1] for part in result.output.split(" | ")] == [
        "denied by policy (toolset 'guarded' policy"
    ] * 2
    assert ran == []


def test_a_runtime_tells_the_policy_of_each_toolset_name() -> None:
    runtime = Runtime(
        App(),
        entries=[
            job(toolset="shell"),
            AgentEntry(Agent(answering(lambda turn: "x")), name="other", toolsets=["sandbox"]),
        ],
    )
    assert runtime.policy("shell") == ToolPolicy(default="ask", tools={"ls": "allow"})
    assert runtime.policy("sandbox").rule is not None
    # no declared policy: the tools nobody declared safe ask (approval_default); read-only ones run (see verdict)
    assert runtime.policy("unknown") == ToolPolicy(default="ask")
    earlier = Runtime(App(), entries=[job(toolset="shell")], config=RuntimeConfig(approval_default="allow"))
    assert earlier.policy("unknown") == ToolPolicy()  # no policy: every call allowed
