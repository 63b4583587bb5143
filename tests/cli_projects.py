"""Small projects the `llm-do` command tests run (offline: `model: test`, replay scripts, @entry functions)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pydantic_ai.messages import ModelResponse, ModelResponsePart, TextPart, ToolCallPart
from pydantic_ai.usage import RequestUsage

from llm_do.models import Recording

from . import cli_warm

NOTES = '''
from pathlib import Path

from llm_do import ToolPolicy, Toolset, tool


class Notes(Toolset):
    default_policy = ToolPolicy(default="ask")

    @tool
    def write(self, text: str) -> str:
        """Write a note to notes.txt."""
        Path(__file__).with_name("notes.txt").write_text(text)
        return "written"
'''

SLOW = '''
import asyncio
from pathlib import Path

from llm_do import Handles, Toolset, entry, tool

LOG = Path(__file__).with_name("log.txt")


def note(line):
    with LOG.open("a") as log:
        log.write(line + "\\n")


class Txn:
    def rollback(self):
        note("rollback")


class Slow(Toolset):
    def __init__(self):
        self.txns = Handles("txn")

    @tool
    async def hold(self) -> str:
        """Open a transaction and wait."""
        handle = self.txns.open(Txn())
        note("waiting")
        await asyncio.sleep(600)
        return handle

    def cleanup(self):
        note("cleanup")


@entry(toolsets=["slow"])
async def main(scope, text):
    return await scope.call_tool("hold", {})
'''


def hello_project(root: Path) -> Path:
    """One worker on pydantic-ai's TestModel."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "hello.worker").write_text("---\nmodel: test\n---\nSay hi.\n")
    return root


def notes_project(root: Path) -> Path:
    """A worker whose tool asks for approval, and a replay script that calls it once."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools.py").write_text(NOTES)
    (root / "scribe.worker").write_text("---\ntoolsets: [notes]\n---\nWrite notes.\n")
    Recording.from_script([ToolCallPart("write", {"text": "remember the milk"}), "Noted."]).save(root / "script.json")
    return root


TEAM_SCRIPT = (
    # boss asks a and b at once; a asks c, so c starts after b but belongs under a.
    ("boss", [[ToolCallPart("a", {"input": "part a"}), ToolCallPart("b", {"input": "part b"})], "All done."], (10, 1)),
    ("a", [ToolCallPart("c", {"input": "part c"}), "A done."], (20, 2)),
    ("b", ["B done."], (30, 3)),
    ("c", ["C done."], (40, 4)),
)


def team_project(root: Path) -> Path:
    """Workers nesting two deep with parallel calls (boss -> a, b; a -> c) and a script giving each
    response of worker N its own token counts; `replay:script.json` answers them."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "boss.worker").write_text("---\ntoolsets: [a, b]\n---\nDelegate.\n")
    (root / "a.worker").write_text("---\ntoolsets: [c]\n---\nDelegate to c.\n")
    (root / "b.worker").write_text("Answer.\n")
    (root / "c.worker").write_text("Answer.\n")
    (root / "project.toml").write_text('entry = "boss"\n')
    script = Recording()
    for entry, steps, (tokens_in, tokens_out) in TEAM_SCRIPT:
        usage = RequestUsage(input_tokens=tokens_in, output_tokens=tokens_out)
        script.add_script([ModelResponse(parts=_parts(step), usage=usage) for step in steps], entry=entry)
    script.save(root / "script.json")
    return root


def _parts(step: object) -> list[ModelResponsePart]:
    if isinstance(step, str):
        return [TextPart(step)]
    if isinstance(step, list):
        return list(step)
    assert isinstance(step, ToolCallPart)
    return [step]


def slow_project(root: Path) -> Path:
    """An @entry function whose tool holds a handle and waits; cleanup and rollback go to log.txt."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "flows.py").write_text(SLOW)
    return root


def command(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "llm_do.cli", *map(str, args)]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_DO_")}
    env.pop("PYTEST_ADDOPTS", None)
    return env


def llm_do(
    *args: str | Path,
    stdin: str | None = None,
    cwd: Path | None = None,
    env: dict[str, str | None] | None = None,
    python: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """Run the command without a terminal (stdin is a pipe); `env` adds variables (None removes one);
    `python` adds interpreter options (like `-X importtime`) and so starts a fresh interpreter. Without
    them the command runs in a process forked from a warm interpreter (`tests/cli_warm.py`)."""
    variables = _variables(env)
    if not python:
        return cli_warm.run([str(arg) for arg in args], stdin or "", cwd, variables, timeout=120)
    return subprocess.run(
        [sys.executable, *python, *command(*args)[1:]],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=120,
        env=variables,
        cwd=cwd,
    )


def start_llm_do(
    *args: str | Path, stdin: str = "", cwd: Path | None = None, env: dict[str, str | None] | None = None
) -> cli_warm.Started:
    """Start the command as `llm_do` runs it, without waiting: its `pid` (to signal it), then `wait(timeout)`."""
    return cli_warm.start([str(arg) for arg in args], stdin, cwd, _variables(env))


def _variables(env: dict[str, str | None] | None) -> dict[str, str]:
    variables = environment()
    for name, value in (env or {}).items():
        if value is None:
            variables.pop(name, None)
        else:
            variables[name] = value
    return variables
