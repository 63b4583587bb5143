"""`llm-do run --attach`: files under the project reach the entry; a missing, outside or oversized file is a
usage error (exit 2) in one line."""

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


def test_a_file_outside_the_project_is_a_usage_error(tmp_path: Path) -> None:
    project = project_at(tmp_path / "desk")
    (tmp_path / "secret.txt").write_text("TOPSECRET\n")
    (project / "data" / "link.txt").symlink_to(tmp_path / "secret.txt")
    outside = llm_do("run", project, "look", "--attach", tmp_path / "secret.txt")
    assert outside.returncode == 2
    assert outside.stderr.startswith(f"llm-do: error: --attach {tmp_path / 'secret.txt'}: ")
    assert "is not a file under the project root" in outside.stderr
    linked = llm_do("run", project, "look", "--attach", project / "data" / "link.txt")
    assert linked.returncode == 2
    assert "'data/link.txt' is a symbolic link, and symbolic links are never followed" in linked.stderr
    assert "TOPSECRET" not in outside.stderr + outside.stdout + linked.stderr + linked.stdout
