"""Native tool calls in `-v` and `--json`; `check`'s verdict on a native tool's restriction whatever the API key;
errors that list known toolsets list only toolsets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, NativeToolCallPart, NativeToolReturnPart, TextPart

from containers import BuiltinToolsets
from llm_do import AgentEntry, ConfigurationError, Runtime
from llm_do.models import Recording
from llm_do.project import ProjectError, load_project

from ..cli_projects import llm_do

NOT_TOOLSETS = ("config", "approval_policies", "sql_database", "run_state")


def test_an_unknown_toolset_error_lists_only_toolsets(tmp_path: Path) -> None:
    clerk = AgentEntry(Agent("test"), name="clerk", toolsets=["sqll"])
    with pytest.raises(ConfigurationError) as caught:
        Runtime(BuiltinToolsets(), entries=[clerk])
    known = str(caught.value).partition("known: ")[2]
    assert "sql" in known and "filesystem" in known and "clerk" in known
    assert not any(repr(name) in known or f" {name}," in known for name in NOT_TOOLSETS), known

    (tmp_path / "helper.worker").write_text("---\ntoolsets: [sqll]\n---\nHi.\n")
    with pytest.raises(ProjectError) as problems:
        load_project(tmp_path, model="test")
    [problem] = problems.value.problems
    listed = problem.message.partition("known toolsets are ")[2].partition(";")[0]
    assert "sql" in listed and "filesystem_readonly" in listed
    assert not any(name in listed.replace(",", " ").split() for name in NOT_TOOLSETS), listed


def test_checks_verdict_on_max_uses_does_not_depend_on_the_api_key(tmp_path: Path) -> None:
    (tmp_path / "scout.worker").write_text("---\nnative_tools: {web_search: {max_uses: 2}}\n---\nGo.\n")
    without = llm_do("check", tmp_path, "-m", "openai:gpt-5.2", "--json", env={"OPENAI_API_KEY": None})
    with_key = llm_do("check", tmp_path, "-m", "openai:gpt-5.2", "--json", env={"OPENAI_API_KEY": "sk-never-sent"})
    assert (without.returncode, with_key.returncode) == (1, 1), without.stdout + with_key.stdout
    assert json.loads(without.stdout)["problems"] == json.loads(with_key.stdout)["problems"]
    assert "cannot apply its max_uses" in json.loads(without.stdout)["problems"][0]["message"]


def test_native_tool_calls_show_in_verbose_output_and_json(tmp_path: Path) -> None:
    (tmp_path / "scout.worker").write_text("---\nnative_tools: [web_search]\n---\nSearch.\n")
    searched = ModelResponse(
        parts=[
            NativeToolCallPart("web_search", {"query": "asyncio timeout"}, tool_call_id="ws_1", provider_name="openai"),
            NativeToolReturnPart("web_search", {"status": "completed"}, tool_call_id="ws_1", provider_name="openai"),
            TextPart("asyncio.timeout() bounds a block."),
        ]
    )
    Recording.from_script([searched]).save(tmp_path / "script.json")
    verbose = llm_do("run", tmp_path, "how?", "-m", "replay:script.json", "-v", cwd=tmp_path)
    assert verbose.returncode == 0, verbose.stderr
    assert 'scout -> web_search({"query":"asyncio timeout"}) [native: run by openai]' in verbose.stderr
    assert 'scout <- web_search -> {"status":"completed"}' in verbose.stderr
    as_json = llm_do("run", tmp_path, "how?", "-m", "replay:script.json", "--json", cwd=tmp_path)
    assert as_json.returncode == 0, as_json.stderr
    [call] = json.loads(as_json.stdout)["calls"]
    assert call["native_tool_calls"] == [
        {"tool": "web_search", "args": {"query": "asyncio timeout"}, "result": '{"status":"completed"}'}
    ]


@pytest.mark.parametrize("streamed", [False, True])
def test_the_test_model_runs_a_worker_with_native_tools_and_says_it_leaves_them_out(
    tmp_path: Path, streamed: bool
) -> None:
    """`-m test` runs every worker (docs/projects.md): pydantic-ai's TestModel cannot run native tools, so they are
    left out of its requests, and a note says so; `-v` streams the run, which takes the other way."""
    (tmp_path / "scout.worker").write_text(
        "---\nnative_tools:\n  web_search: {allowed_domains: [docs.python.org]}\n  code_execution:\n---\nSearch.\n"
    )
    (tmp_path / "plain.worker").write_text("---\n---\nAnswer.\n")
    done = llm_do("run", tmp_path, "how?", "-m", "test", "--entry", "scout", "--json", *(["-v"] if streamed else []))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == "success (no tool calls)"
    notes = [line for line in done.stderr.splitlines() if line.startswith("note:")]
    assert notes == [
        "note: the test model cannot run native tools: it left them out of its requests "
        "(web_search, code_execution of scout)"
    ]
    check = llm_do("check", tmp_path, "-m", "test")
    assert check.returncode == 0, check.stderr
    assert notes[0].replace(" left ", " leaves ") in check.stderr.splitlines(), check.stderr
    plain = llm_do("run", tmp_path, "hi", "-m", "test", "--entry", "plain")
    assert plain.returncode == 0 and "note:" not in plain.stderr
