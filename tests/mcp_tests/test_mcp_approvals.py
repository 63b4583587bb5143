"""Approval policies of MCP toolsets: by default from the tools' annotations (readOnlyHint allows;
destructiveHint or no hint asks); a declared policy or a settings override wins. The counter server
runs in process here (fastmcp's in-memory transport), as docs/mcp.md recommends for tests."""

from __future__ import annotations

from typing import Any

from dependency_injector import containers, providers

from llm_do import ApprovalRequest, PolicySettings, Runtime, RuntimeConfig, ToolPolicy

from ..mcp_support import agent_entry, answers_of, in_process, plan


class App(containers.DeclarativeContainer):
    counter = providers.Singleton(in_process)


class Declared(App):
    approval_policies = providers.Dict(counter=ToolPolicy(default="allow", tools={"reset": "deny"}))


EVERY_TOOL = plan("read_count", ("bump", {"by": 2}), "reset", "server_pid")


async def run_all(container: containers.DeclarativeContainer, **config: Any) -> tuple[list[Any], list[str]]:
    asked: list[str] = []

    def approver(request: ApprovalRequest) -> str:
        asked.append(f"{request.tool}: {request.reason}")
        return "approve"

    runtime = Runtime(
        container,
        entries=[agent_entry("clerk", ["counter"])],
        approver=approver,
        config=RuntimeConfig(approval_mode="prompt", **config),
    )
    async with runtime:
        result = await runtime.run("clerk", EVERY_TOOL)
    return answers_of(result), asked


async def test_without_a_declared_policy_the_annotations_decide() -> None:
    results, asked = await run_all(App())
    assert asked == [
        "bump: MCP tool 'bump' of toolset 'counter': it is not annotated readOnlyHint",
        "reset: MCP tool 'reset' of toolset 'counter': it is annotated destructiveHint",
        "server_pid: MCP tool 'server_pid' of toolset 'counter': it is not annotated readOnlyHint",
    ]  # read_count is annotated readOnlyHint: it runs unasked
    assert results[1:3] == [results[0] + 2, "reset"]


async def test_a_declared_policy_replaces_the_annotations() -> None:
    results, asked = await run_all(Declared())
    assert asked == []
    assert "denied by policy" in results[2]
    assert isinstance(results[3], int)


async def test_settings_overrides_apply_on_top_of_the_annotations() -> None:
    overrides = {"counter": PolicySettings(tools={"reset": "deny", "server_pid": "allow"})}
    results, asked = await run_all(App(), approval_policies=overrides)
    assert [line.split(":")[0] for line in asked] == ["bump"]  # still asked from its annotations
    assert "denied by policy" in results[2]
    everything = {"counter": PolicySettings(default="allow")}
    _, asked = await run_all(App(), approval_policies=everything)
    assert asked == []


async def test_the_verdict_known_before_a_run_is_the_one_the_run_applies() -> None:
    overrides = {"counter": PolicySettings(tools={"reset": "deny", "server_pid": "allow"})}
    results, asked = await run_all(App(), approval_policies=overrides)
    config = RuntimeConfig(approval_policies=overrides)
    runtime = Runtime(App(), entries=[agent_entry("clerk", ["counter"])], config=config)
    annotations = {
        "read_count": {"readOnlyHint": True},
        "bump": {"readOnlyHint": False, "destructiveHint": False},
        "reset": {"destructiveHint": True},
        "server_pid": {},
    }
    decided = {
        tool: runtime.verdict("counter", tool, annotations=marks).decision for tool, marks in annotations.items()
    }
    assert decided == {"read_count": "allow", "bump": "ask", "reset": "deny", "server_pid": "allow"}
    assert [line.split(":")[0] for line in asked] == [tool for tool, made in decided.items() if made == "ask"]
    assert "denied by policy" in results[2]
    await runtime.aclose()
