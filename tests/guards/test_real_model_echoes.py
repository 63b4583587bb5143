"""Answers of a small model that makes real tool calls, replayed from its recorded traffic
(`tests/real_model/tool-calls.jsonl`), that are not answers: llm-do's own denial or retry message given back, and
prose telling the person how to make the call the model never made. Each is flagged (or, with
`suspect_output=retry`, sent back), as an echoed prompt is."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai import models

from llm_do.project import load_project

from ..real_model.projects import desk, run
from ..real_model.server import recorded_server
from ..real_model.toolcalls import replies_in, tool_exchanges

TODO = "What is on the todo list? It is in todo.md."


def test_the_denial_given_back_as_the_answer_is_flagged(tmp_path: Path) -> None:
    # Exchange 97: under --reject-all, the model answered with llm-do's denial, word for word.
    document, stderr, code, server = run(
        desk(tmp_path / "desk"), "writer", "Write bye.txt saying goodbye.", [96, 97], recorded=tool_exchanges(),
        flags=("--reject-all",),
    )  # fmt: skip
    assert code == 0, stderr
    assert server.served == [96, 97]
    assert document["output"].endswith("approval_mode is 'reject_all'. Do not retry the same call.")
    assert document["calls"][0]["warnings"] == [
        "the reply gives back what llm-do told the model (\"The call to 'write_text' was not run: it needs approval "
        "(toolset 'filesystem' policy: tool 'write_text' is 'ask') and approval_mode is 'reject_all'\") instead of an "
        "answer"
    ]


def test_the_retry_message_given_back_is_sent_back_again_under_suspect_output_retry(tmp_path: Path) -> None:
    # Exchange 137: told its JSON call was not used, the model gave llm-do's message back inside a JSON "call".
    document, stderr, code, server = run(
        desk(tmp_path / "desk"), "files", TODO, [137], borrowed=replies_in(137), recorded=tool_exchanges(), flags=(),
        LLM_DO_SUSPECT_OUTPUT="retry",
    )  # fmt: skip
    assert server.served == [137000, 137]
    assert code == 1, stderr
    assert document["error"].startswith(
        "RepliesRefused: entry 'files': the model's replies kept looking like unexecuted tool calls or echoed prompts"
    )
    assert document["calls"][0]["warnings"][-1] == (
        'reply 2: the reply gives back what llm-do told the model ("Your reply was not used: it is a call to tool '
        "'read_text' written as text (JSON): the tool was not run\") instead of an answer; the model was asked again "
        "(suspect_output=retry)"
    )


PROSE = [46, 116, 118, 120, 121, 124]
"""The server's own function-calling mode: each time, the model told the person which call to make."""


async def test_prose_telling_the_person_to_make_the_call_is_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", True)
    warnings, outputs = [], []
    with recorded_server(tool_exchanges(), PROSE) as (url, server):
        monkeypatch.setenv("LLM_DO_OPENAI_BASE_URL", url)
        async with load_project(desk(tmp_path / "desk"), model="openai-chat:qwen") as project:
            for _ in PROSE:
                result = await project.run("files", TODO)
                outputs.append(result.output)
                warnings.extend(result.calls[0].warnings)
    assert server.served == PROSE
    assert outputs[4] == 'To read the contents of todo.md, you can call `read_text("todo.md")`.'
    assert warnings == ["the reply tells how to call tool 'read_text' instead of calling it: the tool was not run"] * 6
