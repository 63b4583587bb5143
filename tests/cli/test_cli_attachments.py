"""`llm-do run --attach`: files the person names reach the entry, also from outside the project; a missing,
unreadable or oversized file is a usage error (exit 2) in one line. Files a model names stay confined."""

from __future__ import annotations

import json
from pathlib import Path

from ..attachment_files import CSV, png
from ..cli_projects import llm_do

SHOW = """
from llm_do import entry


@entry
async def show(scope, text):
    return [[a.name, a.media_type, a.size, a.sha256[:8]] for a in scope.attachments]
"""


def project_at(path: Path) -> Path:
    (path / "data").mkdir(parents=True)
    (path / "flows.py").write_text(SHOW)
    (path / "data" / "chart.png").write_bytes(png())
    (path / "data" / "sales.csv").write_text(CSV)
    return path


def test_attached_files_reach_the_entry_and_the_json_calls(tmp_path: Path) -> None:
    project = project_at(tmp_path / "desk")
    chart, sales = project / "data" / "chart.png", project / "data" / "sales.csv"
    done = llm_do("run", project, "look", "--attach", chart, "--attach", sales, "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert [item[:3] for item in document["output"]] == [
        ["data/chart.png", "image/png", len(png())],
        ["data/sales.csv", "text/csv", len(CSV)],
    ]
    [call] = document["calls"]
    assert [(info["name"], info["media_type"], info["size"]) for info in call["attachments"]] == [
        ("data/chart.png", "image/png", len(png())),
        ("data/sales.csv", "text/csv", len(CSV)),
    ]


def test_paths_are_relative_to_the_current_directory_and_the_tree_shows_them(tmp_path: Path) -> None:
    project = project_at(tmp_path / "desk")
    done = llm_do("run", "..", "look", "--attach", "chart.png", cwd=project / "data")
    assert done.returncode == 0, done.stderr
    assert '"data/chart.png"' in done.stdout
    assert f"attached: 'data/chart.png' (image/png, {len(png())} bytes)" in done.stderr


def test_a_missing_file_is_a_usage_error_in_one_line(tmp_path: Path) -> None:
    project = project_at(tmp_path / "desk")
    done = llm_do("run", project, "look", "--attach", project / "data" / "nothing.pdf")
    assert done.returncode == 2
    assert done.stderr == "llm-do: error: attach: 'data/nothing.pdf' does not exist; list_dir or glob show what does\n"
    assert done.stdout == ""


def test_a_file_over_the_limit_is_a_usage_error_in_one_line(tmp_path: Path) -> None:
    project = project_at(tmp_path / "desk")
    limit = len(png()) - 1
    done = llm_do(
        "run",
        project,
        "look",
        "--attach",
        project / "data" / "chart.png",
        env={"LLM_DO_ATTACHMENTS__MAX_FILE_BYTES": str(limit)},
    )
    assert done.returncode == 2
    assert done.stderr == (
        f"llm-do: error: attach: 'data/chart.png' is {len(png())} bytes, more than the {limit}-byte limit "
        "(LLM_DO_ATTACHMENTS__MAX_FILE_BYTES); attach a smaller file\n"
    )


def test_a_file_the_person_names_outside_the_project_is_attached_by_its_name(tmp_path: Path) -> None:
    project = project_at(tmp_path / "desk")
    (tmp_path / "brief.txt").write_text("Ship it.\n")
    (project / "data" / "link.txt").symlink_to(tmp_path / "brief.txt")
    outside = llm_do("run", project, "look", "--attach", tmp_path / "brief.txt", "--json")
    assert outside.returncode == 0, outside.stderr
    assert [item[:3] for item in json.loads(outside.stdout)["output"]] == [["brief.txt", "text/plain", 9]]
    linked = llm_do("run", project, "look", "--attach", project / "data" / "link.txt", "--json")
    assert linked.returncode == 0, linked.stderr
    assert [item[:3] for item in json.loads(linked.stdout)["output"]] == [["data/link.txt", "text/plain", 9]]
    device = llm_do("run", project, "look", "--attach", "/dev/null")
    assert device.returncode == 2
    assert "'/dev/null' is not a regular file" in device.stderr
    limit = {"LLM_DO_ATTACHMENTS__MAX_FILE_BYTES": "4"}  # limits still apply
    big = llm_do("run", project, "look", "--attach", tmp_path / "brief.txt", env=limit)
    assert big.returncode == 2 and "more than the 4-byte limit" in big.stderr


async def test_a_file_a_model_names_stays_confined_to_the_project(tmp_path: Path) -> None:
    from pydantic_ai import Agent

    from llm_do import AgentEntry, Runtime, RuntimeConfig
    from llm_do.testing import ScriptedModel, tool_call

    (tmp_path / "secret.txt").write_text("TOPSECRET\n")
    root = tmp_path / "desk"
    root.mkdir()
    reader = AgentEntry(Agent(ScriptedModel("read")), name="reader")
    boss = AgentEntry(
        Agent(ScriptedModel(tool_call("reader", input="look", attachments=["../secret.txt"]), "done")),
        name="boss",
        toolsets=["reader"],
    )
    config = RuntimeConfig(project_root=root)
    async with Runtime(None, entries=[boss, reader], config=config) as runtime:
        result = await runtime.run("boss", "go")
    assert [call.entry for call in result.calls] == ["boss"]  # the child never ran
    assert "TOPSECRET" not in str(result.messages) and "../secret.txt" in str(result.messages)
