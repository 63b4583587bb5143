"""MCP servers declared without Python: project.toml, worker frontmatter and mcpServers JSON files; the
example project notes_desk; `llm-do check` and `llm-do list` against real servers."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from llm_do import ApprovalRequest, RuntimeConfig
from llm_do.project import ProjectError, load_project
from llm_do.testing import ScriptedModel, tool_call

from ..cli_projects import llm_do
from ..mcp_support import COUNTER_TOML, SERVER, free_port, server_processes, write_project

EXAMPLE = Path(__file__).parents[2] / "examples" / "notes_desk"


async def test_the_example_project_runs_a_per_run_server_with_approvals_from_its_annotations() -> None:
    asked: list[str] = []

    def approver(request: ApprovalRequest) -> str:
        asked.append(request.tool)
        return "approve"

    def script(note: str) -> list[object]:
        answer = lambda turn: str(turn.returned("list_notes"))  # noqa: E731
        return [tool_call("add_note", text=note), tool_call("list_notes"), answer]

    model = ScriptedModel(*script("first run"), *script("second run"))
    config = RuntimeConfig(approval_mode="prompt")
    async with load_project(EXAMPLE, model=model, config=config, approver=approver) as project:
        one = await project.run(input_data="note: first run")
        assert server_processes("notes_server.py") == []  # per run: gone with its run
        two = await project.run(input_data="note: second run")
    assert one.output == "['first run']"
    assert two.output == "['second run']"  # a fresh notebook: a fresh server
    assert asked == ["add_note", "add_note"]  # list_notes is annotated readOnlyHint
    model.assert_done()


async def test_servers_from_project_toml_worker_files_and_mcp_json_with_scopes_and_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COUNTER_SECRET", "s3cret-value")
    mcp_json = {
        "mcpServers": {"shared": {"type": "stdio", "command": sys.executable, "args": [str(SERVER)], "disabled": False}}
    }
    root = write_project(
        tmp_path / "desk",
        f'entry = "clerk"\nmcp_config = ["mcp.json"]\n\n[mcp_servers.fresh]\n{COUNTER_TOML}scope = "per_call"\n'
        'env = { SECRET = "${COUNTER_SECRET}", DEPTH = "${settings.max_depth}", LABEL = "${NO_SUCH_VAR:-plain}" }\n',
        mcp__json=json.dumps(mcp_json),
        clerk__worker="---\ntoolsets: [fresh, shared]\nmcp_servers:\n"
        f"  own: {{command: python, args: ['{SERVER}'], scope: per_run}}\n---\nCount.",
    )
    model = ScriptedModel(tool_call("read_count"), lambda turn: str(turn.returned("read_count")))
    project = load_project(root, model=model)
    await project.aclose()
    assert set(project.mcp_servers) == {"fresh", "shared", "own"}
    assert {name: spec.scope.value for name, spec in project.mcp_specs.items()} == {
        "fresh": "per_call",
        "shared": "global",
        "own": "per_run",
    }
    assert project.runtime.entry("clerk").toolsets == ("fresh", "shared", "own")
    assert "s3cret-value" not in repr(project.mcp_servers["fresh"])


@pytest.mark.long
async def test_a_per_session_server_of_a_project_serves_one_session_across_its_runs(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "desk",
        f'entry = "clerk"\n\n[mcp_servers.mine]\n{COUNTER_TOML}scope = "per_session"\n',
        clerk__worker="---\ntoolsets: [mine]\n---\nCount.",
    )
    bump = [tool_call("bump", by=1), tool_call("server_pid"), lambda turn: f"{turn.returned('bump')}"]
    model = ScriptedModel(*bump * 3)
    config = RuntimeConfig(approval_mode="approve_all")
    async with load_project(root, model=model, config=config) as project:
        assert project.mcp_specs["mine"].scope.value == "per_session"
        runtime = project.runtime
        alice = await runtime.session("alice")
        assert [(await alice.run("clerk", "bump")).output for _ in range(2)] == ["1", "2"]
        bob = await runtime.session("bob")
        assert (await bob.run("clerk", "bump")).output == "1"  # Bob's server is his own
        assert len(server_processes()) == 2
        await alice.aclose()
        assert len(server_processes()) == 1  # Alice's ended with her session
    assert server_processes() == []
    model.assert_done()


@pytest.mark.long
async def test_a_declared_server_passes_env_from_the_environment_and_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COUNTER_SECRET", "s3cret-value")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    root = write_project(
        tmp_path / "desk",
        f'entry = "clerk"\n\n[mcp_servers.counter]\n{COUNTER_TOML}scope = "per_call"\n'
        'env = { SECRET = "${COUNTER_SECRET}", DEPTH = "${settings.max_depth}", LABEL = "${NO_SUCH_VAR:-plain}" }\n',
        clerk__worker="---\ntoolsets: [counter]\n---\nCount.",
    )
    model = ScriptedModel(
        tool_call("getenv", name="SECRET"),
        tool_call("getenv", name="DEPTH"),
        tool_call("getenv", name="LABEL"),
        tool_call("getenv", name="HTTPS_PROXY"),
        tool_call("getenv", name="HOME"),
        tool_call("bump", by=2),
        lambda turn: f"{turn.returned('getenv')}",
    )
    async with load_project(root, model=model, config=RuntimeConfig(approval_mode="approve_all")) as project:
        result = await project.run(input_data="go")
        returns = [
            part.content
            for message in result.messages
            for part in getattr(message, "parts", ())
            if part.part_kind == "tool-return"
        ]
    assert returns == ["s3cret-value", "5", "plain", "", os.environ["HOME"], 2]  # undeclared: HOME, not proxies
    assert server_processes() == []
    listed = llm_do("list", root, "--model", "test", env={"COUNTER_SECRET": "s3cret-value"})
    assert listed.returncode == 0, listed.stderr
    assert "getenv (ro)" in listed.stdout and "bump" in listed.stdout
    assert "s3cret-value" not in listed.stdout + listed.stderr


def test_a_servers_url_is_shown_without_its_password_nor_its_query_values(tmp_path: Path) -> None:
    """A hosted MCP server's URL often carries a token (`?api_key=...`, `user:token@`): `llm-do list` and the
    errors show where the server is, never the token."""
    port = free_port()
    url = f"http://desk:s3cret-pw@127.0.0.1:{port}/mcp?api_key=s3cret-key&profile=s3cret-profile"
    root = write_project(
        tmp_path / "desk",
        f'entry = "clerk"\n\n[mcp_servers.hosted]\nurl = "{url}"\n',
        clerk__worker="---\ntoolsets: [hosted]\n---\nCount.",
    )
    listed = llm_do("list", root, "--model", "test", env={"COLUMNS": "500"})  # a row per line, unwrapped
    shown = listed.stdout + listed.stderr
    assert f"http://desk:***@127.0.0.1:{port}/mcp?api_key=***&profile=***" in shown
    assert "failed the MCP handshake" in shown and "s3cret" not in shown


def test_bad_declarations_are_reported_with_file_line_and_what_to_do(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "bad",
        '[mcp_servers.both]\ncommand = "x"\nurl = "http://127.0.0.1:1/mcp"\n\n'
        '[mcp_servers.typo]\ncomand = "x"\n\n'
        '[mcp_servers.unset]\ncommand = "x"\nenv = { A = "${LLM_DO_TEST_UNSET_VARIABLE}" }\n\n'
        '[mcp_servers.clerk]\ncommand = "x"\n',
        clerk__worker="---\nmcp_servers:\n  mine: {url: 'http://127.0.0.1:1/mcp', scope: sometimes}\n---\nHi.",
    )
    with pytest.raises(ProjectError) as caught:
        load_project(root, model="test")
    messages = "\n".join(str(problem) for problem in caught.value.problems)
    assert "MCP server 'both': give either command (a stdio server) or url" in messages
    assert "MCP server 'typo': unknown key 'comand' (did you mean 'command'?); the keys are command, args" in messages
    assert "${LLM_DO_TEST_UNSET_VARIABLE} names an environment variable that is not set" in messages
    assert "MCP server 'clerk' has the name of another toolset or entry" in messages
    scopes = "'global', 'per_session', 'per_run' or 'per_call'"
    assert f"clerk.worker:3: MCP server 'mine': scope: Input should be {scopes}" in messages
    assert "project.toml:1: MCP server 'both'" in messages and "project.toml:5: MCP server 'typo'" in messages


def test_every_unset_variable_of_a_server_is_reported_at_its_own_line(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "desk",
        f'mcp_config = ["mcp.json"]\n[mcp_servers.counter]\n{COUNTER_TOML}[mcp_servers.counter.env]\n'
        'A = "${LLM_DO_TEST_UNSET_1}"\n'
        'B = "x-${LLM_DO_TEST_UNSET_2}-${LLM_DO_TEST_UNSET_3:-}-${LLM_DO_TEST_UNSET_4}"\n',
        mcp__json='{"mcpServers": {\n  "other": {\n    "command": "x",\n'
        '    "env": {"C": "${LLM_DO_TEST_UNSET_5}"}\n  }\n}}\n',
        clerk__worker="---\ntoolsets: [counter]\n---\nHi.",
    )
    checked = llm_do("check", root, "--model", "test")
    assert checked.returncode == 1
    toml, json_file = root / "project.toml", root / "mcp.json"
    assert checked.stderr.splitlines() == [
        f"{json_file}:4: MCP server 'other': ${{LLM_DO_TEST_UNSET_5}} names an environment variable that is not "
        "set; set it or give ${LLM_DO_TEST_UNSET_5:-default}",
        f"{toml}:6: MCP server 'counter': ${{LLM_DO_TEST_UNSET_1}} names an environment variable that is not set; "
        "set it or give ${LLM_DO_TEST_UNSET_1:-default}",
        f"{toml}:7: MCP server 'counter': ${{LLM_DO_TEST_UNSET_2}} names an environment variable that is not set; "
        "set it or give ${LLM_DO_TEST_UNSET_2:-default}",
        f"{toml}:7: MCP server 'counter': ${{LLM_DO_TEST_UNSET_4}} names an environment variable that is not set; "
        "set it or give ${LLM_DO_TEST_UNSET_4:-default}",
        "llm-do: 4 problems found",
    ]


def test_an_mcp_config_that_is_missing_or_not_json_is_reported_with_its_line_and_what_to_do(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "desk",
        'entry = "clerk"\nmcp_config = [\n  "mcp.json",\n  "nmcp.json",\n]\n',
        mcp__json='{"mcpServers": {\n  "other": {"command": "x",}\n}}\n',
        clerk__worker="---\nmodel: test\n---\nHi.",
    )
    checked = llm_do("check", root)
    assert checked.returncode == 1
    assert checked.stderr.splitlines() == [
        f"{root / 'mcp.json'}:2: not valid JSON: Expecting property name enclosed in double quotes (column 28); "
        "fix the file",
        f"{root / 'project.toml'}:2: mcp_config: 'nmcp.json' is not a file under {root}; fix the path",
        "llm-do: 2 problems found",
    ]


@pytest.mark.long
def test_check_starts_each_server_once_and_reports_the_ones_that_fail(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "desk",
        f'[mcp_servers.good]\n{COUNTER_TOML}\n[mcp_servers.ghost]\ncommand = "no-such-mcp-server-xyz"\n',
        clerk__worker="---\ntoolsets: [good, ghost]\n---\nHi.",
    )
    checked = llm_do("check", root, "--model", "test")
    assert checked.returncode == 1
    assert "MCP server 'ghost' failed" in checked.stderr
    assert "command 'no-such-mcp-server-xyz' was not found" in checked.stderr
    assert "'good'" not in checked.stderr
    assert checked.stderr.splitlines()[-1] == "llm-do: 1 problem found (MCP server 'ghost' did not start)"
    (root / "project.toml").write_text(f"[mcp_servers.good]\n{COUNTER_TOML}")
    (root / "clerk.worker").write_text("---\ntoolsets: [good]\n---\nHi.")
    checked = llm_do("check", root, "--model", "test")
    assert checked.returncode == 0, checked.stderr
    assert "1 MCP servers started" in checked.stdout
    document = json.loads(llm_do("check", root, "--model", "test", "--json").stdout)
    (server,) = document["mcp_servers"]
    assert document["ok"] is True and server["name"] == "good" and server["error"] is None
    tools = {tool["name"]: tool for tool in server["tools"]}
    assert tools["read_count"] == {"name": "read_count", "read_only": True, "annotations": {"readOnlyHint": True}}
    assert tools["bump"]["read_only"] is False and server["tool_prefix"] is None
