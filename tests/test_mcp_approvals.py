"""Approval policies of MCP toolsets: by default from the tools' annotations (readOnlyHint allows;
destructiveHint or no hint asks); a declared policy or a settings override wins. The counter server
runs in process here (fastmcp's in-memory transport), as docs/mcp.md recommends for tests."""

from __future__ import annotations

import importlib.util
from types import ModuleType
from typing import Any

from dependency_injector import containers, providers
from pydantic_ai.mcp import MCPToolset

from llm_do import ApprovalRequest, PolicySettings, Runtime, RuntimeConfig, ToolPolicy

from .mcp_support import SERVER, agent_entry, answers_of, plan


def _counter() -> ModuleType:
    spec = importlib.util.spec_from_file_location("counter_server_in_process", SERVER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


COUNTER = _counter()


def in_process() -> MCPToolset[Any]:
    return MCPToolset(COUNTER.server)


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
