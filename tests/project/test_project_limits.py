"""Model limits in a project's files: a wrong limit is a problem naming its file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_do.project import ProjectError, load_project


def test_a_wrong_limit_in_a_file_is_a_problem_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "a.worker").write_text("---\nmodel: test\nlimits: {max_token: 5}\n---\nHi.\n")
    (tmp_path / "project.toml").write_text(
        'suspect_output = "sometimes"\n\n[limits]\nmax_tokens = 100\nrun_requests = -2\n\n[model_settings]\n'
    )
    with pytest.raises(ProjectError) as raised:
        load_project(tmp_path)
    problems = sorted(str(problem) for problem in raised.value.problems if problem.file != tmp_path / "a.worker")
    assert [problem.file for problem in raised.value.problems].count(tmp_path / "a.worker") == 1  # in one pass
    assert problems == [
        f"{tmp_path / 'project.toml'}:1: suspect_output: Input should be 'flag' or 'retry' (got 'sometimes')",
        f"{tmp_path / 'project.toml'}:5: limits.run_requests: Input should be greater than or equal to 0 (got -2)",
    ]  # the line of the wrong value, as in [model_settings], not the table's
    (tmp_path / "project.toml").unlink()
    with pytest.raises(ProjectError) as raised:
        load_project(tmp_path)
    assert [str(problem) for problem in raised.value.problems] == [
        f"{tmp_path / 'a.worker'}:3: limits: unknown limit 'max_token' (did you mean 'max_tokens'?); known: "
        "max_tokens, request_timeout, run_timeout, run_requests, run_tokens, repeated_calls; write limits: "
        "{max_tokens: 2048, request_timeout: 300, run_requests: 20}"
    ]
