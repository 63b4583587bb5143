"""The `llm-do` command on a pseudo-terminal, as a demanding user types at it: questions interrupted, hostile text."""

from __future__ import annotations

from pathlib import Path

from .cli_projects import NOTES
from .test_cli_tty import Terminal

ASKING = """
from llm_do import entry


@entry(toolsets=["notes"])
async def main(scope, text):
    return await scope.call_tool("write", {"text": text})
"""


def asking_project(root: Path) -> Path:
    """An @entry function that writes its input as a note: each turn asks for approval once."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools.py").write_text(NOTES)
    (root / "flows.py").write_text(ASKING)
    return root


def test_ctrl_c_at_a_question_in_chat_leaves_the_next_line_to_the_chat(tmp_path: Path) -> None:
    project = asking_project(tmp_path / "asking")
    terminal = Terminal("chat", project)
    terminal.expect("you>")
    terminal.type("first\n")
    terminal.expect("approve? [a/s/d]")
    terminal.type("\x03")  # Ctrl-C while the question waits: the turn is cancelled
    terminal.expect("turn cancelled")
    terminal.type("second\n")  # the next line is the next turn, not a late answer to the cancelled question
    terminal.expect('"text": "second"', timeout=20)
    terminal.type("a\n")
    terminal.expect("written")
    terminal.type("\x04")
    assert terminal.finish() == 0, terminal.seen
    assert (project / "notes.txt").read_text() == "second"
