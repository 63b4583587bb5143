"""The built-in `shell` toolset: allowlist, no shell, confined cwd, timeouts and cancellation that leave
no process behind, capped output, a scrubbed environment, and approval by default.

Everything runs real programs (sh, printf, seq, env, pwd, sleep, touch) in a temporary project root.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import providers
from pydantic_ai import Agent
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import ModelMessage, ModelRequest, RetryPromptPart, ToolReturnPart
from pydantic_ai.usage import RequestUsage

from containers import BuiltinToolsets
from llm_do import (
    AgentEntry,
    ApprovalUnavailable,
    CallScope,
    InvalidSettings,
    Runtime,
    RuntimeConfig,
    ToolPolicy,
    entry,
)
from llm_do.testing import Step, Turn, answering, response, settle, tool_call, track_leaks
from llm_do.toolsets import CommandResult, ShellRule, ShellToolset, ToolsetSettings

from ..cli_projects import start_llm_do

APPROVE = RuntimeConfig(approval_mode="approve_all")
SH_GRANDCHILDREN = (  # a shell whose children ignore SIGTERM; every pid goes to `pids`, one a line
    "trap '' TERM; sleep 100 & echo $! >> pids; sleep 100 & echo $! >> pids; echo $$ >> pids; wait"
)


# -- helpers ------------------------------------------------------------------------------------


def running(pid: int) -> bool:
    """Whether `pid` is a live process. A zombie is dead: it only waits for its parent (here often a
    container init that never reaps) to collect its exit status."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def marked_processes(marker: str) -> list[int]:
    """Live processes whose environment holds `LLM_DO_TEST_MARK=<marker>` (set through `env=`)."""
    needle = f"LLM_DO_TEST_MARK={marker}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and running(int(proc.name)):
            found.append(int(proc.name))
    return found


def names_in(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def shell(root: Path, allow: Any, **options: Any) -> providers.Factory[ShellToolset]:
    return providers.Factory(ShellToolset, root, allow, **options)


async def call_run(
    toolset: providers.Factory[ShellToolset], command: Sequence[str], cwd: str = ".", config: RuntimeConfig = APPROVE
) -> CommandResult:
    """`run` called from Python: `scope.call_tool` inside an `@entry` function."""

    @entry(toolsets=["shell"])
    async def job(scope: CallScope, _: Any) -> Any:
        return await scope.call_tool("run", {"command": list(command), "cwd": cwd})

    async with Runtime(None, entries=[job], toolsets={"shell": toolset}, config=config) as runtime:
        result = (await runtime.run("job", "go")).output
    assert isinstance(result, CommandResult)
    return result


def model_reports(*commands: Mapping[str, Any]) -> AgentEntry:
    """An agent whose scripted model calls `run` once per command, then answers with all it read (JSON)."""

    def script(turn: Turn) -> Step:
        if turn.step < len(commands):
            answer = response(tool_call("run", **commands[turn.step]))
        else:
            answer = response(json.dumps([_plain(content) for content in read_back(turn.messages)]))
        answer.usage = RequestUsage(input_tokens=1, output_tokens=1)  # no estimate: args may not be JSON-able
        return answer

    return AgentEntry(Agent(answering(script)), name="operator", toolsets=["shell"])


def read_back(messages: list[ModelMessage]) -> list[Any]:
    """Every tool result (or failure) the model was sent, in order."""
    return [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart | RetryPromptPart)
    ]


def _plain(content: Any) -> Any:
    if isinstance(content, CommandResult):
        return {"exit_code": content.exit_code, "stdout": content.stdout, "stderr": content.stderr}
    return content


async def model_run(
    toolset: Any, *commands: Mapping[str, Any], config: RuntimeConfig = APPROVE, container: Any = None
) -> list[Any]:
    """What the scripted model read back from each `run` call of a real agent run."""
    toolsets = {} if toolset is None else {"shell": toolset}
    async with Runtime(container, entries=[model_reports(*commands)], toolsets=toolsets, config=config) as runtime:
        output = (await runtime.run("operator", "go")).output
    read: list[Any] = json.loads(output)
    return read


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path.resolve() / "project"
    project.mkdir()
    return project


# -- the allowlist ------------------------------------------------------------------------------


async def test_an_allowed_program_runs_in_the_project_root(root: Path) -> None:
    (read,) = await model_run(shell(root, ["pwd"]), {"command": ["pwd"]})
    assert read == {"exit_code": 0, "stdout": f"{root}\n", "stderr": ""}


async def test_a_program_outside_the_allowlist_is_refused_and_the_model_reads_the_allowed_ones(root: Path) -> None:
    (read,) = await model_run(shell(root, ["pwd", "printf"]), {"command": ["touch", "made"]})
    assert read == (
        "run: program 'touch' is not allowed; allowed programs: printf, pwd. Use an allowed program, "
        "or ask the user to add this one to the allowlist (LLM_DO_SHELL_ALLOW)."
    )
    assert not (root / "made").exists()


async def test_a_refusal_raises_tool_failed_from_call_tool(root: Path) -> None:
    with pytest.raises(ToolFailed, match=r"program 'ls -l' is not allowed; allowed programs: ls\. The command is a "):
        await call_run(shell(root, ["ls"]), ["ls -l"])
    with pytest.raises(ToolFailed, match=r"allowed programs: none \(the allowlist is empty\)"):
        await call_run(shell(root, []), ["ls"])
    with pytest.raises(ToolFailed, match=r"the command is empty"):
        await call_run(shell(root, ["ls"]), [])


async def test_argument_patterns_must_match_every_argument(root: Path) -> None:
    toolset = shell(root, [ShellRule("printf", args=[r"[a-z]+", r"%s\\n"]), ShellRule("pwd", args=())])
    assert (await call_run(toolset, ["printf", r"%s\n", "ok"])).stdout == "ok\n"
    with pytest.raises(ToolFailed) as refused:
        await call_run(toolset, ["printf", r"%s\n", "ok", "NOT-OK"])
    assert str(refused.value) == (
        "run: argument 3 'NOT-OK' is not allowed for 'printf'; each argument must match one of these patterns "
        r"in full: '[a-z]+', '%s\\n'."
    )
    with pytest.raises(ToolFailed, match=r"argument 1 '-P' is not allowed for 'pwd'.*none \(no arguments\)"):
        await call_run(toolset, ["pwd", "-P"])
    assert (await call_run(toolset, ["pwd"])).exit_code == 0


async def test_a_mapping_allowlist_and_an_absolute_path(root: Path) -> None:
    printf = shutil.which("printf", path="/usr/bin:/bin")
    assert printf is not None
    toolset = shell(root, {printf: [r"\w+"], "pwd": None})
    assert (await call_run(toolset, [printf, "full"])).stdout == "full"
    assert (await call_run(toolset, ["printf", "short"])).stdout == "short"
    with pytest.raises(ToolFailed, match="argument 1 'by-name' is not allowed"):
        await call_run(toolset, ["printf", "by-name"])


@pytest.mark.parametrize(
    "program", ["./pwd", "pwd/", "sub/../pwd", "{root}/pwd", "/tmp/../{root}/pwd", " pwd", "pwd\n"]
)
async def test_a_program_named_with_a_path_is_not_the_allowed_program(root: Path, program: str) -> None:
    """Only the allowed name runs the program found on PATH: a path that ends in that name (a lookalike planted in
    the project, run relative to its working directory) is refused, and nothing runs."""
    (root / "sub").mkdir()
    planted = root / "pwd"
    planted.write_text(f"#!/bin/sh\ntouch {root.parent}/planted-ran\n")
    planted.chmod(0o755)
    given = program.format(root=root)
    with pytest.raises(ToolFailed, match=r"run: program .* is not allowed; allowed programs: pwd\."):
        await call_run(shell(root, ["pwd"]), [given])
    assert not (root.parent / "planted-ran").exists()
    assert (await call_run(shell(root, ["pwd"]), ["pwd"])).stdout == f"{root}\n"
    assert not (root.parent / "planted-ran").exists()


async def test_an_allowed_program_that_is_missing_is_reported(root: Path) -> None:
    with pytest.raises(ToolFailed, match=r"'no-such-tool' is allowed but is not on PATH=/usr/bin:/bin; ask the user"):
        await call_run(shell(root, ["no-such-tool"], path="/usr/bin:/bin"), ["no-such-tool"])
    with pytest.raises(ToolFailed, match=r"'lint' is allowed but does not exist or is not executable"):
        await call_run(shell(root, ["/nowhere/lint"]), ["lint"])


def test_bad_allowlists_are_refused_when_the_toolset_is_built(root: Path) -> None:
    with pytest.raises(ValueError, match=r"program 'bin/tool' must be a bare name .* not a relative path"):
        ShellRule("bin/tool")
    with pytest.raises(ValueError, match=r"program 'rm -rf' must be a program name"):
        ShellToolset(root, ["rm -rf"])
    with pytest.raises(ValueError, match=r"names 'git' twice \('git', '/usr/bin/git'\)"):
        ShellToolset(root, ["git", "/usr/bin/git"])
    with pytest.raises(TypeError, match="not the string 'git'"):
        ShellToolset(root, "git")


# -- no shell -----------------------------------------------------------------------------------


async def test_metacharacters_reach_the_program_as_plain_arguments(root: Path) -> None:
    tricky = ["a; touch semi", "| touch pipe", "$(touch dollar)", "`touch tick`", "*", "&& touch and", "> out", "~"]
    (read,) = await model_run(shell(root, ["printf"]), {"command": ["printf", r"%s\n", *tricky]})
    assert read["stdout"].splitlines() == tricky
    assert names_in(root) == []


async def test_text_that_cannot_be_an_argument_is_refused_readably(root: Path) -> None:
    toolset = shell(root, ["printf"])
    read = await model_run(
        toolset,
        {"command": ["printf", "%s", "a\ud800b"]},
        {"command": ["printf", "%s", "\udc80"]},  # not the byte 0x80 that os.fsencode would make of it
        {"command": ["printf\udcff"]},
        {"command": ["printf", "y" * 140_000]},
    )
    assert read == [
        "run: argument 2 ('a\\ud800b') contains a lone surrogate, which is not text and cannot be passed to a "
        "program; remove it",
        "run: argument 2 ('\\udc80') contains a lone surrogate, which is not text and cannot be passed to a "
        "program; remove it",
        "run: the program name ('printf\\udcff') contains a lone surrogate, which is not text and cannot be passed "
        "to a program; remove it",
        "run: 'printf' could not be started: Argument list too long",
    ]


# -- the working directory ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cwd", "complaint"),
    [
        ("..", "is not allowed; give a directory relative to the project root, without '..'"),
        ("sub/../..", "is not allowed"),
        ("sub/..", "is not allowed"),
        ("/", "is not allowed"),
        ("/tmp", "is not allowed"),
        ("out", "leads outside the project root (through a symbolic link)"),
        ("sub/up", "leads outside the project root"),
        ("missing", "is not a directory under the project root"),
        ("file.txt", "is not a directory under the project root"),
        ("loop", "cannot be resolved (a symbolic link loop?)"),
        ("x" * 5000, "is not a directory under the project root"),
        ("sub/\ud800", "contains a lone surrogate, which no directory name has; remove it"),
    ],
)
async def test_cwd_must_stay_inside_the_project_root(root: Path, cwd: str, complaint: str) -> None:
    (root / "sub").mkdir()
    (root / "file.txt").write_text("x")
    (root.parent / "outside").mkdir()
    (root / "out").symlink_to(root.parent / "outside")
    (root / "sub" / "up").symlink_to(root.parent)
    (root / "loop").symlink_to(root / "loop")
    with pytest.raises(ToolFailed) as refused:
        await call_run(shell(root, ["touch"]), ["touch", "escaped"], cwd=cwd)
    assert str(refused.value).startswith(f"run: cwd {cwd!r} ")
    assert complaint in str(refused.value)
    assert not list(root.parent.rglob("escaped"))


async def test_cwd_inside_the_root_is_used_also_through_an_inner_link(root: Path) -> None:
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "alias").symlink_to(root / "sub")
    toolset = shell(root, ["pwd"])
    assert (await call_run(toolset, ["pwd"], cwd="sub/deeper")).stdout == f"{root}/sub/deeper\n"
    assert (await call_run(toolset, ["pwd"], cwd="alias")).stdout == f"{root}/sub\n"


# -- ending the process tree --------------------------------------------------------------------


async def test_a_timeout_kills_the_whole_process_tree(root: Path) -> None:
    toolset = shell(root, ["sh"], timeout=2, kill_grace=0.2)
    (read,) = await model_run(toolset, {"command": ["sh", "-c", SH_GRANDCHILDREN]})
    pids = [int(line) for line in (root / "pids").read_text().split()]
    assert len(pids) == 3, "the shell and both children started before the timeout"
    assert [pid for pid in pids if running(pid)] == []
    assert read["exit_code"] == -9, "the shell ignored SIGTERM, so it took SIGKILL"
    assert read["stderr"].endswith(
        "[llm-do: the command was stopped after 2 s (its time limit) and all its processes were killed]"
    )


async def test_cancelling_the_run_kills_the_whole_process_tree(root: Path) -> None:
    toolset = shell(root, ["sh"], timeout=100, kill_grace=0.2)
    agent = model_reports({"command": ["sh", "-c", SH_GRANDCHILDREN]})
    async with Runtime(None, entries=[agent], toolsets={"shell": toolset}, config=APPROVE) as runtime:
        task = asyncio.create_task(runtime.run("operator", "go"))
        pids_file = root / "pids"
        while not pids_file.exists() or pids_file.read_text().count("\n") < 3:  # three whole lines
            assert not task.done(), task
            await asyncio.sleep(0.01)
        pids = [int(line) for line in pids_file.read_text().split()]
        assert all(running(pid) for pid in pids)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert [pid for pid in pids if running(pid)] == []
    await settle()


async def test_a_second_cancellation_during_the_grace_kills_at_once(root: Path) -> None:
    """Through `scope.call_tool`, where each cancellation reaches the tool. (Inside an agent run, pydantic-ai
    cancels a tool's task once and waits for it, so there the grace always runs its course.)"""
    script = (  # the shell reports SIGTERM in `terms`; its child ignores SIGTERM
        "trap 'echo term >> terms' TERM; (trap '' TERM; exec sleep 100) & echo $! >> pids; echo $$ >> pids; "
        "while :; do wait; sleep 1; done"
    )

    @entry(toolsets=["shell"])
    async def job(scope: CallScope, _: Any) -> Any:
        return await scope.call_tool("run", {"command": ["sh", "-c", script]})

    toolset = shell(root, ["sh"], timeout=100, kill_grace=600)
    async with Runtime(None, entries=[job], toolsets={"shell": toolset}, config=APPROVE) as runtime:
        task = asyncio.create_task(runtime.run("job", "go"))
        await until(lambda: lines(root / "pids") == 2, task)
        task.cancel()
        await until(lambda: lines(root / "terms") >= 1, task)  # SIGTERM sent: the 600 s grace has begun
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    pids = [int(line) for line in (root / "pids").read_text().split()]
    await until(lambda: not any(running(pid) for pid in pids), None, limit=30)  # far below the grace


def lines(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


async def until(condition: Callable[[], bool], task: asyncio.Task[Any] | None, limit: float = 60) -> None:
    """Poll `condition`; fail if `task` ends first or `limit` seconds pass."""
    async with asyncio.timeout(limit):
        while not condition():
            assert task is None or not task.done(), task
            await asyncio.sleep(0.01)


async def test_background_processes_are_ended_when_the_command_exits(root: Path) -> None:
    (read,) = await model_run(
        shell(root, ["sh"]), {"command": ["sh", "-c", "sleep 100 & echo $! > pids; echo started"]}
    )
    assert read == {"exit_code": 0, "stdout": "started\n", "stderr": ""}
    assert not running(int((root / "pids").read_text()))


async def test_twenty_runs_leave_no_process_behind(root: Path) -> None:
    marker = uuid.uuid4().hex
    toolset = shell(root, ["sh"], env={"LLM_DO_TEST_MARK": marker}, kill_grace=0.5)
    agent = model_reports({"command": ["sh", "-c", "sleep 100 & sleep 100 & echo started"]})
    assert marked_processes(marker) == []
    async with Runtime(None, entries=[agent], toolsets={"shell": toolset}, config=APPROVE) as runtime:
        for _ in range(20):
            result = await runtime.run("operator", "go")
            assert json.loads(result.output)[0]["stdout"] == "started\n"
    assert marked_processes(marker) == []


# -- output and environment ---------------------------------------------------------------------


async def test_output_is_capped_with_a_note_the_model_reads(root: Path) -> None:
    total = len("".join(f"{n}\n" for n in range(1, 100_001)))
    toolset = shell(root, ["seq", "sh"], max_output=1000)
    out, err = await model_run(
        toolset, {"command": ["seq", "1", "100000"]}, {"command": ["sh", "-c", "seq 1 100000 >&2; echo fine"]}
    )
    note = (
        f"\n[llm-do: {{}} truncated: {total - 1000} more bytes were not shown (at most 1000 bytes per stream); "
        "narrow the command to see the rest]"
    )
    assert out["stdout"] == "".join(f"{n}\n" for n in range(1, 1000))[:1000] + note.format("stdout")
    assert (err["stdout"], err["stderr"]) == ("fine\n", out["stdout"].replace("stdout truncated", "stderr truncated"))
    capped = await call_run(toolset, ["seq", "1", "100000"])
    assert capped.truncated and not capped.timed_out


async def test_the_environment_is_minimal_and_holds_no_secret(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DO_DATABASE_URL", "postgresql://app:hunter2@db/app")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-programs")
    toolset = shell(root, ["env", "sh"], env={"GIT_PAGER": "cat"})
    with track_leaks() as leaks:
        (read,) = await model_run(toolset, {"command": ["env"]})
    leaks.assert_no_leaks()
    variables = dict(line.split("=", 1) for line in read["stdout"].splitlines())
    assert set(variables) == {"PATH", "HOME", "LANG", "GIT_PAGER"}
    assert (variables["PATH"], variables["LANG"], variables["GIT_PAGER"]) == (
        "/usr/local/bin:/usr/bin:/bin",
        "C.UTF-8",
        "cat",
    )
    assert "hunter2" not in read["stdout"] and "sk-not" not in read["stdout"]
    home = Path(variables["HOME"])
    assert home.name not in names_in(home.parent), "the private HOME is removed when the call ends"
    listed = await call_run(toolset, ["sh", "-c", 'ls -A "$HOME"; echo "$HOME"'])
    assert listed.stdout.startswith("/") and listed.stdout.count("\n") == 1, "HOME is empty"
    chosen = await call_run(
        shell(root, ["sh"], env={"HOME": str(root), "PATH": "/bin"}), ["sh", "-c", "echo $HOME $PATH"]
    )
    assert chosen.stdout == f"{root} /bin\n", "an explicit env wins"


# -- approval and settings ----------------------------------------------------------------------


@pytest.fixture
def builtin_app(root: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[], BuiltinToolsets]:
    monkeypatch.setenv("LLM_DO_PROJECT_ROOT", str(root))
    monkeypatch.setenv("LLM_DO_SHELL_ALLOW", "touch, sh")
    monkeypatch.setenv("LLM_DO_SHELL_TIMEOUT", "1.5")
    return BuiltinToolsets


async def test_calls_ask_by_default_so_reject_all_runs_nothing(
    root: Path, builtin_app: Callable[[], BuiltinToolsets]
) -> None:
    touch = {"command": ["touch", "made"]}
    (read,) = await model_run(None, touch, config=RuntimeConfig(approval_mode="reject_all"), container=builtin_app())
    assert read == (
        "The call to 'run' was not run: it needs approval (toolset 'shell' policy: default is 'ask') and "
        "approval_mode is 'reject_all'. Do not retry the same call."
    )
    assert not (root / "made").exists()
    with pytest.raises(ApprovalUnavailable):
        await model_run(None, touch, config=RuntimeConfig(approval_mode="prompt"), container=builtin_app())
    assert not (root / "made").exists()
    (read,) = await model_run(None, touch, config=APPROVE, container=builtin_app())
    assert read["exit_code"] == 0
    assert (root / "made").exists()


async def test_a_declared_policy_replaces_the_default(root: Path, builtin_app: Callable[[], BuiltinToolsets]) -> None:
    agent = model_reports({"command": ["touch", "made"]})
    policies = {"shell": ToolPolicy(default="allow")}
    async with Runtime(builtin_app(), entries=[agent], policies=policies) as runtime:
        assert json.loads((await runtime.run("operator", "go")).output)[0]["exit_code"] == 0
    assert (root / "made").exists()


async def test_the_settings_configure_the_builtin_provider(builtin_app: Callable[[], BuiltinToolsets]) -> None:
    app = builtin_app()
    slow, refused = await model_run(
        None, {"command": ["sh", "-c", "sleep 100"]}, {"command": ["printf", "x"]}, container=app
    )
    assert slow["stderr"].endswith("stopped after 1.5 s (its time limit) and all its processes were killed]")
    assert refused.startswith("run: program 'printf' is not allowed; allowed programs: sh, touch.")


def test_shell_settings_parse_lists_and_report_bad_values(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ToolsetSettings().shell_allow == []
    monkeypatch.setenv("LLM_DO_SHELL_ALLOW", '["git", "/opt/bin/lint"]')
    assert ToolsetSettings().shell_allow == ["git", "/opt/bin/lint"]
    monkeypatch.setenv("LLM_DO_SHELL_ALLOW", "rm -rf,ls")
    monkeypatch.setenv("LLM_DO_SHELL_TIMEOUT", "0")
    with pytest.raises(InvalidSettings) as raised:
        ToolsetSettings()
    assert list(raised.value.problems) == [
        "LLM_DO_SHELL_ALLOW='rm -rf,ls': expected program names or absolute paths, separated by commas "
        "(or a JSON list), like LLM_DO_SHELL_ALLOW=git,ls,rg",
        "LLM_DO_SHELL_TIMEOUT='0': expected a number of seconds > 0, like LLM_DO_SHELL_TIMEOUT=30",
    ]


def test_the_tool_offered_to_models() -> None:
    assert ShellToolset.tool_names() == {"run"}
    schema = ShellToolset._described()["run"].tool_def.parameters_json_schema
    assert schema["required"] == ["command"]
    assert "There is no shell:" in " ".join(schema["properties"]["command"]["description"].split())
    assert ShellToolset.default_policy == ToolPolicy(default="ask")


# -- a process killed from outside --------------------------------------------------------------

SH_WATCHED = (  # a shell and a grandchild that ignores SIGTERM; both pids go to `pids` (grandchild first)
    "(trap '' TERM; exec sleep 100) & echo $! >> pids; echo $$ >> pids; echo before; wait"
)


def group_members(group: int) -> list[int]:
    """Live (not zombie) processes whose process group is `group`, read from /proc."""
    members = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        state, _parent, pgrp = stat[stat.rindex(")") + 2 :].split()[:3]
        if int(pgrp) == group and state not in ("Z", "X"):
            members.append(int(proc.name))
    return members


@pytest.mark.parametrize(("signum", "name"), [(signal.SIGKILL, "SIGKILL"), (signal.SIGTERM, "SIGTERM")])
async def test_a_command_killed_from_outside_is_a_tool_error_and_leaves_no_process(
    root: Path, signum: int, name: str
) -> None:
    toolset = shell(root, ["sh", "pwd"], timeout=100, kill_grace=0.2)
    agent = model_reports({"command": ["sh", "-c", SH_WATCHED]}, {"command": ["pwd"]})
    async with Runtime(None, entries=[agent], toolsets={"shell": toolset}, config=APPROVE) as runtime:
        task = asyncio.create_task(runtime.run("operator", "go"))
        await until(lambda: lines(root / "pids") == 2, task)
        grandchild, leader = (int(line) for line in (root / "pids").read_text().split())
        assert os.getpgid(grandchild) == leader, "the command leads its own process group"
        os.kill(leader, signum)  # from outside: neither the toolset nor its time limit
        killed, after = json.loads((await task).output)
    assert isinstance(killed, str), killed
    assert killed.startswith("run: the command ['sh', '-c', "), killed
    assert f"was ended by signal {name} ({int(signum)})" in killed
    assert "stdout so far: 'before\\n'" in killed
    assert after == {"exit_code": 0, "stdout": f"{root}\n", "stderr": ""}, "the run went on"
    assert not running(grandchild)
    assert group_members(leader) == [], "nothing of the group runs once the tool has answered"
    await until(lambda: not group_exists(leader), None, limit=30)  # and once init reaps the zombies, it is gone


def group_exists(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_grandchild_killed_from_outside_changes_nothing(root: Path) -> None:
    """Only the program's own end counts: a killed background child is the program's business."""
    script = "sleep 100 & echo $! >> pids; while [ ! -e go ]; do sleep 0.01; done; echo done"
    toolset = shell(root, ["sh"], timeout=100, kill_grace=0.2)
    agent = model_reports({"command": ["sh", "-c", script]})
    async with Runtime(None, entries=[agent], toolsets={"shell": toolset}, config=APPROVE) as runtime:
        task = asyncio.create_task(runtime.run("operator", "go"))
        await until(lambda: lines(root / "pids") == 1, task)
        os.kill(int((root / "pids").read_text()), signal.SIGKILL)
        (root / "go").touch()
        (read,) = json.loads((await task).output)
    assert read == {"exit_code": 0, "stdout": "done\n", "stderr": ""}


# -- llm-do itself killed -----------------------------------------------------------------------

SHELL_FLOW = """
from llm_do import entry


@entry(toolsets=["shell"])
async def main(scope, text):
    return await scope.call_tool("run", {"command": ["sh", "-c", text]})
"""


@pytest.mark.long
def test_a_command_does_not_outlive_llm_do_killed_with_sigkill(tmp_path: Path) -> None:
    project = tmp_path / "desk"
    project.mkdir()
    (project / "flows.py").write_text(SHELL_FLOW)
    started = start_llm_do("run", project, SH_WATCHED, "--approve-all", env={"LLM_DO_SHELL_ALLOW": "sh"})
    pids = project / "pids"
    deadline = time.monotonic() + 120
    while lines(pids) < 2:
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)
    grandchild, leader = (int(line) for line in pids.read_text().split())
    os.kill(started.pid, signal.SIGKILL)
    assert started.wait(60).returncode == -signal.SIGKILL
    # The shell goes at once (its parent-death signal); the grandchild, which ignores SIGTERM, after the
    # toolset's kill_grace (2 s), from the guardian.
    deadline = time.monotonic() + 15
    while group_members(leader) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_members(leader) == []
    assert not running(grandchild)
