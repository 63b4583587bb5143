"""`make real-model` (benchmarks/real_model.py) against the recorded HTTP server: the checks it runs, what it says
worked and what did not, and its figures; without a server or a model file it says what to give."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ..real_model.httplog import exchanges
from ..real_model.server import recorded_server

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "real_model.py"


def test_the_script_reports_what_worked_on_a_replayed_session() -> None:
    answers = [31, 32, 22, 23, 24, 25, 26, 27, 28]  # the todo list read and told; the invoice echoed back
    with recorded_server(exchanges(), answers) as (url, server):
        ran = subprocess.run(
            [sys.executable, SCRIPT, "--url", url, "--model", "qwen"], capture_output=True, text=True, timeout=120
        )
    assert ran.returncode == 0, ran.stderr
    assert sorted(server.served) == sorted(answers)
    lines = ran.stdout.splitlines()
    assert lines[0] == f"model 'qwen' at {url}"
    tool, nested = lines[3].split(), lines[4].split()
    assert tool[:11] == ["a", "tool", "call,", "then", "an", "answer", "ok", "2", "1", "1182", "100"]
    assert nested[:10] == ["an", "agent", "called", "as", "a", "tool", "FAILED", "7", "4", "3958"]
    assert float(tool[-2]) > 0 and float(tool[-1]) > 0  # seconds to the first streamed text, output tokens/s
    assert lines[-3].startswith("a tool call, then an answer: ok: Here is the text from the `todo.md` file")
    assert lines[-2] == (
        "an agent called as a tool: FAILED: asker: the reply gives back the retry prompt 'Please return text or call "
        "a tool.' instead of an answer; reader: the reply gives back the retry prompt 'Please return text or call a "
        "tool.' instead of an answer"
    )
    assert lines[-1] == "1 of 2 checks worked"


def test_without_a_server_or_a_model_file_it_says_what_to_give() -> None:
    ran = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True, timeout=60, env={"PATH": ""})
    assert ran.returncode == 2
    assert "give an OpenAI-compatible server and a model on it (make real-model URL=" in ran.stderr
    assert "No model is downloaded" in ran.stderr
