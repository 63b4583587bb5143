"""A real model's endpoint through the command, on the recorded HTTP server: where a dead endpoint was,
the model's name with and without `--record`, and what a recording keeps of the endpoint."""

from __future__ import annotations

import json
from pathlib import Path

from .cli_projects import llm_do
from .real_model.httplog import exchanges
from .real_model.projects import desk
from .real_model.server import recorded_server

QUESTION = "When is the meeting with the auditors? It is in notes.txt."
ANSWERED = [33, 34]  # read_text, then a text answer


def test_the_model_is_named_alike_with_and_without_record(tmp_path: Path) -> None:
    project = desk(tmp_path / "desk")
    names = []
    for record in ((), ("--record", str(tmp_path / "session.json"))):
        with recorded_server(exchanges(), ANSWERED) as (url, server):
            question = "What is on the todo list? It is in todo.md."
            ran = llm_do(
                "run", project, question, "--entry", "files", "-m", "openai-chat:qwen", "-v", "--json", *record,
                env={"LLM_DO_OPENAI_BASE_URL": url},
            )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert server.served == ANSWERED
        names.append(json.loads(ran.stdout)["calls"][0]["model"])
    assert names == ["openai-chat:qwen", "openai-chat:qwen"]
