"""The command and tools nobody declared safe: `run` refuses them under `--reject-all`, `llm-do list` says what
decides each tool, `llm-do check` names every tool that runs without asking, and a project file's
`approval_default` is a setting the environment overrides."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic_ai.messages import ToolCallPart

from llm_do.models import Recording

from ..cli_projects import llm_do

NOTIFY = '''
from llm_do import Toolset, tool


class Notify(Toolset):
    @tool(read_only=True)
    def unread(self) -> int:
        """How many notifications wait."""
        return 3

    @tool
    def send_notification(self, message: str) -> str:
        """Send a notification to the team."""
        return "sent " + message
'''


def notify_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools.py").write_text(NOTIFY)
    (root / "herald.worker").write_text("---\ntoolsets: [notify, filesystem_readonly]\n---\nTell the team.\n")
    script = [ToolCallPart("send_notification", {"message": "deploy done"}), "Told."]
    Recording.from_script(script).save(root / "script.json")
    return root


def test_the_command_refuses_an_undeclared_tool_under_reject_all(tmp_path: Path) -> None:
    project = notify_project(tmp_path / "herald")
    done = llm_do("run", project, "go", "--model", "replay:script.json", "--reject-all", "-v", cwd=project)
    assert done.returncode == 0, done.stderr
    assert "needs approval" in done.stderr and "is not declared read-only" in done.stderr
    allowed = llm_do(
        "run",
        project,
        "go",
        "--model",
        "replay:script.json",
        "--reject-all",
        "-v",
        cwd=project,
        env={"LLM_DO_APPROVAL_DEFAULT": "allow"},
    )
    assert allowed.returncode == 0 and "sent deploy done" in allowed.stderr, allowed.stderr


def test_list_shows_what_decides_each_tool_and_check_names_the_ungated_ones(tmp_path: Path) -> None:
    project = notify_project(tmp_path / "herald")
    listed = llm_do("list", project, "--json")
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)["entries"]
    assert row["approvals"]["notify"] == "allow unread (read-only); ask send_notification (not declared read-only)"
    assert row["decisions"] == {"notify": {"unread": "allow", "send_notification": "ask"}}
    assert row["reasons"]["notify"]["unread"] == "tool 'unread' is declared read-only"
    assert row["approvals"]["filesystem_readonly"] == "default allow"  # the built-in's declared policy
    text_listing = llm_do("list", project)
    assert "allow unread (read-only); ask send_notification" in text_listing.stdout.replace("\n", " ").replace("│", "")

    checked = llm_do("check", project)
    assert checked.returncode == 0, checked.stderr
    lines = checked.stdout.splitlines()
    assert lines[0].startswith("ok: 1 entries (herald)")
    assert "ungated: notify.unread (herald) runs without asking: tool 'unread' is declared read-only" in lines
    assert not any("send_notification" in line for line in lines)
    assert any(line.startswith("ungated: filesystem_readonly.read_text (herald)") for line in lines)
    document = json.loads(llm_do("check", project, "--json").stdout)
    assert {
        "toolset": "notify",
        "tool": "unread",
        "entries": ["herald"],
        "why": "tool 'unread' is declared read-only",
    } in (document["ungated"])
    every = json.loads(llm_do("check", project, "--json", env={"LLM_DO_APPROVAL_DEFAULT": "allow"}).stdout)
    assert any(item["tool"] == "send_notification" for item in every["ungated"])


def test_a_project_file_sets_the_approval_default_and_the_setting_wins(tmp_path: Path) -> None:
    project = notify_project(tmp_path / "herald")
    (project / "project.toml").write_text('approval_default = "allow"\n')
    run = ["run", project, "go", "--model", "replay:script.json", "--reject-all", "-v"]
    allowed = llm_do(*run, cwd=project)
    assert allowed.returncode == 0 and "sent deploy done" in allowed.stderr, allowed.stderr
    asked = llm_do(*run, cwd=project, env={"LLM_DO_APPROVAL_DEFAULT": "ask"})  # the setting wins over the file
    assert asked.returncode == 0 and "needs approval" in asked.stderr and "sent deploy done" not in asked.stderr


def test_a_wrong_approval_default_in_the_project_file_is_a_problem_with_its_line(tmp_path: Path) -> None:
    project = notify_project(tmp_path / "herald")
    (project / "project.toml").write_text('max_depth = 3\napproval_default = "sometimes"\n')
    done = llm_do("check", project)
    assert done.returncode == 1
    assert "project.toml:2: approval_default must be one of ask, allow, deny, got 'sometimes'" in done.stderr
