"""The shell presets, `shell_readonly` and `shell_file_ops`: real programs in a real project directory, what
runs without asking, what asks, and what is denied with a reason the model reads. They are the earlier llm-do's
presets of the same names: what it ran freely runs freely, what it asked for asks, what it refused is denied."""

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
    (tmp_path / "notes.txt").write_text("milk\neggs\nmilk\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return tmp_path


def entries(root: Path, pattern: str = "*") -> list[str]:
    """The names of the files and folders under `root` matching `pattern`, at any depth."""
    return sorted(str(path.relative_to(root)) for path in root.rglob(pattern) if ".git" not in path.parts)


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
    commands = [
        ["cat", "notes.txt"],
        ["grep", "-n", "eggs", "notes.txt"],
        ["git", "status"],
        ["sort", "notes.txt"],
        ["uniq", "-c", "notes.txt"],
        ["wc", "-l", "notes.txt"],
        ["head", "-n", "1", "notes.txt"],
        ["tail", "-n", "1", "notes.txt"],
        ["ls", "docs"],
        ["find", ".", "-name", "*.md"],
        ["git", "log"],
    ]
    returned, asked = await run_commands(project, "shell_readonly", commands)
    assert asked == []
    assert "milk" in returned[0] and "2:eggs" in returned[1] and "No commits yet" in returned[2]
    assert "eggs\\nmilk\\nmilk" in returned[3] and "1 milk" in returned[4] and "3 notes.txt" in returned[5]
    assert "a.md" in returned[8] and "./docs/a.md" in returned[9]


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        (["cat", "/etc/passwd"], "paths must be relative and stay in the project"),
        (["cat", "../outside"], "paths must be relative and stay in the project"),
        (["find", ".", "-fprint", "list.txt"], "find may not -fprint here"),
        (["git", "commit", "-m", "x"], "only git diff, log, show, status run here"),
        (["git", "blame", "notes.txt"], "only git diff, log, show, status run here, not git blame"),
        (["git", "-c", "core.pager=sh", "log"], "git -c is not allowed here"),
        (["git", "diff", "--output=notes.txt"], "git --output=notes.txt is not allowed here"),
        (["sort", "-o", "notes.txt", "notes.txt"], "sort may not write a file (-o) here"),
        (["sort", "-ro", "notes.txt", "notes.txt"], "sort may not write a file (-ro) here"),
        (["sort", "--out=notes.txt", "notes.txt"], "sort may not write a file (--out=notes.txt) here"),
        (["sort", "--compress-program=sh", "notes.txt"], "sort may not run --compress-program=sh here"),
        (["uniq", "notes.txt", "docs/a.md"], "uniq may not write a file (docs/a.md) here"),
        (["mv", "notes.txt", "b.txt"], "mv is not one of this shell's programs (cat, find, git, grep, head, ls"),
        (["stat", "notes.txt"], "stat is not one of this shell's programs"),
        (["du", "docs"], "du is not one of this shell's programs"),
    ],
)
async def test_the_read_only_shell_denies_what_would_write_or_leave_the_project(
    project: Path, command: list[str], reason: str
) -> None:
    [returned], asked = await run_commands(project, "shell_readonly", [command])
    assert reason in returned and asked == []
    assert (project / "notes.txt").read_text() == "milk\neggs\nmilk\n" and (project / "docs" / "a.md").exists()
    assert entries(project) == ["docs", "docs/a.md", "notes.txt"]


@pytest.mark.parametrize("action", ["-exec", "-execdir"])
async def test_the_read_only_shell_asks_before_find_runs_a_program(project: Path, action: str) -> None:
    command = ["find", ".", "-name", "a.md", action, "touch", "{}.seen", ";"]
    _, asked = await run_commands(project, "shell_readonly", [command], "deny")
    assert asked == [" ".join(command)]
    assert entries(project, "*.seen") == []
    _, asked = await run_commands(project, "shell_readonly", [command])
    assert asked == [" ".join(command)] and entries(project, "*.seen") == ["docs/a.md.seen"]


async def test_the_read_only_shell_asks_before_find_deletes(project: Path) -> None:
    command = ["find", "docs", "-name", "a.md", "-delete"]
    [returned], asked = await run_commands(project, "shell_readonly", [command], "deny")
    assert asked == ["find docs -name a.md -delete"] and "no" in returned
    assert (project / "docs" / "a.md").exists()


async def test_the_file_ops_shell_lists_freely_and_asks_before_moves(project: Path) -> None:
    returned, asked = await run_commands(project, "shell_file_ops", [["ls", "docs"], ["mv", "docs/a.md", "b.md"]])
    assert "a.md" in returned[0]
    assert asked == ["mv docs/a.md b.md"]
    assert (project / "b.md").exists() and not (project / "docs" / "a.md").exists()


async def test_a_denied_move_leaves_the_files_where_they_were(project: Path) -> None:
    [returned], asked = await run_commands(project, "shell_file_ops", [["mv", "notes.txt", "gone.txt"]], "deny")
    assert asked == ["mv notes.txt gone.txt"] and "no" in returned
    assert (project / "notes.txt").exists() and not (project / "gone.txt").exists()


@pytest.mark.parametrize(
    "command",
    [["mkdir", "drafts"], ["touch", "new.txt"], ["cp", "notes.txt", "copy.txt"], ["cat", "notes.txt"], ["rm", "x"]],
)
async def test_the_file_ops_shell_runs_only_ls_and_mv(project: Path, command: list[str]) -> None:
    [returned], asked = await run_commands(project, "shell_file_ops", [command])
    assert f"{command[0]} is not one of this shell's programs (ls, mv)" in returned and asked == []
    assert entries(project) == ["docs", "docs/a.md", "notes.txt"]


GIT_GLOBAL_OPTION = "git --namespace before the command is not allowed here"


def staged(project: Path) -> str:
    """What git's index holds that its last commit does not."""
    done = subprocess.run(["git", "diff", "--cached", "--name-only"], cwd=project, capture_output=True, text=True)
    return done.stdout


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        (["git", "--namespace", "log", "add", "notes.txt"], GIT_GLOBAL_OPTION),
        (["git", "--namespace", "x", "rm", "-q", "notes.txt"], GIT_GLOBAL_OPTION),
        (["git", "--config-env=core.pager=PATH", "log"], "git --config-env=core.pager=PATH is not allowed here"),
        (["grep", "-f/etc/passwd", "notes.txt"], "paths must be relative and stay in the project"),
        (["grep", "-f../outside", "notes.txt"], "paths must be relative and stay in the project"),
        (["cat", "../outside=x"], "paths must be relative and stay in the project"),
    ],
)
async def test_the_read_only_shell_reads_git_s_command_and_joined_option_values_as_git_and_programs_do(
    project: Path, command: list[str], reason: str
) -> None:
    """git's global options may take a value (`--namespace NAME`), so the first argument not starting with '-' is
    not always git's command; and a short option's value may be joined to it (`-f/etc/passwd`)."""
    [returned], asked = await run_commands(project, "shell_readonly", [command])
    assert reason in returned and asked == []
    assert staged(project) == "" and (project / "notes.txt").exists()


async def test_the_read_only_shell_runs_git_s_read_only_global_options(project: Path) -> None:
    [returned], asked = await run_commands(project, "shell_readonly", [["git", "--no-pager", "status"]])
    assert "No commits yet" in returned and asked == []


async def test_git_in_the_read_only_shell_reads_no_repository_above_the_project(tmp_path: Path) -> None:
    """A project inside a larger repository: git would find the outer one, whose files outside the project
    `git show HEAD:<path from the top>` and `git log -p` print. It stops looking at the project root instead."""
    outer, project = tmp_path / "outer", tmp_path / "outer" / "project"
    project.mkdir(parents=True)
    (outer / "secret.env").write_text("TOPSECRET\n")
    (project / "a.txt").write_text("hi\n")
    commit_all(outer)
    commands = [["git", "show", "HEAD:secret.env"], ["git", "log", "-p"], ["git", "diff", "HEAD~0"], ["cat", "a.txt"]]
    returned, asked = await run_commands(project, "shell_readonly", commands)
    assert asked == [] and not any("TOPSECRET" in each for each in returned)
    assert all("not a git repository" in each.lower() for each in returned[:3]) and "hi" in returned[3]


def commit_all(repository: Path) -> None:
    subprocess.run(["git", "init", "-q", str(repository)], check=True)
    subprocess.run(["git", "add", "."], cwd=repository, check=True)
    who = ["-c", "user.email=a@example.com", "-c", "user.name=a"]
    subprocess.run(["git", *who, "commit", "-q", "-m", "x"], cwd=repository, check=True)


async def test_the_file_ops_shell_denies_a_target_directory_joined_to_its_option(project: Path) -> None:
    [returned], asked = await run_commands(project, "shell_file_ops", [["mv", "-t/tmp", "notes.txt"]])
    assert "paths must be relative and stay in the project" in returned
    assert asked == [] and (project / "notes.txt").exists()


async def test_the_file_ops_shell_keeps_paths_in_the_project(project: Path) -> None:
    [returned], asked = await run_commands(project, "shell_file_ops", [["mv", "notes.txt", "/tmp/stolen.txt"]])
    assert "paths must be relative and stay in the project" in returned
    assert asked == [] and (project / "notes.txt").exists()
