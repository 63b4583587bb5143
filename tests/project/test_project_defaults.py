"""Project-level defaults in `project.toml` (and the earlier `project.json`): model settings laid under each
worker's own, and the files handed to a run of the default entry that is given none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from llm_do import Attachment, AttachmentError
from llm_do.project import load_project
from llm_do.project.migrate import plan_migration

from ..cli_projects import llm_do
from .project_files import problems, write


class Seen:
    """A model that answers with what it was sent: the settings of each request and the files attached."""

    def __init__(self) -> None:
        self.settings: list[dict[str, Any]] = []
        self.files: list[list[str]] = []
        self.model = FunctionModel(self.respond)

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.settings.append(dict(info.model_settings or {}))
        first = messages[-1]
        assert isinstance(first, ModelRequest)
        prompt = next(part.content for part in first.parts if isinstance(part, UserPromptPart))
        texts = [] if isinstance(prompt, str) else [str(item) for item in prompt[1:]]
        self.files.append(texts)
        return ModelResponse(parts=[TextPart(f"{len(texts)} files")])


async def test_project_model_settings_hold_for_every_worker_and_a_workers_own_win_key_by_key(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "project.toml": """
                [model_settings]
                temperature = 0.1
                max_tokens = 300
            """,
            "plain.worker": "Answer.\n",
            "tuned.worker": "---\nmodel_settings: {temperature: 0.9, seed: 7}\n---\nAnswer.\n",
            "limited.worker": "---\nlimits: {max_tokens: 50}\n---\nAnswer.\n",
        },
    )
    seen = Seen()
    async with load_project(tmp_path, model=seen.model) as project:
        await project.run("plain", "hi")
        await project.run("tuned", "hi")
        await project.run("limited", "hi")
    plain, tuned, limited = seen.settings
    assert (plain["temperature"], plain["max_tokens"]) == (0.1, 300) and "seed" not in plain
    assert (tuned["temperature"], tuned["max_tokens"], tuned["seed"]) == (0.9, 300, 7)
    assert (limited["temperature"], limited["max_tokens"]) == (0.1, 50)  # the worker's own limit wins


def test_wrong_model_settings_are_problems_with_their_lines(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "project.toml": """
                entry = "plain"

                [model_settings]
                temprature = 0.1
                max_tokens = "many"
            """,
            "plain.worker": "Answer.\n",
        },
    )
    found = problems(tmp_path, model="test")
    assert [(name, line) for name, line, _ in found] == [("project.toml", 4), ("project.toml", 5)]
    assert "unknown model setting 'temprature' (did you mean 'temperature'?)" in found[0][2]
    assert found[1][2].startswith("model_settings.max_tokens:") and "'many'" in found[1][2]


def test_a_tool_choice_that_would_never_let_the_agent_answer_is_a_problem_naming_what_works(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "project.toml": 'entry = "plain"\n[model_settings]\ntool_choice = "required"\n',
            "plain.worker": "---\nmodel_settings:\n  tool_choice: [read_text]\n---\nAnswer.\n",
        },
    )
    found = sorted(problems(tmp_path, model="test"), key=lambda problem: problem[0], reverse=True)
    assert [(name, line) for name, line, _ in found] == [("project.toml", 3), ("plain.worker", 3)]
    assert found[0][2].startswith("model_settings.tool_choice: 'required' forces a tool call in every reply")
    assert found[1][2].startswith("model_settings.tool_choice: ['read_text'] names no output tool")
    assert "give it an `output` model and add 'final_result' to the list" in found[1][2]
    assert all("say so in the instructions, or set text_tool_calls: true" in message for _, _, message in found)


async def test_a_tool_choice_list_naming_the_output_tool_reaches_the_model(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "project.toml": 'entry = "answer"\n[model_settings]\ntool_choice = ["final_result"]\n',
            "schemas.py": "from pydantic import BaseModel\n\n\nclass Answer(BaseModel):\n    text: str\n",
            "answer.worker": "---\noutput: schemas.py:Answer\n---\nAnswer.\n",
            "plain.worker": "Answer in text.\n",
        },
    )
    found = problems(
        tmp_path, model="test"
    )  # the project's list holds for every worker: one answering in text cannot answer
    assert [(name, line) for name, line, _ in found] == [("plain.worker", 1)]
    assert found[0][2].startswith("model_settings.tool_choice (from project.toml): ['final_result'] names no")
    (tmp_path / "plain.worker").unlink()
    seen: list[Any] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append((info.model_settings or {}).get("tool_choice"))
        return ModelResponse(parts=[ToolCallPart("final_result", {"text": "done"})])

    async with load_project(tmp_path, model=FunctionModel(respond)) as project:
        result = await project.run("answer", "hi")
    assert seen == [["final_result"]]
    assert result.output.text == "done"


def test_model_settings_must_be_a_table(tmp_path: Path) -> None:
    write(tmp_path, {"project.toml": 'entry = "plain"\nmodel_settings = 0.2\n', "plain.worker": "Answer.\n"})
    assert problems(tmp_path, model="test") == [("project.toml", 2, "model_settings must be a table, got 0.2")]


async def test_default_attachments_go_to_the_default_entry_given_none(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "project.toml": 'entry = "reader"\ninput = "Read."\nattachments = ["docs/brief.txt", "notes.txt"]\n',
            "reader.worker": "Read the files.\n",
            "other.worker": "Answer.\n",
            "docs/brief.txt": "the brief\n",
            "notes.txt": "a note\n",
            "extra.txt": "extra\n",
        },
    )
    seen = Seen()
    async with load_project(tmp_path, model=seen.model) as project:
        assert project.default_attachments == ("docs/brief.txt", "notes.txt")
        defaulted = await project.run()  # the default entry, its default input and files
        asked = await project.run(None, "Something else.")  # another input: the files still go
        given = await project.run(attachments=[Attachment.read(tmp_path, "extra.txt")])  # given files win
        other = await project.run("other", "hi")  # another entry gets none
    assert [defaulted.output, asked.output, given.output, other.output] == ["2 files", "2 files", "1 files", "0 files"]
    assert "docs/brief.txt" in seen.files[0][0] and "notes.txt" in seen.files[0][1]
    assert "extra.txt" in seen.files[2][0]


def test_default_attachments_that_are_not_files_of_the_project_are_problems(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "project.toml": 'entry = "reader"\n\nattachments = ["missing.txt", "../outside.txt", "ok.txt", "ok.txt"]\n',
            "reader.worker": "Read the files.\n",
            "ok.txt": "fine\n",
        },
    )
    (tmp_path.parent / "outside.txt").write_text("outside\n")
    found = problems(tmp_path, model="test")
    assert {line for _, line, _ in found} == {3}
    messages = [message for _, _, message in found]
    assert "attachments: 'missing.txt' is not a file under" in messages[0]
    assert "attachments: '../outside.txt' is outside the project" in messages[1]
    assert "attachments: 'ok.txt' is named twice" in messages[2]
    write(tmp_path, {"project.toml": 'entry = "reader"\nattachments = "ok.txt"\n'})
    assert problems(tmp_path, model="test") == [
        ("project.toml", 2, "attachments must be a list of file paths, got 'ok.txt'")
    ]


async def test_a_default_attachment_over_the_limits_fails_the_run_not_the_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLM_DO_ATTACHMENTS__MAX_FILE_BYTES", "4")
    write(
        tmp_path,
        {
            "project.toml": 'input = "Read."\nattachments = ["big.txt"]\n',
            "reader.worker": "Read.\n",
            "big.txt": "x" * 64,
        },
    )
    async with load_project(tmp_path, model=Seen().model) as project:
        with pytest.raises(AttachmentError, match=r"big\.txt"):
            await project.run()


async def test_earlier_project_json_entry_attachments_are_the_default_attachments(tmp_path: Path) -> None:
    manifest = {
        "version": 1,
        "runtime": {"approval_mode": "approve_all"},
        "entry": {"agent": "reader", "args": {"input": "Read it.", "attachments": ["deck.txt"]}},
        "agent_files": ["reader.agent"],
    }
    write(
        tmp_path,
        {"project.json": json.dumps(manifest, indent=2), "reader.agent": "Read the deck.\n", "deck.txt": "slides\n"},
    )
    seen = Seen()
    async with load_project(tmp_path, model=seen.model) as project:
        assert project.default_attachments == ("deck.txt",)
        result = await project.run()
    assert result.output == "1 files" and "deck.txt" in seen.files[0][0]
    migration = plan_migration(tmp_path)
    assert 'attachments = ["deck.txt"]\n' in migration.diff()
    assert not [problem for problem in migration.untranslated if "attachments" in problem.message]


def test_earlier_project_json_attachments_that_are_no_files_are_problems_with_their_line(tmp_path: Path) -> None:
    text = (
        '{\n  "version": 1,\n  "entry": {\n    "agent": "reader",\n'
        '    "args": {"input": "x", "attachments": ["gone.pdf"]}\n  },\n  "agent_files": ["reader.agent"]\n}\n'
    )
    write(tmp_path, {"project.json": text, "reader.agent": "Read.\n"})
    [(name, line, message)] = problems(tmp_path, model="test")
    assert (name, line) == ("project.json", 5)
    assert "entry.args.attachments: 'gone.pdf' is not a file under" in message


def test_the_command_line_hands_the_default_attachments_and_attach_replaces_them(tmp_path: Path) -> None:
    root = write(
        tmp_path / "desk",
        {
            "project.toml": 'input = "Read."\nattachments = ["brief.txt"]\n',
            "reader.worker": "---\nmodel: test\n---\nRead.\n",
            "brief.txt": "the brief\n",
            "other.txt": "other\n",
        },
    )
    defaulted = llm_do("run", root, "--json")
    replaced = llm_do("run", root, "--json", "--attach", root / "other.txt")
    assert defaulted.returncode == 0 and replaced.returncode == 0, (defaulted.stderr, replaced.stderr)
    [call] = json.loads(defaulted.stdout)["calls"]
    assert [info["name"] for info in call["attachments"]] == ["brief.txt"]
    [call] = json.loads(replaced.stdout)["calls"]
    assert [info["name"] for info in call["attachments"]] == ["other.txt"]


def test_check_says_what_the_project_file_gives_every_run(tmp_path: Path) -> None:
    root = write(
        tmp_path / "desk",
        {
            "project.toml": 'attachments = ["brief.txt"]\n\n[model_settings]\ntemperature = 0.2\n',
            "reader.worker": "---\nmodel: test\n---\nRead.\n",
            "brief.txt": "the brief\n",
        },
    )
    done = llm_do("check", root)
    assert done.returncode == 0, done.stderr
    assert "note: project.toml gives every worker the model settings temperature=0.2 (its own win)" in done.stderr
    assert "note: project.toml hands brief.txt to each run of reader given no files" in done.stderr
    document = json.loads(llm_do("check", root, "--json").stdout)
    assert (document["model_settings"], document["attachments"]) == ({"temperature": 0.2}, ["brief.txt"])
    (root / "project.toml").write_text("")
    assert "model_settings" not in json.loads(llm_do("check", root, "--json").stdout)


def test_check_reports_a_default_input_that_the_default_entry_would_refuse(tmp_path: Path) -> None:
    """What `llm-do run` would refuse with exit code 2 before it runs, check reports on the input's line."""
    root = write(
        tmp_path / "desk",
        {
            "project.toml": 'entry = "asker"\ninput = {name = "Ada"}\n',
            "schemas.py": "from pydantic import BaseModel\n\n\nclass Ask(BaseModel):\n    name: str\n    count: int\n",
            "asker.worker": "---\nmodel: test\ninput: schemas:Ask\n---\nAsk.\n",
            "greeter.worker": "---\nmodel: test\n---\nGreet.\n",
        },
    )
    run = llm_do("run", root)
    assert run.returncode == 2
    assert "the input in project.toml does not match Ask, the input of entry 'asker': count: Field required" in (
        run.stderr
    )
    done = llm_do("check", root)
    assert done.returncode == 1, done.stdout
    assert done.stderr.splitlines() == [
        f"{root / 'project.toml'}:2: the input in project.toml does not match Ask, the input of entry 'asker': "
        "count: Field required (its fields: count, name)",
        "llm-do: 1 problem found",
    ]
    (root / "project.toml").write_text('entry = "greeter"\n\n[input]\nname = "Ada"\n')
    document = json.loads(llm_do("check", root, "--json").stdout)
    assert document["ok"] is False
    assert document["problems"] == [
        {
            "file": str(root / "project.toml"),
            "line": 3,
            "message": "entry 'greeter' takes a text prompt, but the input in project.toml is dict; give a PROMPT, "
            "or give the worker an input model (input: module:Class)",
        }
    ]
    (root / "project.toml").write_text('entry = "asker"\ninput = {name = "Ada", count = 2}\n')
    assert llm_do("check", root).returncode == 0
    assert llm_do("run", root).returncode == 0
