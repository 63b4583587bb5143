"""The `llm-do` command on a pseudo-terminal (approval prompts answered by typed keys) and Ctrl-C."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import subprocess
import termios
import time
from pathlib import Path

import pytest
from pydantic_ai.messages import ToolCallPart

from llm_do.models import Recording

from ..cli_projects import command, environment, notes_project, slow_project

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def _interruptible() -> None:
    """In the child: SIGINT's default disposition, as a shell gives a command it runs in the foreground.

    A test runner started in the background by a script (`pytest ... &`) ignores SIGINT, and a program
    inherits an ignored signal: Python then leaves it ignored, and Ctrl-C would never reach the command.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _controlling_terminal() -> None:
    """In the child: a session of its own with the pty as its terminal, so Ctrl-C sends SIGINT."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    _interruptible()


class Terminal:
    """The command running with a pseudo-terminal as stdin, stdout and stderr."""

    def __init__(self, *args: str | Path) -> None:
        self.master, slave = pty.openpty()
        env = {**environment(), "TERM": "xterm", "COLUMNS": "120", "LINES": "40"}
        self.process = subprocess.Popen(
            command(*args), stdin=slave, stdout=slave, stderr=slave, env=env, preexec_fn=_controlling_terminal
        )
        os.close(slave)
        self.seen = ""

    def expect(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            if time.monotonic() > deadline or not self._read(deadline - time.monotonic()):
                raise AssertionError(f"{text!r} never appeared; the terminal showed:\n{self.seen}")
        return self.seen

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def finish(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while self._read(max(0.0, deadline - time.monotonic())):
            pass
        try:
            return self.process.wait(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            os.close(self.master)

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], max(0.0, timeout))
        if not ready:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the other side closed
            return False
        if not data:
            return False
        self.seen += ANSI.sub("", data.decode(errors="replace"))
        return True


def test_the_approval_prompt_shows_the_call_and_approves_on_a_key(tmp_path: Path) -> None:
    project = notes_project(tmp_path / "notes")
    terminal = Terminal("run", project, "note it", "--model", f"replay:{project / 'script.json'}")
    shown = terminal.expect("approve? [a/s/d]")
    assert "approval needed" in shown
    assert "notes . write" in shown and "entry scribe, depth 0" in shown
    assert '"text": "remember the milk"' in shown
    terminal.type("a\n")
    terminal.expect("Noted.")
    assert terminal.finish() == 0, terminal.seen
    assert "scribe  depth 0  replay" in terminal.seen  # the final tree
    assert "total" in terminal.seen  # the usage table
    assert (project / "notes.txt").read_text() == "remember the milk"


def test_denying_with_a_note_tells_the_model(tmp_path: Path) -> None:
    project = notes_project(tmp_path / "notes")
    terminal = Terminal("run", project, "note it", "--model", f"replay:{project / 'script.json'}", "-v")
    terminal.expect("approve? [a/s/d]")
    terminal.type("x\n")
    terminal.expect("answer a, s or d")
    terminal.type("d\n")
    terminal.expect("note for the model")
    terminal.type("not today\n")
    assert terminal.finish() == 0, terminal.seen
    assert "not today" in terminal.seen.split("note for the model", 1)[1]  # -v echoes the denial as the result
    assert not (project / "notes.txt").exists()


def test_chat_carries_the_conversation_and_exits_on_ctrl_d(tmp_path: Path) -> None:
    project = tmp_path / "echo"
    project.mkdir()
    (project / "flows.py").write_text(
        "from llm_do import entry\n\n\n@entry\nasync def shout(scope, text):\n    return text.upper()\n"
    )
    terminal = Terminal("chat", project)
    terminal.expect("you>")
    terminal.type("first words\n")
    terminal.expect("FIRST WORDS")
    terminal.type("\x04")  # Ctrl-D at an empty prompt
    assert terminal.finish() == 0, terminal.seen


def test_chat_remembers_approve_for_session_across_its_turns(tmp_path: Path) -> None:
    project = notes_project(tmp_path / "notes")
    script = [ToolCallPart("write", {"text": "milk"}), "Noted.", ToolCallPart("write", {"text": "milk"}), "Again."]
    Recording.from_script(script).save(project / "script.json")
    terminal = Terminal("chat", project, "--model", f"replay:{project / 'script.json'}")
    terminal.expect("you>")
    terminal.type("note milk\n")
    terminal.expect("approve? [a/s/d]")
    terminal.type("s\n")
    terminal.expect("Noted.")
    terminal.type("note milk again\n")
    terminal.expect("Again.", timeout=20)  # the chat is one session: the identical call is not asked again
    terminal.type("\x04")
    assert terminal.finish() == 0, terminal.seen
    assert terminal.seen.count("approve? [a/s/d]") == 1


def wait_for_the_tool(process: subprocess.Popen[bytes], log: Path) -> None:
    """Until the slow project's tool is waiting (it wrote `waiting` to its log)."""
    deadline = time.monotonic() + 60
    while not (log.exists() and "waiting" in log.read_text()):
        assert process.poll() is None and time.monotonic() < deadline, "the tool never started"
        time.sleep(0.05)


def stderr_at_exit(process: subprocess.Popen[bytes], timeout: float = 60) -> bytes:
    """The command's stderr once it has exited; if it still runs after `timeout` s, it is killed (not left behind)."""
    try:
        return process.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise


@pytest.mark.parametrize("with_terminal", [False, True])
def test_ctrl_c_cancels_the_run_and_the_teardown_runs(tmp_path: Path, with_terminal: bool) -> None:
    project = slow_project(tmp_path / "slow")
    log = project / "log.txt"
    args = ("run", project, "go", "--approve-all")
    if with_terminal:
        terminal = Terminal(*args)
        process = terminal.process
    else:
        process = subprocess.Popen(
            command(*args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environment(),
            preexec_fn=_interruptible,
        )
    wait_for_the_tool(process, log)
    if with_terminal:
        terminal.type("\x03")  # Ctrl-C, as typed
        code = terminal.finish()
        assert "interrupted" in terminal.seen
    else:
        process.send_signal(signal.SIGINT)
        err = stderr_at_exit(process)
        code = process.returncode
        assert b"interrupted" in err
    assert code == 130
    assert log.read_text().splitlines() == ["waiting", "rollback", "cleanup"]


def test_a_signal_the_command_inherits_as_ignored_stays_ignored(tmp_path: Path) -> None:
    """`nohup llm-do run ...`: SIGHUP, ignored when the command started, does not end it; SIGTERM still does.

    The tool sends itself SIGHUP, then SIGTERM (`raise_signal` delivers each before it returns): a
    handled SIGHUP would come first and end the command with 129."""
    project = slow_project(tmp_path / "slow")
    flows = project / "flows.py"
    flows.write_text(
        flows.read_text()
        .replace("import asyncio\n", "import asyncio\nimport signal\n")
        .replace(
            'note("waiting")\n',
            'note("waiting")\n'
            "        signal.raise_signal(signal.SIGHUP)\n"
            "        signal.raise_signal(signal.SIGTERM)\n",
        )
    )

    def nohup() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    process = subprocess.Popen(
        command("run", project, "go", "--approve-all"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment(),
        preexec_fn=nohup,
    )
    err = stderr_at_exit(process)
    assert process.returncode == 128 + signal.SIGTERM, err
    assert b"interrupted by SIGTERM" in err
    assert (project / "log.txt").read_text().splitlines() == ["waiting", "rollback", "cleanup"]
