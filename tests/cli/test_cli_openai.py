"""The real client path through the command: pydantic-ai's own OpenAI model against a small
OpenAI-compatible server on 127.0.0.1, recorded with `--record`, then replayed offline."""

from __future__ import annotations

import json
from pathlib import Path

from ..cli_projects import llm_do
from ..models.test_replay import chat_server

COUNTER = '''from llm_do import ToolPolicy, Toolset, tool


class Counter(Toolset):
    default_policy = ToolPolicy()  # declared: its calls need no approval

    def __init__(self) -> None:
        self.value = 40

    @tool
    def add(self, amount: int) -> int:
        """Add to the counter and return the total."""
        self.value += amount
        return self.value
'''


def test_an_openai_compatible_server_is_recorded_through_the_command_and_replayed_offline(tmp_path: Path) -> None:
    project = tmp_path / "counting"
    project.mkdir()
    (project / "tools.py").write_text(COUNTER)
    (project / "clerk.worker").write_text("---\nname: clerk\ntoolsets: [counter]\n---\nCount as asked.\n")
    recording = tmp_path / "session.json"
    with chat_server() as (base_url, seen):
        env = {"LLM_DO_OPENAI_BASE_URL": base_url, "LLM_DO_OPENAI_API_KEY": "sk-local-test"}
        recorded = llm_do(
            "run", project, "Add 2.", "--model", "openai-chat:gpt-local", "--record", recording, "--json", env=env
        )
    assert recorded.returncode == 0, recorded.stderr
    assert [auth for auth, _ in seen] == ["Bearer sk-local-test"] * 2  # the real client went over HTTP
    first = json.loads(recorded.stdout)
    assert first["output"] == "The total is 42."
    assert first["usage"]["requests"] == 2
    assert (first["usage"]["input_tokens"], first["usage"]["output_tokens"]) == (25 + 31, 9 + 6)
    assert "sk-local-test" not in recording.read_text()

    replayed = llm_do("run", project, "Add 2.", "--model", f"replay:{recording}", "--json")  # the server is gone
    assert replayed.returncode == 0, replayed.stderr
    second = json.loads(replayed.stdout)
    assert (second["output"], second["usage"]) == (first["output"], first["usage"])
