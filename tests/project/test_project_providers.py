"""A project's own OpenAI-compatible servers (`[providers.NAME]` in project.toml) and its default model: model
names `NAME:model` on the command line and in the project reach that server, over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path

from ..cli.test_cli_openai import COUNTER
from ..cli_projects import llm_do
from ..models.test_replay import chat_server


def project(root: Path, toml: str) -> Path:
    root.mkdir()
    (root / "tools.py").write_text(COUNTER)
    (root / "clerk.worker").write_text("---\nname: clerk\ntoolsets: [counter]\n---\nCount as asked.\n")
    (root / "project.toml").write_text(toml)
    return root


def test_a_projects_default_model_on_its_own_server_runs_with_no_flag(tmp_path: Path) -> None:
    with chat_server() as (base_url, seen):
        toml = f'model = "local:gpt-local"\n\n[providers.local]\nbase_url = "{base_url}"\napi_key_env = "LOCAL_KEY"\n'
        root = project(tmp_path / "counting", toml)
        done = llm_do("run", root, "Add 2.", "--json", env={"LOCAL_KEY": "sk-local"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == "The total is 42."
    assert [auth for auth, _ in seen] == ["Bearer sk-local"] * 2  # pydantic-ai's OpenAI client, over HTTP
    assert seen[0][1]["model"] == "gpt-local"


def test_a_servers_prefix_is_a_model_name_on_the_command_line(tmp_path: Path) -> None:
    with chat_server() as (base_url, seen):
        root = project(tmp_path / "counting", f'[providers.ollama-local]\nbase_url = "{base_url}"\n')
        done = llm_do("run", root, "Add 2.", "--model", "ollama-local:qwen2.5", "--json")
        unknown = llm_do("run", root, "Add 2.", "--model", "ollamma-local:qwen2.5")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == "The total is 42." and seen[0][1]["model"] == "qwen2.5"
    assert unknown.returncode == 2 and "unknown model provider 'ollamma-local'" in unknown.stderr


def test_a_server_without_an_address_is_a_problem_with_its_line(tmp_path: Path) -> None:
    root = project(tmp_path / "counting", 'entry = "clerk"\n\n[providers.local]\nurl = "http://127.0.0.1:1/v1"\n')
    done = llm_do("check", root, "--json")
    assert done.returncode == 1
    [problem] = json.loads(done.stdout)["problems"]
    assert problem["line"] == 3 and "providers.local: base_url must be the server's http(s) URL" in problem["message"]
