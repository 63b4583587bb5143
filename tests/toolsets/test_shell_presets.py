"""The shell presets, `shell_readonly` and `shell_file_ops`: real programs in a real project directory, what
runs without asking, what asks, and what is denied with a reason the model reads."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, RetryPromptPart, ToolReturnPart

from containers.project import ProjectContainer
from llm_do import AgentEntry, Approval, ApprovalRequest, Runtime, RuntimeConfig
from llm_do.testing import ScriptedModel, tool_call


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("milk\neggs\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return tmp_path


def seen(messages: list[ModelMessage]) -> list[str]:
    """What the model read back from each of its calls, in order."""
    return [
        part.model_response_str() if isinstance(part, ToolReturnPart) else part.model_response()
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart | RetryPromptPart)
    ]


async def run_commands(
    project: Path, toolset: str, commands: list[list[str]], answer: str = "approve"
) -> tuple[list[str], list[str]]:
    """Run each command through the preset, one model step each; what each returned, and what was asked."""
    asked: list[str] = []

    def approver(request: ApprovalRequest) -> Approval:
        asked.append(" ".join(request.args["command"]))
        return Approval.approve() if answer == "approve" else Approval.deny("no")

    steps: list[Any] = [tool_call("run", command=command) for command in commands]
    steps.append(lambda turn: repr(seen(turn.messages)))
    container = ProjectContainer()
    container.config.project_root.from_value(str(project))
    entry = AgentEntry(Agent(ScriptedModel(*steps)), name="sh", toolsets=[toolset])
    config = RuntimeConfig(approval_on_deny="tell_model")
    async with Runtime(container, entries=[entry], config=config, approver=approver) as runtime:
        result = await runtime.run("sh", "go")
    return eval(result.output), asked


async def test_the_read_only_shell_looks_around_without_asking(project: Path) -> None:
    returned, asked = await run_commands(
        project, "shell_readonly", [["cat", "notes.txt"], ["grep", "-n", "eggs", "notes.txt"], ["git", "status"]]
    )
    assert asked == []
    assert "milk" in returned[0] and "2:eggs" in returned[1] and "No commits yet" in returned[2]


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        (["cat", "/etc/passwd"], "paths must be relative and stay in the project"),
        (["cat", "../outside"], "paths must be relative and stay in the project"),
        (["find", ".", "-delete"], "find may not -delete here"),
        (["find", ".", "-exec", "rm", "{}", ";"], "find may not -exec here"),
        (["git", "commit", "-m", "x"], "only git blame, diff, grep, log, ls-files, show, status run here"),
        (["git", "-c", "core.pager=sh", "log"], "git -c is not allowed here"),
        (["git", "diff", "--output=notes.txt"], "git --output=notes.txt is not allowed here"),
        (["mv", "notes.txt", "b.txt"], "mv is not one of this shell's programs (cat, du, find, git, grep, head, ls"),
    ],
)
async def test_the_read_only_shell_denies_what_would_write_or_leave_the_project(
    project: Path, command: list[str], reason: str
) -> None:
    [returned], asked = await run_commands(project, "shell_readonly", [command])
    assert reason in returned and asked == []
    assert (project / "notes.txt").read_text() == "milk\neggs\n" and (project / "docs" / "a.md").exists()


async def test_the_file_ops_shell_makes_files_freely_and_asks_before_copies_and_moves(project: Path) -> None:
    commands = [["mkdir", "drafts"], ["cp", "notes.txt", "drafts/copy.txt"], ["mv", "docs/a.md", "drafts/a.md"]]
    returned, asked = await run_commands(project, "shell_file_ops", commands)
    assert len(returned) == 3
    assert asked == ["cp notes.txt drafts/copy.txt", "mv docs/a.md drafts/a.md"]
    assert (project / "drafts" / "copy.txt").read_text() == "milk\neggs\n"
    assert (project / "drafts" / "a.md").exists() and not (project / "docs" / "a.md").exists()


async def test_a_denied_move_leaves_the_files_where_they_were(project: Path) -> None:
    [returned], asked = await run_commands(project, "shell_file_ops", [["mv", "notes.txt", "gone.txt"]], "deny")
    assert asked == ["mv notes.txt gone.txt"] and "no" in returned
    assert (project / "notes.txt").exists() and not (project / "gone.txt").exists()


async def test_the_file_ops_shell_keeps_paths_in_the_project_and_removes_nothing(project: Path) -> None:
    returned, asked = await run_commands(
        project, "shell_file_ops", [["cp", "notes.txt", "/tmp/stolen.txt"], ["rm", "notes.txt"]]
    )
    assert "paths must be relative and stay in the project" in returned[0]
    assert "rm is not one of this shell's programs" in returned[1]
    assert asked == [] and (project / "notes.txt").exists()
