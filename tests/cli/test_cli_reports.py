"""What the command reports: per-call usage in the tree, the table and the JSON (failed runs included),
failures as JSON documents, input errors, piped output, third-party banners, check and list."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ..cli_projects import TEAM_SCRIPT, hello_project, llm_do, notes_project, team_project

SCHEMA = """
from pydantic import BaseModel
from llm_do import entry


class Order(BaseModel):
    item: str
    quantity: int


@entry(schema_in=Order)
async def place(scope, order):
    return f"{order.quantity} x {order.item}"
"""

TOKENS = {entry: usage for entry, _, usage in TEAM_SCRIPT}


def flatten(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [node for call in calls for node in (call, *flatten(call["calls"]))]


def table_rows(stderr: str) -> list[list[str]]:
    """The body rows of the usage table (the header is drawn with other lines)."""
    lines = stderr.split("usage\n", 1)[1].splitlines()
    return [[cell.strip() for cell in line.strip("│").split("│")] for line in lines if line.startswith("│")]


def test_each_calls_usage_and_tool_calls_in_the_json_tree(tmp_path: Path) -> None:
    project = team_project(tmp_path / "team")
    done = llm_do("run", project, "go", "-m", "replay:script.json", "--json", cwd=project)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    calls = flatten(document["calls"])
    assert [call["entry"] for call in calls] == ["boss", "a", "c", "b"]  # depth-first, c under a
    usage = {call["entry"]: call["usage"] for call in calls}
    requests = {"boss": 2, "a": 2, "b": 1, "c": 1}
    tool_calls = {"boss": 2, "a": 1, "b": 0, "c": 0}
    for entry, (tokens_in, tokens_out) in TOKENS.items():
        n = requests[entry]
        expected = {"requests": n, "tool_calls": tool_calls[entry], "input_tokens": n * tokens_in}
        expected["output_tokens"] = n * tokens_out
        assert usage[entry] == expected, entry
    for key in ("requests", "tool_calls", "input_tokens", "output_tokens"):
        assert document["usage"][key] == sum(call[key] for call in usage.values()), key


def test_the_table_lists_calls_as_the_tree_does(tmp_path: Path) -> None:
    project = team_project(tmp_path / "team")
    done = llm_do("run", project, "go", "-m", "replay:script.json", cwd=project)
    assert done.returncode == 0, done.stderr
    rows = table_rows(done.stderr)
    assert "┃ call  ┃ requests ┃ tool calls ┃ input tokens ┃ output tokens ┃" in done.stderr
    assert rows == [
        ["boss", "2", "2", "20", "2"],
        ["a", "2", "1", "40", "4"],
        ["c", "1", "0", "40", "4"],
        ["b", "1", "0", "30", "3"],
        ["total", "6", "3", "130", "13"],
    ]
    assert "boss  depth 0" in done.stderr and "20 in / 2 out, 2 tool calls" in done.stderr


def test_a_failed_run_shows_the_requests_its_calls_made_and_the_usage_table(tmp_path: Path) -> None:
    project = team_project(tmp_path / "team")
    done = llm_do("run", project, "go", "-m", "replay:script.json", "--max-depth", "1", cwd=project)
    assert done.returncode == 1
    assert re.search(r"boss  depth 0  \S+  error  10 in / 1 out", done.stderr), done.stderr
    assert re.search(r"a  depth 1  \S+  error  20 in / 2 out", done.stderr)
    assert "no model requests" not in done.stderr
    rows = table_rows(done.stderr)
    assert rows == [
        ["boss", "1", "1", "10", "1"],  # its call to b returned before a's failure ended the run: it ran
        ["a", "1", "0", "20", "2"],
        ["b", "1", "0", "30", "3"],
        ["total", "3", "1", "60", "6"],  # pydantic-ai's count agrees
    ]
    assert "llm-do: error: MaxDepthExceeded: call depth 2 exceeds max_depth=1: boss -> a -> c" in done.stderr


def test_a_failed_run_with_json_writes_a_document_with_the_calls_so_far(tmp_path: Path) -> None:
    project = team_project(tmp_path / "team")
    done = llm_do("run", project, "go", "-m", "replay:script.json", "--max-depth", "1", "--json", cwd=project)
    assert done.returncode == 1
    document = json.loads(done.stdout)
    assert (document["output"], document["kind"], document["exit_code"]) == (None, "error", 1)
    assert document["error"].startswith("MaxDepthExceeded: call depth 2 exceeds max_depth=1")
    calls = {call["entry"]: call for call in flatten(document["calls"])}
    assert {entry: call["outcome"] for entry, call in calls.items()} == {"boss": "error", "a": "error", "b": "ok"}
    assert calls["a"]["usage"] == {"requests": 1, "tool_calls": 0, "input_tokens": 20, "output_tokens": 2}
    assert document["usage"]["requests"] == 3


def test_list_json_of_a_project_that_does_not_load_is_checks_failure_document(tmp_path: Path) -> None:
    project = tmp_path / "broken"
    project.mkdir()
    (project / "a.worker").write_text("---\nmodel: test\ntoolsets: [nope]\n---\nHi.\n")
    listed, checked = llm_do("list", project, "--json"), llm_do("check", project, "--json")
    assert listed.returncode == checked.returncode == 1
    assert json.loads(listed.stdout) == json.loads(checked.stdout)
    assert sorted(json.loads(listed.stdout)) == ["error", "exit_code", "kind", "ok", "problems"]


def test_json_usage_and_project_failures_are_documents_too(tmp_path: Path) -> None:
    hello = hello_project(tmp_path / "hello")
    both = llm_do("run", hello, "hi", "--input-json", "{}", "--json")
    assert both.returncode == 2
    assert json.loads(both.stdout) == {
        "output": None,
        "error": "give the input once: a PROMPT or --input-json, not both",
        "kind": "usage",
        "exit_code": 2,
        "problems": [],
        "usage": {"requests": 0, "tool_calls": 0, "input_tokens": 0, "output_tokens": 0},
        "calls": [],
    }
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "a.worker").write_text("---\nmodel: test\ntoolsets: [nope]\n---\nHi.\n")
    failed = llm_do("run", broken, "hi", "--json")
    assert failed.returncode == 1
    document = json.loads(failed.stdout)
    assert (document["kind"], document["exit_code"], document["error"]) == ("project", 1, "llm-do: 1 problem found")
    [problem] = document["problems"]
    assert (problem["file"], problem["line"]) == (str(broken / "a.worker"), 3)
    assert problem["message"].startswith("unknown toolset 'nope'")


def test_input_that_does_not_match_the_input_model_is_a_usage_error_naming_the_fields(tmp_path: Path) -> None:
    project = tmp_path / "shop"
    project.mkdir()
    (project / "flows.py").write_text(SCHEMA)
    ok = llm_do("run", project, "--input-json", '{"item": "tea", "quantity": 2}')
    assert (ok.returncode, ok.stdout) == (0, "2 x tea\n"), ok.stderr
    bad = llm_do("run", project, "--input-json", '{"item": "tea", "quantity": "many"}')
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1, bad.stderr  # one short line, no pydantic dump
    assert "--input-json does not match Order, the input of entry 'place'" in bad.stderr
    assert "quantity: Input should be a valid integer" in bad.stderr
    missing = llm_do("run", project, "--input-json", '{"quantity": 1}', "--json")
    assert missing.returncode == 2
    document = json.loads(missing.stdout)
    assert (document["kind"], document["exit_code"]) == ("input", 2)
    assert "item: Field required" in document["error"]


def test_a_prompt_that_is_not_json_for_an_input_model_says_to_give_its_fields_as_json(tmp_path: Path) -> None:
    project = tmp_path / "shop"
    project.mkdir()
    (project / "flows.py").write_text(SCHEMA)
    done = llm_do("run", project, "two teas please")
    assert done.returncode == 2
    assert done.stderr == (
        "llm-do: error: the input is not JSON, and entry 'place' takes Order, JSON of its fields (item, quantity): "
        "give them as JSON (--input-json '{\"item\": ...}')\n"
    )


def test_a_chat_line_that_does_not_fit_the_input_model_fails_its_turn_in_one_line(tmp_path: Path) -> None:
    project = tmp_path / "shop"
    project.mkdir()
    (project / "flows.py").write_text(SCHEMA)
    lines = 'two teas\n{"item": "tea"}\n{"item": "tea", "quantity": 2}\n'
    done = llm_do("chat", project, stdin=lines)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "2 x tea\n"
    failed = [line.split("you> ")[-1] for line in done.stderr.splitlines() if "the turn failed" in line]
    assert failed == [
        "the turn failed: your line is not JSON, and entry 'place' takes Order, JSON of its fields (item, quantity): "
        'type them as JSON ({"item": ...})',
        "the turn failed: your line does not match Order, the input of entry 'place': quantity: Field required "
        "(its fields: item, quantity)",
    ]
    assert "errors.pydantic.dev" not in done.stderr


def test_a_text_prompt_for_a_worker_is_checked_too(tmp_path: Path) -> None:
    done = llm_do("run", hello_project(tmp_path / "hello"), "--input-json", '{"a": 1}')
    assert done.returncode == 2
    assert "entry 'hello' takes a text prompt, but --input-json is dict" in done.stderr


def test_piped_output_is_never_cut(tmp_path: Path) -> None:
    project = notes_project(tmp_path / "a-project-directory-with-a-long-name" / "notes")
    done = llm_do("run", project, "note it", "-m", "replay:script.json", "--approve-all", cwd=project)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stderr.splitlines() if "scribe  depth 0" in line)
    assert len(line) > 80
    assert line == f"└── scribe  depth 0  replay:{project / 'script.json'}  ok  0 in / 0 out, 1 tool call", line
    assert "…" not in done.stderr


def test_pydantic_ais_banner_is_not_printed(tmp_path: Path) -> None:
    # AI_AGENT=1 makes pydantic-ai print its first-run banner even to a pipe; pytest and CI hide it.
    env: dict[str, str | None] = {"AI_AGENT": "1", "PYTEST_VERSION": None, "CI": None, "PYDANTIC_AI_NO_BANNER": None}
    done = llm_do("run", hello_project(tmp_path / "hello"), "hi", env=env)
    assert done.returncode == 0, done.stderr
    assert "observability" not in done.stderr and "pydantic-ai v" not in done.stderr
    assert done.stderr.startswith("calls\n")


@pytest.mark.long
def test_a_missing_api_key_names_the_variable(tmp_path: Path) -> None:
    unset: dict[str, str | None] = {"OPENAI_API_KEY": None}
    done = llm_do("run", hello_project(tmp_path / "hello"), "hi", "-m", "openai:gpt-5.2", env=unset)
    assert done.returncode == 0, done.stderr  # the worker names its own model: --model is not used
    (tmp_path / "hello" / "hello.worker").write_text("Say hi.\n")
    done = llm_do("run", tmp_path / "hello", "hi", "-m", "openai:gpt-5.2", env=unset)
    assert done.returncode == 2
    assert "model 'openai:gpt-5.2' needs an API key: set the environment variable OPENAI_API_KEY" in done.stderr
    assert "OpenAIProvider(api_key" not in done.stderr and "Traceback" not in done.stderr
    as_json = llm_do("run", tmp_path / "hello", "hi", "-m", "openai:gpt-5.2", "--json", env=unset)
    assert (as_json.returncode, json.loads(as_json.stdout)["kind"]) == (2, "api_key")


@pytest.mark.long
def test_check_and_list_accept_workers_without_a_model(tmp_path: Path) -> None:
    project = notes_project(tmp_path / "notes")
    check = llm_do("check", project)
    assert (check.returncode, check.stdout) == (0, "ok: 1 entries (scribe); default entry: scribe\n"), check.stderr
    assert "note: no model for scribe" in check.stderr
    listed = llm_do("list", project, "--json")
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)["entries"]
    assert row == {
        "entry": "scribe",
        "kind": "worker",
        "model": None,
        "toolsets": ["notes"],
        "approvals": {"notes": "default ask"},
        "description": None,
    }
    checked = json.loads(llm_do("check", project, "--json").stdout)
    assert checked == {"ok": True, "default_entry": "scribe", "entries": ["scribe"], "without_model": ["scribe"]}


@pytest.mark.long
def test_check_refuses_model_names_that_run_would_refuse(tmp_path: Path) -> None:
    project = notes_project(tmp_path / "notes")
    nonsense = llm_do("check", project, "-m", "nonsense")
    assert nonsense.returncode == 2
    assert "--model nonsense: 'nonsense' is not a model name" in nonsense.stderr
    provider = llm_do("check", project, "--model", "opena:gpt-5.2")
    assert provider.returncode == 2 and "unknown model provider 'opena' (did you mean 'openai'?)" in provider.stderr
    assert llm_do("check", project, "-m", "openai:gpt-5.2").returncode == 0
    missing = llm_do("check", project, "-m", "replay:nowhere.json", cwd=tmp_path)
    assert missing.returncode == 2 and f"{tmp_path / 'nowhere.json'} does not exist" in missing.stderr
    (project / "other.worker").write_text("---\nmodel: anthropic:claude-sonnet-4-5\n---\nHi.\n")
    (project / "odd.worker").write_text("---\nmodel: nonsense:x\n---\nHi.\n")
    workers = llm_do("check", project, "--json")
    assert workers.returncode == 1
    document = json.loads(workers.stdout)
    assert (document["ok"], document["kind"]) == (False, "project")
    messages = {Path(p["file"]).name: (p["line"], p["message"]) for p in document["problems"]}
    assert messages["odd.worker"][0] == 2 and "unknown model provider 'nonsense'" in messages["odd.worker"][1]
    # the anthropic package is not installed here: something to install, kept apart from the files' problems
    assert "other.worker" not in messages
    [install] = document["to_install"]
    assert (install["requirement"], install["command"]) == (
        "pydantic-ai-slim[anthropic]",
        'pip install "pydantic-ai-slim[anthropic]"',
    )
    assert install["models"] == [
        {"model": "anthropic:claude-sonnet-4-5", "file": str(project / "other.worker"), "line": 2}
    ]
    (project / "odd.worker").unlink()
    alone = llm_do("check", project)
    assert alone.returncode == 0, alone.stderr  # a missing provider package is not a broken project
    assert (
        "install: pip install \"pydantic-ai-slim[anthropic]\" for the model 'anthropic:claude-sonnet-4-5' "
        "(other.worker:2)" in alone.stderr
    )


def test_a_malformed_script_step_is_named_with_its_field(tmp_path: Path) -> None:
    project = hello_project(tmp_path / "hello")
    (project / "hello.worker").write_text("Say hi.\n")
    step = {"response": {"parts": [{"part_kind": "tool-call", "args": {}}]}}
    (tmp_path / "bad.json").write_text(json.dumps({"version": 1, "responses": [step]}))
    done = llm_do("run", project, "hi", "-m", "replay:bad.json", cwd=tmp_path)
    assert done.returncode == 2  # a usage error: the flag names a file that is no recording
    assert done.stderr.startswith("llm-do: error: --model replay:bad.json: ")
    assert "responses[0]: not a model response: response.parts.0.tool-call.tool_name: Field required" in done.stderr
    assert "errors.pydantic.dev" not in done.stderr
