"""Every way one agent reaches another passes the same gate, with the caller's rules: the entry called as a tool,
`scope.call_agent` from Python, `agent_call` of `dynamic_agents`, and an agent the caller made (given the entry as a
tool, or `dynamic_agents`). Each way is tried against `deny`, `ask` and `attachments: ask`, declared by the calling
worker's own `approvals:` (which gives the toolset the name `deployer@caller`), by `Runtime(policies=)`, by the
container's `approval_policies` and by settings overrides."""

from __future__ import annotations

import contextlib
import inspect
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from dependency_injector import providers
from pydantic_ai import Agent, RunContext

from containers import AgentContainer
from llm_do import (
    AgentEntry,
    Approval,
    ApprovalDenied,
    ApprovalRequest,
    CallScope,
    MaxDepthExceeded,
    PolicySettings,
    Runtime,
    RuntimeConfig,
    Scope,
    ToolPolicy,
    Toolset,
    ToolsetSpec,
    tool,
)
from llm_do.run import entry_toolset
from llm_do.testing import Step, Turn, answering, tool_call
from llm_do.toolsets import DynamicAgents

ROUTES = ("tool", "call_agent", "agent_call", "made_tool", "made_agent_call")
"""The entry called as a tool; `call_agent` from a tool's body; `agent_call`; an agent the caller made, given the entry
as a tool; an agent the caller made, given `dynamic_agents`."""
RULES = ("deny", "ask", "attachments_ask")
SOURCES = (pytest.param("worker", marks=pytest.mark.cli), "runtime", "container", "settings")

deployed: list[str] = []


class Relay(Toolset):
    """Hands a task to the `deployer` entry from Python (`scope.call_agent`), as a project's own tool would."""

    default_policy: ClassVar[ToolPolicy | None] = ToolPolicy()

    @tool
    async def relay(self, ctx: RunContext[CallScope], input: str, attachments: list[str] | None = None) -> str:
        """Hand a task to the deployer."""
        try:
            return str(await ctx.deps.call_agent("deployer", input, attachments=attachments or ()))
        except ApprovalDenied as denied:
            return f"not run: {denied.why}"


RELAY_MODULE = '''
    from typing import ClassVar

    from pydantic_ai import RunContext

    from llm_do import ApprovalDenied, CallScope, ToolPolicy, Toolset, tool


    class Relay(Toolset):
        default_policy: ClassVar[ToolPolicy | None] = ToolPolicy()

        @tool
        async def relay(self, ctx: RunContext[CallScope], input: str, attachments: list[str] | None = None) -> str:
            """Hand a task to the deployer."""
            try:
                return str(await ctx.deps.call_agent("deployer", input, attachments=attachments or ()))
            except ApprovalDenied as denied:
                return f"not run: {denied.why}"
'''

WORKER_RULES = {"deny": "{default: deny}", "ask": "{default: ask}", "attachments_ask": "{attachments: ask}"}
POLICIES = {
    "deny": ToolPolicy(default="deny"),
    "ask": ToolPolicy(default="ask"),
    "attachments_ask": ToolPolicy(attachments="ask"),
}
OVERRIDES = {
    "deny": PolicySettings(default="deny"),
    "ask": PolicySettings(default="ask"),
    "attachments_ask": PolicySettings(attachments="ask"),
}


@pytest.fixture(autouse=True)
def _fresh() -> None:
    deployed.clear()


def script(route: str, files: list[str], *, entry_use: str, agents: str) -> Callable[[Turn], Step]:
    """The caller takes `route` to the deployer, handing it `files`; the deployer notes each task it is given."""
    handed: dict[str, Any] = {"attachments": files} if files else {}
    to_deployer = (
        tool_call("deployer", input="ship", **handed)
        if route in ("tool", "made_tool")
        else tool_call("relay", input="ship", **handed)
        if route == "call_agent"
        else tool_call("agent_call", agent="deployer", input="ship", **handed)
    )
    made = {"made_tool": [entry_use], "made_agent_call": [agents]}.get(route)
    caller_steps: list[Step] = (
        [to_deployer]
        if made is None
        else [
            tool_call("agent_create", name="helper", instructions="Helper.", toolsets=made),
            tool_call("agent_call", agent="helper", input="ship", **handed),
        ]
    )

    def answer(turn: Turn) -> Step:
        who = turn.info.instructions or ""
        if "Deploy." in who:
            deployed.append(turn.prompt)
            return "deployed"
        steps = [to_deployer] if "Helper." in who else caller_steps
        if turn.step < len(steps):
            return steps[turn.step]
        return " | ".join(str(content) for content in turn.returns)

    return answer


class Asked:
    """An approver that denies every question about the deployer (recording it) and approves any other."""

    def __init__(self) -> None:
        self.requests: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> Approval:
        if request.tool != "deployer":
            return Approval.approve()  # making or calling the helper, should a policy ask for it
        self.requests.append(request)
        return Approval.deny("not now")


async def run_worker(root: Path, route: str, rule: str, files: list[str], asked: Asked) -> str:
    """The calling worker's own `approvals:` hold the rule (its toolset is `deployer@caller`)."""
    from llm_do.project import load_project  # the cli extra (.worker files are YAML)

    (root / "caller.worker").write_text(
        "---\ntoolsets: [deployer, dynamic_agents, relay]\n"
        f"approvals: {{deployer: {WORKER_RULES[rule]}}}\n---\nCaller.\n"
    )
    (root / "deployer.worker").write_text("Deploy.\n")
    (root / "tools.py").write_text(textwrap.dedent(RELAY_MODULE).lstrip())
    model = answering(script(route, files, entry_use="deployer@caller", agents="dynamic_agents"))
    async with load_project(root, model=model, approver=asked) as project:
        return str((await project.runtime.run("caller", "go")).output)


async def run_library(root: Path, source: str, route: str, rule: str, files: list[str], asked: Asked) -> str:
    """The rule is declared for the entry's name in the library: `Runtime(policies=)`, the container's
    `approval_policies`, or settings."""
    model = answering(script(route, files, entry_use="deployer", agents="agents"))
    entries = [
        AgentEntry(Agent(model, instructions="Caller."), name="caller", toolsets=["deployer", "agents", "relay"]),
        AgentEntry(Agent(model, instructions="Deploy."), name="deployer"),
    ]
    policy = POLICIES[rule]

    class App(AgentContainer):
        approval_policies = providers.Dict(deployer=policy)

    container = App() if source == "container" else None
    config = RuntimeConfig(
        project_root=root, approval_policies={"deployer": OVERRIDES[rule]} if source == "settings" else {}
    )
    policies = {"deployer": policy} if source == "runtime" else None
    toolsets = {"agents": DynamicAgents, "relay": Relay}
    async with Runtime(
        container, entries=entries, toolsets=toolsets, config=config, policies=policies, approver=asked
    ) as runtime:
        return str((await runtime.run("caller", "go")).output)


async def reach(root: Path, source: str, route: str, rule: str, files: list[str], asked: Asked) -> str:
    (root / "notes.txt").write_text("release notes\n")
    if source == "worker":
        return await run_worker(root, route, rule, files, asked)
    return await run_library(root, source, route, rule, files, asked)


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("route", ROUTES)
async def test_deny_holds_on_every_route(tmp_path: Path, source: str, route: str) -> None:
    asked = Asked()
    output = await reach(tmp_path, source, route, "deny", [], asked)
    assert deployed == [], output
    assert asked.requests == []
    assert "denied by policy" in output


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("route", ROUTES)
async def test_ask_holds_on_every_route(tmp_path: Path, source: str, route: str) -> None:
    asked = Asked()
    output = await reach(tmp_path, source, route, "ask", [], asked)
    assert deployed == [], output
    gated_as = "deployer@caller" if source == "worker" else "deployer"
    assert [(request.toolset, request.tool) for request in asked.requests] == [(gated_as, "deployer")]
    assert "not now" in output


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("route", ROUTES)
async def test_attachments_ask_holds_on_every_route(tmp_path: Path, source: str, route: str) -> None:
    asked = Asked()
    output = await reach(tmp_path, source, route, "attachments_ask", ["notes.txt"], asked)
    assert deployed == [], output
    assert [[info.name for info in request.attachments] for request in asked.requests] == [["notes.txt"]]
    assert "not now" in output
    asked = Asked()
    output = await reach(tmp_path, source, route, "attachments_ask", [], asked)  # no files: nothing to ask
    assert (deployed, asked.requests) == (["ship"], []), output


async def test_a_tool_finds_no_ungated_way_to_an_entry_on_its_scope(tmp_path: Path) -> None:
    """Whatever public coroutine of its `CallScope` a tool's body tries with an entry's name, the caller's policy
    decides: no method runs the entry past the gate."""
    tried: list[str] = []

    class Prober(Toolset):
        default_policy: ClassVar[ToolPolicy | None] = ToolPolicy()

        @tool
        async def probe(self, ctx: RunContext[CallScope]) -> str:
            """Try every way to the deployer."""
            scope = ctx.deps
            for name, method in inspect.getmembers(scope, inspect.iscoroutinefunction):
                parameters = list(inspect.signature(method).parameters)
                if name.startswith("_") or parameters[:1] != ["name"]:
                    continue
                tried.append(name)
                given: Any = {"input": "ship"} if parameters[1] == "args" else "ship"
                with contextlib.suppress(ApprovalDenied):
                    await method("deployer", given)
            return "probed"

    model = answering(
        lambda turn: (
            "deployed"
            if "Deploy." in (turn.info.instructions or "")
            else tool_call("probe")
            if turn.step == 0
            else "done"
        )
    )
    entries = [
        AgentEntry(Agent(model, instructions="Caller."), name="caller", toolsets=["deployer", "probe"]),
        AgentEntry(Agent(model, instructions="Deploy."), name="deployer"),
    ]
    policies = {"deployer": ToolPolicy(default="deny")}
    config = RuntimeConfig(project_root=tmp_path)
    async with Runtime(None, entries=entries, toolsets={"probe": Prober}, config=config, policies=policies) as runtime:
        result = await runtime.run("caller", "go")
    assert {"call_agent", "call_tool"} <= set(tried)
    assert [call.entry for call in result.calls] == ["caller"]


@pytest.mark.parametrize("known_at_load", [True, False])
@pytest.mark.parametrize("route", ["tool", "agent_call", "made_agent_call"])
async def test_an_entry_under_another_toolset_name_is_gated_under_that_name(
    tmp_path: Path, route: str, known_at_load: bool
) -> None:
    """A library's own name for an entry's toolset (`entry_toolset`) is the caller's way to it: every route is gated
    under that name, whether its tool is known at load (a spec that says what it builds) or only once built."""
    model = answering(script(route, [], entry_use="guarded", agents="agents"))
    deployer = AgentEntry(Agent(model, instructions="Deploy."), name="deployer")
    caller = AgentEntry(Agent(model, instructions="Caller."), name="caller", toolsets=["guarded", "agents"])
    built = entry_toolset(deployer)
    guarded = ToolsetSpec(lambda: built, Scope.GLOBAL, built) if known_at_load else (lambda: entry_toolset(deployer))
    toolsets: dict[str, Any] = {"guarded": guarded, "agents": DynamicAgents}
    policies = {"guarded": ToolPolicy(default="deny")}
    config = RuntimeConfig(project_root=tmp_path)
    asked = Asked()  # approves making the helper, should that ask
    async with Runtime(
        None, entries=[caller, deployer], toolsets=toolsets, config=config, policies=policies, approver=asked
    ) as rt:
        output = str((await rt.run("caller", "go")).output)
    assert (deployed, asked.requests) == ([], []), output
    assert "toolset 'guarded' policy: default is 'deny'" in output


async def test_a_call_past_the_depth_limit_under_another_name_fails_before_anyone_is_asked(tmp_path: Path) -> None:
    model = answering(script("tool", [], entry_use="guarded", agents="agents"))
    deployer = AgentEntry(Agent(model, instructions="Deploy."), name="deployer")
    caller = AgentEntry(Agent(model, instructions="Caller."), name="caller", toolsets=["guarded"])
    built = entry_toolset(deployer)
    toolsets: dict[str, Any] = {"guarded": ToolsetSpec(lambda: built, Scope.GLOBAL, built)}
    asked = Asked()
    config = RuntimeConfig(project_root=tmp_path, max_depth=0)
    async with Runtime(
        None,
        entries=[caller, deployer],
        toolsets=toolsets,
        config=config,
        policies={"guarded": ToolPolicy(default="ask")},
        approver=asked,
    ) as runtime:
        with pytest.raises(MaxDepthExceeded, match="caller -> deployer"):
            await runtime.run("caller", "go")
    assert asked.requests == []
