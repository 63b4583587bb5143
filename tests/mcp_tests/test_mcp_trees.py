"""MCP servers anywhere in the toolset tree a provider returns (combined, prefixed, renamed, filtered,
approval-wrapped, nested) are owned by the provider's scope: real stdio processes, counted."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import containers, providers
from pydantic_ai.mcp import load_mcp_toolsets
from pydantic_ai.toolsets import AbstractToolset, ApprovalRequiredToolset, CombinedToolset

from llm_do import Runtime, RuntimeConfig

from ..mcp_support import SERVER, agent_entry, alive, answers_of, plan, server_processes, stdio_toolset

APPROVE_ALL = RuntimeConfig(approval_mode="approve_all")


def config_file(tmp_path: Path, *names: str) -> Path:
    """An `mcpServers` JSON file with one counter server per name."""
    path = tmp_path / "mcp.json"
    servers = {name: {"command": sys.executable, "args": [str(SERVER)]} for name in names}
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def deep_tree() -> AbstractToolset[Any]:
    """Three servers at different depths, behind every kind of wrapper pydantic-ai has."""
    nested = CombinedToolset(
        [
            stdio_toolset().prefixed("a").filtered(lambda ctx, tool: tool.name != "a_reset"),
            ApprovalRequiredToolset(stdio_toolset().renamed({"b_pid": "server_pid"})),
        ]
    )
    return CombinedToolset([nested, CombinedToolset([stdio_toolset().prefixed("c")]).prefixed("outer")])


DEEP_PLAN = plan("a_server_pid", "b_pid", "outer_c_server_pid")


async def test_servers_combined_from_a_config_file_in_a_singleton_are_one_process_each_until_aclose(
    tmp_path: Path,
) -> None:
    config = config_file(tmp_path, "one", "two")

    class App(containers.DeclarativeContainer):
        servers = providers.Singleton(lambda: CombinedToolset(load_mcp_toolsets(config)))

    rt = Runtime(App(), entries=[agent_entry("clerk", ["servers"])], config=APPROVE_ALL)
    first = answers_of(await rt.run("clerk", plan(("one_bump", {"by": 2}), "one_server_pid", "two_server_pid")))
    second = answers_of(await rt.run("clerk", plan(("one_bump", {"by": 1}), "one_server_pid", "two_server_pid")))
    assert first[0] == 2 and second[0] == 3  # one shared server: its count goes on
    pids = set(first[1:])
    assert len(pids) == 2 and set(second[1:]) == pids
    assert sorted(server_processes()) == sorted(pids)
    await rt.aclose()
    assert server_processes() == []
    assert not any(alive(pid) for pid in pids)


@pytest.mark.long
async def test_servers_combined_from_a_config_file_in_a_factory_end_with_each_call(tmp_path: Path) -> None:
    config = config_file(tmp_path, "one", "two")

    class App(containers.DeclarativeContainer):
        servers = providers.Factory(lambda: CombinedToolset(load_mcp_toolsets(config)))

    seen: set[int] = set()
    async with Runtime(App(), entries=[agent_entry("clerk", ["servers"])], config=APPROVE_ALL) as rt:
        for _ in range(3):
            count, *pids = answers_of(await rt.run("clerk", plan("one_bump", "one_server_pid", "two_server_pid")))
            assert count == 1  # a fresh server each call
            seen.update(pids)
            assert server_processes() == []  # gone with the call, not at aclose
    assert len(seen) == 6
    assert not any(alive(pid) for pid in seen)


@pytest.mark.long
async def test_servers_nested_behind_every_kind_of_wrapper_are_owned_per_call_and_globally() -> None:
    class App(containers.DeclarativeContainer):
        per_call = providers.Factory(deep_tree)
        shared = providers.Singleton(deep_tree)

    entries = [agent_entry("fresh", ["per_call"]), agent_entry("steady", ["shared"])]
    async with Runtime(App(), entries=entries, config=APPROVE_ALL) as rt:
        fresh = answers_of(await rt.run("fresh", DEEP_PLAN))
        assert len(set(fresh)) == 3
        assert server_processes() == []
        steady = answers_of(await rt.run("steady", DEEP_PLAN))
        again = answers_of(await rt.run("steady", DEEP_PLAN))
        assert steady == again and len(set(steady)) == 3
        assert sorted(server_processes()) == sorted(steady)
    assert server_processes() == []
    assert not any(alive(pid) for pid in [*fresh, *steady])
