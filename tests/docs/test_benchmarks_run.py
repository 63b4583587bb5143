"""The benchmarks still run: each in its quickest form, as a process of its own, on the code as it is (a change
that breaks one, say a toolset that now asks, shows here rather than on the day someone measures)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

QUICK = {
    "bench_scopes.py": (["--count-calls", "--runs", "2"], "llm-do agent-as-tool, fresh Toolsets per call"),
    "bench_stream.py": (["--count-calls", "--runs", "2"], "llm-do Runtime.stream, agent-as-tool"),
    "bench_tracing.py": (["--count-calls", "--runs", "2"], "llm-do's spans"),
    "bench_decision.py": (["--rounds", "1", "--decisions", "1", "--load", "0"], "a tool that asks while it runs"),
    "bench_evals.py": (["--cases", "3", "--rounds", "1"], "at once, overrides"),
    "bench_sync_tools.py": (
        ["--rounds", "1", "--runs", "2", "--tick-rounds", "1"],
        "llm-do Toolset sync tool, on its run's thread",
    ),
    "bench_history.py": (["--turns", "20", "--rounds", "1"], "turns: a row per turn, a version check"),
}


@pytest.mark.parametrize("script", sorted(QUICK))
def test_a_benchmark_runs_and_reports_llm_dos_row(script: str) -> None:
    arguments, row = QUICK[script]
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *arguments],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=BENCHMARKS.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert row in done.stdout, done.stdout[-3000:]
