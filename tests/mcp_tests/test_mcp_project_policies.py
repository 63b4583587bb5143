"""Approvals of MCP servers declared in project files: a worker's `approvals:` for a server, what
`llm-do list` shows (tool by tool, what decides), and servers whose tools are renamed by `tool_prefix`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import containers, providers
from pydantic_ai.exceptions import UserError

from llm_do import ApprovalRequest, Runtime, RuntimeConfig
from llm_do.project import ProjectError, load_project

from ..cli_projects import llm_do
from ..mcp_support import (
    COUNTER_TOML,
    SERVER,
    agent_entry,
    answers_of,
    in_process,
    plan,
    plan_model,
    server_processes,
    write_project,
)

OWN = f"  mine: {{command: python, args: ['{SERVER}']}}\n"


async def run_asking(root: Path, runs: list[tuple[str, str]]) -> tuple[list[list[Any]], list[str]]:
    """Run each (entry, plan) with every question approved; what the tools returned and which calls asked."""
    asked: list[str] = []

    def approver(request: ApprovalRequest) -> str:
        asked.append(f"{request.entry}: {request.toolset}.{request.tool}")
        return "approve"

    config = RuntimeConfig(approval_mode="prompt")
    async with load_project(root, model=plan_model(), config=config, approver=approver) as project:
        results = [answers_of(await project.run(entry, steps)) for entry, steps in runs]
    assert server_processes() == []
    return results, asked


@pytest.mark.long
async def test_a_workers_approvals_for_a_server_lay_over_its_tools_annotations(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "desk",
        f"[mcp_servers.counter]\n{COUNTER_TOML}",
        shared__worker="---\ntoolsets: [counter]\napprovals: {counter: {tools: {reset: deny}}}\n---\nCount.",
        own__worker=f"---\nmcp_servers:\n{OWN}approvals: {{mine: {{tools: {{reset: deny}}}}}}\n---\nCount.",
        plain__worker="---\ntoolsets: [counter]\n---\nCount.",
    )
    steps = plan("reset", ("bump", {"by": 2}), "read_count")
    results, asked = await run_asking(root, [("shared", steps), ("own", steps), ("plain", steps)])
    shared, own, plain = results
    assert "denied by policy (toolset 'counter@shared' policy: tool 'reset' is 'deny')" in shared[0]
    assert "denied by policy (toolset 'mine@own' policy: tool 'reset' is 'deny')" in own[0]
    assert shared[1:] == own[1:] == [2, 2]  # each server counts on its own
    assert plain == ["reset", 2, 2]  # the other worker keeps the server's usual policy
    assert asked == [
        "shared: counter@shared.bump",  # not annotated readOnlyHint: it still asks
        "own: mine@own.bump",
        "plain: counter.reset",
        "plain: counter.bump",
    ]


APPROVALS_DOC = {
    "read_count": "allow",
    "bump": "ask",
    "reset": "deny",
    "getenv": "allow",
    "server_pid": "ask",
    "wait": "allow",
    "say": "allow",
}


@pytest.mark.long
def test_list_shows_for_each_tool_the_decision_that_applies(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "desk",
        f'entry = "clerk"\n\n[mcp_servers.counter]\n{COUNTER_TOML}',
        clerk__worker="---\ntoolsets: [counter]\n---\nCount.",
        strict__worker="---\ntoolsets: [counter]\napprovals: {counter: {tools: {read_count: ask}}}\n---\nCount.",
    )
    env = {"LLM_DO_APPROVAL_POLICIES__counter__tools__reset": "deny"}
    listed = llm_do("list", root, "--model", "test", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    rows = {row["entry"]: row for row in json.loads(listed.stdout)["entries"]}
    assert rows["clerk"]["decisions"] == {"counter": APPROVALS_DOC}
    assert rows["strict"]["toolsets"] == ["counter@strict"]
    assert rows["strict"]["decisions"] == {"counter@strict": {**APPROVALS_DOC, "read_count": "ask"}}
    assert rows["clerk"]["approvals"]["counter"] == (
        "allow read_count, getenv, wait, say; ask bump, server_pid; deny reset"
    )
    text = llm_do("list", root, "--model", "test", env=env)
    assert text.returncode == 0, text.stderr
    assert "allow read_count, getenv, wait, say; ask bump, server_pid; deny reset" in text.stdout
    assert "default allow" not in text.stdout  # what the annotations decide is not a default


@pytest.mark.long
async def test_two_servers_with_the_same_tools_serve_one_worker_under_prefixes(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "desk",
        f'[mcp_servers.left]\n{COUNTER_TOML}tool_prefix = "l"\n\n'
        f'[mcp_servers.right]\n{COUNTER_TOML}tool_prefix = "r"\n',
        both__worker="---\ntoolsets: [left, right]\napprovals: {right: {tools: {r_reset: deny}}}\n---\nCount.",
    )
    steps = plan(("l_bump", {"by": 2}), ("r_bump", {"by": 5}), "l_read_count", "r_reset", "l_reset")
    [results], asked = await run_asking(root, [("both", steps)])
    assert results[:3] == [2, 5, 2]
    assert "denied by policy (toolset 'right@both' policy: tool 'r_reset' is 'deny')" in results[3]
    assert results[4] == "reset"
    assert asked == ["both: left.l_bump", "both: right@both.r_bump", "both: left.l_reset"]
    listed = llm_do("list", root, "--model", "test", "--json")
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    [row] = document["entries"]
    assert row["decisions"]["right@both"]["r_reset"] == "deny"
    assert row["decisions"]["left"]["l_read_count"] == "allow"
    servers = {server["name"]: server for server in document["mcp_servers"]}
    assert servers["left"]["tool_prefix"] == "l"
    assert {"name": "r_read_count", "read_only": True} in [
        {key: tool[key] for key in ("name", "read_only")} for tool in servers["right"]["tools"]
    ]


async def test_a_run_whose_servers_offer_the_same_tool_says_to_give_one_a_prefix() -> None:
    class Two(containers.DeclarativeContainer):
        left = providers.Singleton(in_process)
        right = providers.Singleton(in_process)

    runtime = Runtime(Two(), entries=[agent_entry("clerk", ["left", "right"])], config=RuntimeConfig())
    async with runtime:
        with pytest.raises(UserError, match=r"Give one of the two servers a tool_prefix \(project files\)"):
            await runtime.run("clerk", plan("read_count"))


def test_an_unknown_server_key_is_named_with_the_keys_there_are_and_only_once(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "desk",
        f'[mcp_servers.counter]\n{COUNTER_TOML}toolprefix = "c"\n',
        clerk__worker="---\ntoolsets: [counter]\napprovals: {counter: {default: ask}}\n---\nCount.",
    )
    with pytest.raises(ProjectError) as caught:
        load_project(root, model="test")
    [problem] = caught.value.problems
    assert problem.line == 1
    assert "MCP server 'counter': unknown key 'toolprefix' (did you mean 'tool_prefix'?); the keys are " in str(problem)
    assert "command, args, env, cwd, url, headers, scope, startup_timeout, tool_prefix, roots" in str(problem)


@pytest.mark.long
def test_check_names_tools_two_servers_of_one_worker_share_and_policies_naming_no_tool(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "desk",
        f'[mcp_servers.left]\n{COUNTER_TOML}\n[mcp_servers.right]\n{COUNTER_TOML}tool_prefix = "r"\n',
        both__worker="---\ntoolsets: [left, right]\napprovals: {right: {tools: {reset: deny}}}\n---\nCount.",
    )
    checked = llm_do("check", root, "--model", "test")
    assert checked.returncode == 1
    lines = checked.stderr.splitlines()
    assert (
        f"{root / 'both.worker'}:3: approvals for toolset 'right' name tool 'reset', which MCP server 'right' "
        "does not offer (its tools are named with the prefix 'r_': did you mean 'r_reset'?); fix the tool name"
    ) in lines
    (root / "both.worker").write_text("---\ntoolsets: [left, right]\n---\nCount.")
    (root / "project.toml").write_text(f"[mcp_servers.left]\n{COUNTER_TOML}\n[mcp_servers.right]\n{COUNTER_TOML}")
    checked = llm_do("check", root, "--model", "test")
    assert checked.returncode == 1
    assert (
        f"{root / 'both.worker'}:2: worker 'both' uses MCP servers 'left' and 'right', which both offer tool "
        "'bump' (and 6 more); give one of them a tool_prefix"
    ) in checked.stderr.splitlines()
    assert checked.stderr.splitlines()[-1] == "llm-do: 1 problem found"
