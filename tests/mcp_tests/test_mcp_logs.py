"""A server's log notifications go to the logger `llm_do.mcp.servers.NAME` at their own level; the
command shows them with -v only."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from dependency_injector import containers, providers
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ToolCallPart

from llm_do import Runtime, RuntimeConfig
from llm_do.models import Recording

from ..cli_projects import llm_do
from ..mcp_support import SERVER, agent_entry, answers_of, plan


class App(containers.DeclarativeContainer):
    counter = providers.Singleton(lambda: MCPToolset(SERVER))


@pytest.mark.long
async def test_log_notifications_reach_the_llm_do_logger_at_their_own_level(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    said = [("just so you know", "notice"), ("disk full", "alert"), ("details", "debug"), ("careful", "warning")]
    steps = plan(*(("say", {"message": message, "level": level}) for message, level in said))
    runtime = Runtime(App(), entries=[agent_entry("clerk", ["counter"])], config=RuntimeConfig())
    async with runtime:
        assert answers_of(await runtime.run("clerk", steps)) == ["said"] * 4
    records = [
        (record.levelno, record.getMessage())
        for record in caplog.records
        if record.name == "llm_do.mcp.servers.counter"
    ]
    assert records == [
        (logging.INFO, "MCP server 'counter' notice (counter): just so you know"),
        (logging.CRITICAL, "MCP server 'counter' alert (counter): disk full"),
        (logging.DEBUG, "MCP server 'counter' debug (counter): details"),
        (logging.WARNING, "MCP server 'counter' warning (counter): careful"),
    ]
    assert not [record for record in caplog.records if record.name.startswith("fastmcp.client")]


@pytest.mark.long
def test_the_command_shows_a_servers_log_messages_with_v_only(tmp_path: Path) -> None:
    root = tmp_path / "desk"
    root.mkdir()
    (root / "project.toml").write_text(f'[mcp_servers.counter]\ncommand = "python"\nargs = ["{SERVER}"]\n')
    (root / "clerk.worker").write_text("---\ntoolsets: [counter]\n---\nCount.")
    steps = [ToolCallPart("say", {"message": "disk full", "level": "alert"})]
    steps.append(ToolCallPart("say", {"message": "details", "level": "debug"}))
    Recording.from_script([*steps, "Done."]).save(root / "script.json")
    quiet = llm_do("run", root, "go", "-m", "replay:script.json", cwd=root)
    assert quiet.returncode == 0, quiet.stderr
    assert "disk full" not in quiet.stderr and "ALERT" not in quiet.stderr
    shown = llm_do("run", root, "go", "-m", "replay:script.json", "-v", cwd=root)
    assert shown.returncode == 0, shown.stderr
    assert "MCP server 'counter' alert (counter): disk full" in shown.stderr.splitlines()
    assert not [line for line in shown.stderr.splitlines() if " debug (counter): " in line]  # that needs -vv
    everything = llm_do("run", root, "go", "-m", "replay:script.json", "-vv", cwd=root)
    assert "MCP server 'counter' debug (counter): details" in everything.stderr.splitlines()
