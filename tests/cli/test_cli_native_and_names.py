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
