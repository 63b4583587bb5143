"""Approvals: modes, the approver, the session cache, denials the model reads, no bypass, lifecycle."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, RunContext
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset
from pydantic_ai.toolsets.approval_required import ApprovalRequiredToolset

from llm_do import (
    AgentEntry,
    Approval,
    ApprovalChoice,
    ApprovalDenied,
    ApprovalRequest,
    ApprovalUnavailable,
    CallScope,
    MaxDepthExceeded,
    NoApproverWarning,
    Runtime,
    RuntimeConfig,
    Scope,
    ToolPolicy,
    Toolset,
    ToolsetSpec,
    entry,
    tool,
)
from llm_do.approvals import ApprovalMode, ApprovalOnDeny
from llm_do.testing import Step, Turn, answering, tool_call

ASK = ToolPolicy(default="ask")


class Shell(Toolset):
    """Records every command that really ran in the list it is given."""

    def __init__(self, ran: list[str]) -> None:
        self.ran = ran

    @tool
    def ls(self, path: str) -> str:
        """List a directory."""
        self.ran.append(f"ls {path}")
        return f"listed {path}"

    @tool
    def rm(self, path: str) -> str:
        """Remove a file."""
        self.ran.append(f"rm {path}")
        return f"removed {path}"


class Approver:
    """Answers from a script and records every request it was asked."""

    def __init__(self, *answers: Approval | ApprovalChoice) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> Approval | ApprovalChoice:
        self.asked.append(request)
        return self.answers.pop(0) if self.answers else "approve"


def first_then_echo(*tool_calls: tuple[str, dict[str, Any]]) -> Callable[[Turn], Step]:
    """Make the given calls on the first step, then answer with the tool results joined by ' | '."""

    def script(turn: Turn) -> Step:
        if turn.step == 0:
            return [tool_call(name, **args) for name, args in tool_calls]
        return " | ".join(str(content) for content in turn.returns)

    return script


def shell_runtime(
    ran: list[str],
    script: Callable[[Turn], Step],
    *,
    policies: Mapping[str, ToolPolicy] | None = None,
    approver: Callable[[ApprovalRequest], Any] | None = None,
    mode: ApprovalMode = "prompt",
    on_deny: ApprovalOnDeny = "tell_model",
) -> Runtime:
    job = AgentEntry(Agent(answering(script)), name="job", toolsets=["shell"])
    return Runtime(
        None,
        entries=[job],
        toolsets={"shell": lambda: Shell(ran)},
        policies={"shell": ASK} if policies is None else policies,
        approver=approver,
        config=RuntimeConfig(approval_mode=mode, approval_on_deny=on_deny),
    )


def denied_parts(messages: Sequence[ModelMessage]) -> list[ToolReturnPart]:
    return [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart) and part.outcome == "denied"
    ]


# -- modes -------------------------------------------------------------------------------------


async def test_prompt_mode_asks_the_approver_with_a_described_request() -> None:
    ran: list[str] = []
    approver = Approver("approve")
    script = first_then_echo(("rm", {"path": "a.txt"}))
    async with shell_runtime(ran, script, approver=approver) as runtime:
        result = await runtime.run("job", "clean up")
    assert result.output == "removed a.txt"
    assert ran == ["rm a.txt"]
    [request] = approver.asked
    assert (request.entry, request.depth, request.chain) == ("job", 0, ("job",))
    assert (request.toolset, request.tool, dict(request.args)) == ("shell", "rm", {"path": "a.txt"})
    assert request.reason == "toolset 'shell' policy: default is 'ask'"
    assert request.description == "job wants to run shell.rm(path='a.txt'): toolset 'shell' policy: default is 'ask'"


async def test_a_denied_call_reaches_the_model_as_a_readable_tool_result() -> None:
    ran: list[str] = []
    approver = Approver(Approval.deny("not on a Friday"))
    script = first_then_echo(("rm", {"path": "a.txt"}))
    async with shell_runtime(ran, script, approver=approver) as runtime:
        result = await runtime.run("job", "clean up")
    assert ran == []
    assert result.output == (
        "The call to 'rm' was not run: the approver denied it: not on a Friday. Do not retry the same call."
    )
    [part] = denied_parts(result.messages)
    assert part.tool_name == "rm"


async def test_approve_all_runs_gated_calls_without_asking() -> None:
    ran: list[str] = []
    approver = Approver("deny")
    script = first_then_echo(("rm", {"path": "a.txt"}))
    async with shell_runtime(ran, script, approver=approver, mode="approve_all") as runtime:
        result = await runtime.run("job", "clean up")
    assert result.output == "removed a.txt"
    assert ran == ["rm a.txt"]
    assert approver.asked == []


async def test_reject_all_denies_gated_calls_and_still_runs_allowed_ones() -> None:
    ran: list[str] = []
    approver = Approver("approve")
    policies = {"shell": ToolPolicy(default="ask", tools={"ls": "allow"})}
    script = first_then_echo(("ls", {"path": "."}), ("rm", {"path": "a.txt"}))
    async with shell_runtime(ran, script, policies=policies, approver=approver, mode="reject_all") as runtime:
        result = await runtime.run("job", "clean up")
    assert ran == ["ls ."]
    assert approver.asked == []
    assert result.output == (
        "listed . | The call to 'rm' was not run: it needs approval (toolset 'shell' policy: default is 'ask') "
        "and approval_mode is 'reject_all'. Do not retry the same call."
    )


async def test_prompt_without_an_approver_fails_fast_and_never_runs_the_call() -> None:
    ran: list[str] = []
    script = first_then_echo(("rm", {"path": "a.txt"}))
    async with shell_runtime(ran, script, approver=None) as runtime:
        with pytest.warns(NoApproverWarning, match="toolset 'shell'"), pytest.raises(ApprovalUnavailable) as caught:
            await runtime.run("job", "clean up")
    assert ran == []
    message = str(caught.value)
    assert "entry 'job' called tool 'rm' of toolset 'shell', which needs approval" in message
    assert "give the run an approver (Runtime(approver=...), runtime.session(id, approver=...)" in message
    assert "set approval_mode (LLM_DO_APPROVAL_MODE) to 'approve_all' or 'reject_all'" in message


async def test_allowed_calls_need_no_approver_in_prompt_mode() -> None:
    ran: list[str] = []
    script = first_then_echo(("ls", {"path": "."}))
    allowing = {"shell": ToolPolicy()}  # declared: every call allowed
    async with shell_runtime(ran, script, policies=allowing, approver=None) as runtime:
        assert (await runtime.run("job", "look")).output == "listed ."


@pytest.mark.parametrize("mode", ["prompt", "approve_all", "reject_all"])
async def test_a_deny_policy_is_final_in_every_mode(mode: ApprovalMode) -> None:
    ran: list[str] = []
    approver = Approver("approve")
    policies = {"shell": ToolPolicy(tools={"rm": "deny"})}
    script = first_then_echo(("rm", {"path": "a.txt"}))
    async with shell_runtime(ran, script, policies=policies, approver=approver, mode=mode) as runtime:
        result = await runtime.run("job", "clean up")
    assert ran == []
    assert approver.asked == []
    assert result.output == (
        "The call to 'rm' was not run: denied by policy (toolset 'shell' policy: tool 'rm' is 'deny'). "
        "Do not retry the same call."
    )


async def test_on_deny_raise_raises_instead_of_telling_the_model() -> None:
    ran: list[str] = []
    approver = Approver(Approval.deny("no"))
    script = first_then_echo(("rm", {"path": "a.txt"}))
    async with shell_runtime(ran, script, approver=approver, on_deny="raise") as runtime:
        with pytest.raises(ApprovalDenied) as caught:
            await runtime.run("job", "clean up")
    assert ran == []
    assert caught.value.request.tool == "rm"
    assert "entry 'job': the call to tool 'rm' of toolset 'shell' was denied: the approver denied it: no" in str(
        caught.value
    )


# -- the approver --------------------------------------------------------------------------------


async def test_an_async_approver_is_awaited() -> None:
    ran: list[str] = []
    asked: list[str] = []

    async def approver(request: ApprovalRequest) -> Approval:
        await asyncio.sleep(0)
        asked.append(request.tool)
        return Approval.approve()

    async with shell_runtime(ran, first_then_echo(("rm", {"path": "x"})), approver=approver) as runtime:
        assert (await runtime.run("job", "go")).output == "removed x"
    assert asked == ["rm"]


async def test_a_blocking_sync_approver_runs_in_a_thread_and_leaves_the_loop_free() -> None:
    ran: list[str] = []
    loop = asyncio.get_running_loop()
    asking, answered = asyncio.Event(), threading.Event()
    threads: list[int] = []

    def terminal_prompt(request: ApprovalRequest) -> str:
        threads.append(threading.get_ident())
        loop.call_soon_threadsafe(asking.set)
        # Blocks until a coroutine on the event loop answers; it could never run if we blocked the loop.
        return "approve" if answered.wait(timeout=10) else "deny"

    async def the_user() -> None:
        await asking.wait()
        answered.set()

    async with shell_runtime(ran, first_then_echo(("rm", {"path": "x"})), approver=terminal_prompt) as runtime:
        user = asyncio.create_task(the_user())
        result = await runtime.run("job", "go")
        await user
    assert result.output == "removed x"
    assert threads and threads[0] != threading.get_ident()


async def test_an_approver_answer_that_is_not_an_approval_is_an_error() -> None:
    ran: list[str] = []
    async with shell_runtime(ran, first_then_echo(("rm", {"path": "x"})), approver=lambda request: True) as runtime:
        with pytest.raises(TypeError, match="the approver returned True for tool 'rm' of toolset 'shell'"):
            await runtime.run("job", "go")
    assert ran == []


# -- session cache -------------------------------------------------------------------------------


async def test_approve_for_session_remembers_the_exact_call_for_the_rest_of_the_run() -> None:
    ran: list[str] = []
    approver = Approver("approve_for_session", "approve", "approve", "approve")

    def script(turn: Turn) -> Step:
        paths = turn.prompt.split()
        if turn.step < len(paths):
            return tool_call("rm", path=paths[turn.step])
        return "done"

    runtime = shell_runtime(ran, script, approver=approver)
    async with runtime:
        # asked: approved for the session; hit: same toolset, tool and arguments; miss: other arguments
        await runtime.run("job", "a.txt a.txt b.txt")
        assert [dict(r.args) for r in approver.asked] == [{"path": "a.txt"}, {"path": "b.txt"}]
        await runtime.run("job", "a.txt")  # a run given no session is a session of its own
    assert [dict(r.args) for r in approver.asked] == [{"path": "a.txt"}, {"path": "b.txt"}, {"path": "a.txt"}]
    assert ran == ["rm a.txt", "rm a.txt", "rm b.txt", "rm a.txt"]


async def test_the_session_cache_is_keyed_by_toolset_name() -> None:
    ran: list[str] = []
    approver = Approver("approve_for_session", "approve")
    policies = {"shell": ASK, "backup_shell": ASK}

    def job_script(turn: Turn) -> Step:
        return (
            tool_call("rm", path="a.txt")
            if turn.step < 2
            else tool_call("backup", input="go")
            if turn.step == 2
            else "done"
        )

    def backup_script(turn: Turn) -> Step:
        return tool_call("rm", path="a.txt") if turn.step == 0 else "done"

    for_shell = AgentEntry(Agent(answering(job_script)), name="job", toolsets=["shell", "backup"])
    for_backup = AgentEntry(Agent(answering(backup_script)), name="backup", toolsets=["backup_shell"])
    runtime = Runtime(
        None,
        entries=[for_shell, for_backup],
        toolsets={"shell": lambda: Shell(ran), "backup_shell": lambda: Shell(ran)},
        policies=policies,
        approver=approver,
        config=RuntimeConfig(approval_mode="prompt"),
    )
    async with runtime:
        await runtime.run("job", "go")
    assert [(r.entry, r.toolset) for r in approver.asked] == [("job", "shell"), ("backup", "backup_shell")]
    assert len(ran) == 3


async def test_a_plain_approval_is_not_remembered() -> None:
    ran: list[str] = []
    approver = Approver("approve", "approve")
    async with shell_runtime(ran, first_then_echo(("rm", {"path": "a"})), approver=approver) as runtime:
        await runtime.run("job", "go")
        await runtime.run("job", "go")
    assert len(approver.asked) == 2


# -- parallel and nested calls -------------------------------------------------------------------


async def test_parallel_tool_calls_are_each_gated_exactly_once() -> None:
    ran: list[str] = []
    seen_by_rule: list[str] = []
    asked: list[str] = []

    def approver(request: ApprovalRequest) -> Approval:  # asked about the three at once, each in a thread
        asked.append(request.args["path"])
        return Approval.deny("keep b") if request.args["path"] == "b" else Approval.approve()

    def rule(tool_name: str, args: Mapping[str, Any]) -> None:
        seen_by_rule.append(args["path"])

    policies = {"shell": ToolPolicy(default="ask", rule=rule)}
    script = first_then_echo(("rm", {"path": "a"}), ("rm", {"path": "b"}), ("rm", {"path": "c"}))
    async with shell_runtime(ran, script, policies=policies, approver=approver) as runtime:
        result = await runtime.run("job", "go")
    assert sorted(asked) == ["a", "b", "c"], "the approver is asked once per call"
    assert sorted(seen_by_rule) == ["a", "b", "c"], "the policy is evaluated once per call"
    assert sorted(ran) == ["rm a", "rm c"]
    assert result.output.split(" | ") == [
        "removed a",
        "The call to 'rm' was not run: the approver denied it: keep b. Do not retry the same call.",
        "removed c",
    ]


async def test_identical_parallel_calls_share_one_session_approval() -> None:
    ran: list[str] = []
    approver = Approver("approve_for_session")
    script = first_then_echo(("rm", {"path": "a"}), ("rm", {"path": "a"}))
    async with shell_runtime(ran, script, approver=approver) as runtime:
        await runtime.run("job", "go")
    assert len(approver.asked) == 1
    assert ran == ["rm a", "rm a"]


def nested_runtime(
    ran: list[str],
    *,
    mode: ApprovalMode = "prompt",
    approver: Callable[[ApprovalRequest], Any] | None = None,
    policies: Mapping[str, ToolPolicy] | None = None,
    on_deny: ApprovalOnDeny = "tell_model",
    parallel: int = 1,
    shell: Callable[[], Toolset] | None = None,
) -> Runtime:
    """`boss` asks `worker` (an agent used as a tool) to remove files; `worker` calls shell.rm."""

    def boss_script(turn: Turn) -> Step:
        if turn.step == 0:
            return [tool_call("worker", input=f"f{i}.txt") for i in range(parallel)]
        return " | ".join(str(content) for content in turn.returns)

    worker_script = first_then_echo()

    def worker_steps(turn: Turn) -> Step:
        return tool_call("rm", path=turn.prompt) if turn.step == 0 else worker_script(turn)

    boss = AgentEntry(Agent(answering(boss_script)), name="boss", toolsets=["worker"])
    worker = AgentEntry(Agent(answering(worker_steps)), name="worker", toolsets=["shell"])
    return Runtime(
        None,
        entries=[boss, worker],
        toolsets={"shell": shell or (lambda: Shell(ran))},
        policies={"shell": ASK} if policies is None else policies,
        approver=approver,
        config=RuntimeConfig(approval_mode=mode, approval_on_deny=on_deny),
    )


async def test_a_nested_call_under_reject_all_with_a_gated_tool_is_denied() -> None:
    ran: list[str] = []
    async with nested_runtime(ran, mode="reject_all") as runtime:
        result = await runtime.run("boss", "clean up")
    assert ran == []
    assert [(r.entry, r.depth) for r in result.calls] == [("boss", 0), ("worker", 1)]
    assert "The call to 'rm' was not run: it needs approval" in result.output
    [worker_log] = [log for log in result.log if log.entry == "worker"]
    assert len(denied_parts(worker_log.messages)) == 1


async def test_nested_calls_use_the_same_policies_approver_and_session() -> None:
    ran: list[str] = []
    approver = Approver("approve_for_session")

    def boss_twice(turn: Turn) -> Step:
        return tool_call("worker", input="f0.txt") if turn.step < 2 else "done"

    boss = AgentEntry(Agent(answering(boss_twice)), name="boss", toolsets=["worker"])
    worker = AgentEntry(
        Agent(answering(lambda turn: tool_call("rm", path=turn.prompt) if turn.step == 0 else "removed")),
        name="worker",
        toolsets=["shell"],
    )
    runtime = Runtime(
        None,
        entries=[boss, worker],
        toolsets={"shell": lambda: Shell(ran)},
        policies={"shell": ASK},
        approver=approver,
    )
    async with runtime:
        await runtime.run("boss", "clean up")
    [request] = approver.asked
    assert (request.entry, request.depth, request.chain) == ("worker", 1, ("boss", "worker"))
    assert request.description.startswith("boss > worker wants to run shell.rm(path='f0.txt')")
    assert ran == ["rm f0.txt", "rm f0.txt"]


async def test_parallel_nested_calls_are_each_gated_once() -> None:
    ran: list[str] = []
    approver = Approver()
    async with nested_runtime(ran, approver=approver, parallel=3) as runtime:
        result = await runtime.run("boss", "clean up")
    assert sorted(r.args["path"] for r in approver.asked) == ["f0.txt", "f1.txt", "f2.txt"]
    assert sorted(ran) == ["rm f0.txt", "rm f1.txt", "rm f2.txt"]
    assert len(result.calls) == 4


async def test_a_denial_in_a_nested_call_raises_through_the_parent_when_asked_to() -> None:
    ran: list[str] = []
    events: list[str] = []

    class Audited(Shell):
        async def cleanup(self) -> None:
            events.append("cleanup")

    runtime = nested_runtime(ran, mode="reject_all", on_deny="raise", shell=lambda: Audited(ran))
    async with runtime:
        with pytest.raises(ApprovalDenied) as caught:
            await runtime.run("boss", "clean up")
    assert (caught.value.request.entry, caught.value.request.depth) == ("worker", 1)
    assert ran == []
    assert events == ["cleanup"]


async def test_calling_an_agent_as_a_tool_is_gated_by_the_entry_name() -> None:
    ran: list[str] = []
    approver = Approver(Approval.deny("worker is busy"))
    policies = {"worker": ToolPolicy(default="ask")}
    async with nested_runtime(ran, approver=approver, policies=policies) as runtime:
        result = await runtime.run("boss", "clean up")
    [request] = approver.asked
    assert (request.toolset, request.tool, dict(request.args)) == ("worker", "worker", {"input": "f0.txt"})
    assert [r.entry for r in result.calls] == ["boss"], "the worker never ran"
    assert ran == []
    assert result.output == (
        "The call to 'worker' was not run: the approver denied it: worker is busy. Do not retry the same call."
    )


# -- direct calls from function entries ----------------------------------------------------------


def orchestrator(ran: list[str], approver: Approver, *, policies: Mapping[str, ToolPolicy]) -> Runtime:
    worker = AgentEntry(Agent(answering(lambda turn: f"did {turn.prompt}")), name="worker")

    @entry(toolsets=["shell", "worker"])
    async def pipeline(scope: CallScope, input_data: str) -> list[str]:
        outcomes: list[str] = []
        for attempt in (
            lambda: scope.call_tool("rm", {"path": input_data}),
            lambda: scope.call_agent("worker", input_data),
        ):
            try:
                outcomes.append(await attempt())
            except ApprovalDenied as denied:
                outcomes.append(f"denied {denied.request.toolset}")
        return outcomes

    return Runtime(
        None,
        entries=[pipeline, worker],
        toolsets={"shell": lambda: Shell(ran)},
        policies=policies,
        approver=approver,
        config=RuntimeConfig(approval_mode="prompt"),
    )


async def test_call_tool_and_call_agent_are_gated_like_a_models_calls() -> None:
    ran: list[str] = []
    approver = Approver("approve", "deny", "deny", "approve")
    policies = {"shell": ASK, "worker": ASK}
    async with orchestrator(ran, approver, policies=policies) as runtime:
        first = await runtime.run("pipeline", "a.txt")
        second = await runtime.run("pipeline", "b.txt")
    assert first.output == ["removed a.txt", "denied worker"]
    assert second.output == ["denied shell", "did b.txt"]
    assert [(r.toolset, r.tool) for r in approver.asked] == [("shell", "rm"), ("worker", "worker")] * 2
    assert ran == ["rm a.txt"]


# -- no bypass -----------------------------------------------------------------------------------


async def test_another_capability_approving_a_call_does_not_bypass_the_policy() -> None:
    ran: list[str] = []

    def approve_everything(ctx: RunContext[Any], requests: DeferredToolRequests) -> DeferredToolResults:
        return requests.build_results(approve_all=True)

    agent = Agent(
        answering(first_then_echo(("rm", {"path": "a"}))),
        capabilities=[HandleDeferredToolCalls(handler=approve_everything)],
    )
    runtime = Runtime(
        None,
        entries=[AgentEntry(agent, name="job", toolsets=["shell"])],
        toolsets={"shell": lambda: Shell(ran)},
        policies={"shell": ASK},
        config=RuntimeConfig(approval_mode="reject_all"),
    )
    async with runtime:
        result = await runtime.run("job", "go")
    assert ran == []
    assert "approval_mode is 'reject_all'" in result.output


class Careful(Toolset):
    def __init__(self, ran: list[str]) -> None:
        self.ran = ran

    @tool(requires_approval=True)
    def deploy(self, version: str) -> str:
        """Deploy a version."""
        self.ran.append(f"deploy {version}")
        return f"deployed {version}"


def self_gated_toolset(ran: list[str]) -> AbstractToolset[Any]:
    def push(branch: str) -> str:
        """Push a branch."""
        ran.append(f"push {branch}")
        return f"pushed {branch}"

    return ApprovalRequiredToolset(FunctionToolset([push]))


@pytest.mark.parametrize(("mode", "expected_runs"), [("approve_all", 2), ("reject_all", 0), ("prompt", 2)])
async def test_tools_that_ask_for_approval_themselves_are_gated_without_a_policy(
    mode: ApprovalMode, expected_runs: int
) -> None:
    ran: list[str] = []
    approver = Approver()
    script = first_then_echo(("deploy", {"version": "1.2"}), ("push", {"branch": "main"}))
    runtime = Runtime(
        None,
        entries=[AgentEntry(Agent(answering(script)), name="job", toolsets=["careful", "git"])],
        toolsets={"careful": lambda: Careful(ran), "git": lambda: self_gated_toolset(ran)},
        approver=approver,
        config=RuntimeConfig(approval_mode=mode, approval_default="allow"),  # only the tools' own asking gates
    )
    async with runtime:
        result = await runtime.run("job", "ship it")
    assert len(ran) == expected_runs
    if mode == "prompt":
        assert [(r.toolset, r.reason) for r in approver.asked] == [
            ("careful", "tool 'deploy' is declared with requires_approval=True"),
            ("git", "tool 'push' asked for approval"),
        ]
    if mode == "reject_all":
        assert len(denied_parts(result.messages)) == 2


async def test_a_toolset_copied_for_the_run_is_still_gated_and_entered_once() -> None:
    ran: list[str] = []
    events: list[str] = []

    class PerRunCopy(Shell):
        async def for_run(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
            return Entered(ran, events)  # pydantic-ai owns this copy: it enters and exits it

    class Entered(Shell):
        def __init__(self, ran: list[str], events: list[str]) -> None:
            super().__init__(ran)
            self.events = events

        async def __aenter__(self) -> Entered:
            self.events.append("enter copy")
            return self

        async def __aexit__(self, *args: Any) -> None:
            self.events.append("exit copy")

    runtime = Runtime(
        None,
        entries=[AgentEntry(Agent(answering(first_then_echo(("rm", {"path": "a"})))), name="job", toolsets=["shell"])],
        toolsets={"shell": lambda: PerRunCopy(ran)},
        policies={"shell": ASK},
        config=RuntimeConfig(approval_mode="reject_all"),
    )
    async with runtime:
        result = await runtime.run("job", "go")
    assert ran == []
    assert "approval_mode is 'reject_all'" in result.output
    assert events == ["enter copy", "exit copy"]


# -- lifecycle -----------------------------------------------------------------------------------


class Tracked(Shell):
    def __init__(self, label: str, ran: list[str], events: list[str]) -> None:
        super().__init__(ran)
        self.tag = label
        self.events = events

    async def __aenter__(self) -> Tracked:
        self.events.append(f"enter {self.tag}")
        return self

    async def __aexit__(self, *args: Any) -> None:
        self.events.append(f"exit {self.tag}")

    def cleanup(self) -> None:
        self.events.append(f"cleanup {self.tag}")


class Notes(Toolset):
    def __init__(self, events: list[str]) -> None:
        self.events = events

    async def __aenter__(self) -> Notes:
        self.events.append("enter per-run")
        return self

    async def __aexit__(self, *args: Any) -> None:
        self.events.append("exit per-run")

    async def cleanup(self) -> None:
        self.events.append("cleanup per-run")

    @tool
    def note(self, line: str) -> str:
        """Write a line in the run's notes."""
        self.events.append(f"note {line}")
        return "noted"


async def test_a_wrapped_toolset_is_entered_exited_and_cleaned_up_exactly_once() -> None:
    ran: list[str] = []
    events: list[str] = []
    asked: list[str] = []

    def approver(request: ApprovalRequest) -> ApprovalChoice:
        asked.append(f"{request.entry} {request.tool}")
        return "deny" if request.args.get("path") == "w.txt" else "approve"

    def boss_script(turn: Turn) -> Step:
        if turn.step == 0:
            return [
                tool_call("rm", path="boss.txt"),
                tool_call("note", line="boss"),
                tool_call("worker", input="w.txt"),
            ]
        return "done"

    def worker_script(turn: Turn) -> Step:
        if turn.step == 0:
            return [tool_call("rm", path=turn.prompt), tool_call("ls", path="."), tool_call("note", line="worker")]
        return "done"

    runtime = Runtime(
        None,
        entries=[
            AgentEntry(Agent(answering(boss_script)), name="boss", toolsets=["shell", "notes", "worker"]),
            AgentEntry(Agent(answering(worker_script)), name="worker", toolsets=["shell", "notes"]),
        ],
        toolsets={
            "shell": lambda: Tracked("per-call", ran, events),
            "notes": ToolsetSpec(lambda: Notes(events), Scope.PER_RUN),
        },
        policies={"shell": ToolPolicy(default="ask", tools={"ls": "allow"}), "notes": ASK},
        approver=approver,
        config=RuntimeConfig(approval_mode="prompt"),
    )
    async with runtime:
        result = await runtime.run("boss", "go")
    assert result.output == "done"
    assert sorted(asked) == ["boss note", "boss rm", "worker note", "worker rm"]
    assert sorted(ran) == ["ls .", "rm boss.txt"]
    lifecycle = [event for event in events if not event.startswith("note")]
    assert sorted(lifecycle) == sorted(
        ["enter per-call", "exit per-call", "cleanup per-call"] * 2
        + ["enter per-run", "exit per-run", "cleanup per-run"]
    )
    assert lifecycle[0] == "enter per-call" and lifecycle[-1] == "cleanup per-run"
    assert sorted(event for event in events if event.startswith("note")) == ["note boss", "note worker"]


class PerRunCopies(Tracked):
    """`for_run` hands pydantic-ai a fresh copy for each agent run, which pydantic-ai enters and exits."""

    async def for_run(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        return Tracked("copy", self.ran, self.events)


async def test_a_fresh_per_run_copy_is_entered_by_pydantic_ai_and_still_gated() -> None:
    ran: list[str] = []
    events: list[str] = []
    approver = Approver("deny")
    job = AgentEntry(
        Agent(answering(first_then_echo(("ls", {"path": "."}), ("rm", {"path": "x"})))), name="job", toolsets=["shell"]
    )
    runtime = Runtime(
        None,
        entries=[job],
        toolsets={"shell": lambda: PerRunCopies("scope", ran, events)},
        policies={"shell": ToolPolicy(tools={"rm": "ask"})},
        approver=approver,
    )
    async with runtime:
        result = await runtime.run("job", "go")
    assert ran == ["ls ."]  # the copy ran the allowed call; the gated one was denied
    assert "The call to 'rm' was not run: the approver denied it" in result.output
    assert [request.tool for request in approver.asked] == ["rm"]
    assert events == ["enter scope", "enter copy", "exit copy", "exit scope", "cleanup scope"]


async def test_a_call_past_max_depth_fails_before_anyone_is_asked_to_approve_it() -> None:
    approver = Approver("approve")
    recurse = AgentEntry(
        Agent(answering(lambda turn: tool_call("clerk", input="again"))), name="clerk", toolsets=["clerk"]
    )

    @entry(toolsets=["clerk"])
    async def direct(scope: CallScope, input_data: str) -> Any:
        return await scope.call_agent("clerk", input_data)

    runtime = Runtime(
        None,
        entries=[recurse, direct],
        policies={"clerk": ToolPolicy(default="ask")},
        approver=approver,
        config=RuntimeConfig(max_depth=0),
    )
    async with runtime:
        with pytest.raises(MaxDepthExceeded, match="exceeds max_depth=0: clerk -> clerk"):
            await runtime.run("clerk", "go")
        with pytest.raises(MaxDepthExceeded, match="exceeds max_depth=0: direct -> clerk"):
            await runtime.run("direct", "go")
    assert approver.asked == []


class AsksAtRunTime(Toolset):
    """Declares no approval, so its calls get no capability; one tool asks for approval while it runs."""

    def __init__(self, ran: list[str]) -> None:
        self.ran = ran

    @tool
    def migrate(self, ctx: RunContext[Any], table: str) -> str:
        """Migrate a table; a big one needs approval."""
        if table == "big" and not ctx.tool_call_approved:
            raise ApprovalRequired()
        self.ran.append(f"migrate {table}")
        return f"migrated {table}"


@pytest.mark.parametrize(("answer", "expected"), [("approve", ["migrate big"]), ("deny", [])])
async def test_a_tool_asking_at_run_time_without_the_capability_is_decided_in_place(
    answer: ApprovalChoice, expected: list[str]
) -> None:
    ran: list[str] = []
    approver = Approver(answer)
    script = first_then_echo(("migrate", {"table": "big"}))
    runtime = Runtime(
        None,
        entries=[AgentEntry(Agent(answering(script)), name="job", toolsets=["db"])],
        toolsets={"db": lambda: AsksAtRunTime(ran)},
        approver=approver,
        config=RuntimeConfig(approval_default="allow"),  # nothing but the tool itself asks
    )
    async with runtime:
        result = await runtime.run("job", "go")
    assert ran == expected
    assert [(r.toolset, r.tool, r.reason) for r in approver.asked] == [
        ("db", "migrate", "tool 'migrate' asked for approval")
    ]
    if answer == "deny":
        assert result.output == "The call to 'migrate' was not run: the approver denied it. Do not retry the same call."
        assert len(denied_parts(result.messages)) == 1


async def test_the_approval_capability_is_passed_only_where_a_toolset_can_ask_or_deny() -> None:
    seen: dict[str, int] = {}

    def counting(name: str) -> Any:
        @entry(name=name, toolsets=[name])
        async def count(scope: CallScope, input_data: str) -> None:
            seen[name] = len(scope._capabilities)

        return count

    runtime = Runtime(
        None,
        entries=[counting(name) for name in ("open", "gated", "careful", "unknown")],
        toolsets={
            "open": lambda: AsksAtRunTime([]),
            "gated": lambda: AsksAtRunTime([]),
            "careful": lambda: Careful([]),
            "unknown": lambda: FunctionToolset([]).prefixed("x"),  # a kind whose tools cannot be known
        },
        policies={"gated": ToolPolicy(tools={"migrate": "deny"})},
        config=RuntimeConfig(approval_default="allow"),  # "open": no policy and nothing that asks
    )
    async with runtime:
        for name in ("open", "gated", "careful", "unknown"):
            await runtime.run(name, "go")
    assert seen == {"open": 0, "gated": 1, "careful": 1, "unknown": 1}


async def test_an_undeclared_toolset_whose_tools_are_all_read_only_gets_no_capability() -> None:
    seen: dict[str, int] = {}

    class Reads(Toolset):
        @tool(read_only=True)
        def look(self) -> str:
            """Look."""
            return "seen"

    @entry(name="reads", toolsets=["reads"])
    async def count(scope: CallScope, input_data: str) -> None:
        seen["reads"] = len(scope._capabilities)

    @entry(name="plain", toolsets=["plain"])
    async def count_plain(scope: CallScope, input_data: str) -> None:
        seen["plain"] = len(scope._capabilities)

    runtime = Runtime(None, entries=[count, count_plain], toolsets={"reads": Reads, "plain": lambda: Careful([])})
    async with runtime:
        await runtime.run("reads", "go")
        await runtime.run("plain", "go")
    assert seen == {"reads": 0, "plain": 1}
