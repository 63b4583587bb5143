"""MCP servers through the `llm-do` command: every server that fails to start is reported once, with its
command, exit code and stderr, and nothing else; a command ended by SIGTERM or SIGHUP tears down as after
Ctrl-C, and one killed with SIGKILL leaves no server behind (the server and its child ignore SIGTERM,
SIGHUP and the end of their stdin)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
from pathlib import Path

import pytest

from ..cli_projects import llm_do, start_llm_do
from ..mcp_support import SERVER, alive, gone_within, stubborn_pids, stubborn_project, wait_for

CRASH = "import sys; print('crash: reading config', 'crash: bad token', sep='\\n', file=sys.stderr); sys.exit(3)"
QUIT = "import sys; sys.exit(5)"


def failing_project(root: Path) -> Path:
    """A worker with a good server and three that cannot start: one crashes with stderr, one exits
    silently, one's command does not exist."""
    root.mkdir()
    (root / "project.toml").write_text(
        'entry = "clerk"\n\n'
        f"[mcp_servers.good]\ncommand = 'python'\nargs = [{json.dumps(str(SERVER))}]\n\n"
        f"[mcp_servers.crash]\ncommand = 'python'\nargs = ['-c', {json.dumps(CRASH)}]\n\n"
        f"[mcp_servers.quits]\ncommand = 'python'\nargs = ['-c', {json.dumps(QUIT)}]\n\n"
        "[mcp_servers.ghost]\ncommand = 'no-such-mcp-server-xyz'\n"
    )
    (root / "clerk.worker").write_text("---\ntoolsets: [good, crash, quits, ghost]\n---\nCount.\n")
    return root


def test_every_server_that_fails_to_start_is_reported_once_and_nothing_else(tmp_path: Path) -> None:
    project = failing_project(tmp_path / "desk")
    done = llm_do("run", project, "hi", "--model", "test")
    crash = shlex.join([sys.executable, "-c", CRASH])
    quits = shlex.join([sys.executable, "-c", QUIT])
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"llm-do: error: MCP server 'crash' ({crash}) crashed during start-up, exit code 3. "
        "Run its command by hand to see why it stops.",
        "  | crash: reading config",
        "  | crash: bad token",
        f"llm-do: error: MCP server 'quits' ({quits}) crashed during start-up, exit code 5. "
        "Run its command by hand to see why it stops.",
        "llm-do: error: MCP server 'ghost' (no-such-mcp-server-xyz) could not be started: command "
        "'no-such-mcp-server-xyz' was not found or cannot be run. Install it, or fix the server's `command` "
        "(an absolute path, or a program on PATH).",
    ]
    document = json.loads(llm_do("run", project, "hi", "--model", "test", "--json").stdout)
    assert (document["kind"], document["exit_code"]) == ("mcp", 1)
    assert document["error"].startswith("MCP server 'crash' (")
    assert "; MCP server 'quits' (" in document["error"] and "; MCP server 'ghost' (" in document["error"]


@pytest.mark.long
@pytest.mark.parametrize(
    ("command", "signum"),
    [("run", signal.SIGTERM), ("run", signal.SIGHUP), ("chat", signal.SIGHUP), ("check", signal.SIGTERM)],
)
def test_sigterm_and_sighup_tear_down_like_ctrl_c(tmp_path: Path, command: str, signum: signal.Signals) -> None:
    project = stubborn_project(tmp_path / "desk", slow_start=600 if command == "check" else 0)
    args = {"run": ("run", project, "go"), "chat": ("chat", project), "check": ("check", project)}[command]
    started = start_llm_do(*args, "--approve-all" if command != "check" else "--json", stdin="go\n")
    pids = stubborn_pids(project)
    if command != "check":
        wait_for(project / "holding")  # the tool is running; `check` is starting the server
    os.kill(started.pid, signum)
    done = started.wait(120)
    assert done.returncode == 128 + signum, done.stderr
    assert f"interrupted by {signum.name}: the run was cancelled and torn down" in done.stderr
    assert "Traceback" not in done.stderr
    assert [pid for pid in pids if alive(pid)] == []  # gone before the command exited: its teardown ran


@pytest.mark.long
def test_a_server_does_not_outlive_a_command_killed_with_sigkill(tmp_path: Path) -> None:
    project = stubborn_project(tmp_path / "desk")
    started = start_llm_do("run", project, "go", "--approve-all")
    server, child = stubborn_pids(project)
    wait_for(project / "holding")
    os.kill(started.pid, signal.SIGKILL)
    assert started.wait(60).returncode == -signal.SIGKILL
    # The server goes at once (its parent-death signal), its child after the server's stop_grace (2 s).
    assert gone_within([server, child], 15) == []
