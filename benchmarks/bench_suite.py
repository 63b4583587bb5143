"""Where the test suite's time goes: wall time and CPU-seconds per tier, and the ten most expensive test files.

Runs pytest as `make test` and `make test-deep` do (`-n auto --dist worksteal`; the deep tier is
`LLM_DO_TEST_TIER=deep -m deep`), with the `tests.suite_timing` plugin writing each test's wall and
CPU time. The machine's busy CPU-seconds come from `/proc/stat` (Linux): every process counts,
PostgreSQL servers and the processes the tests start included. Per file, "test time" is the sum of
its tests' wall times on the xdist workers (so the files' times add up to about workers x wall), and
CPU is the tests' own processes and the children they reaped.

    python benchmarks/bench_suite.py [--tier dev|deep|both] [--top 10]

`make test` also runs ruff, mypy and a PostgreSQL start check before pytest: seconds when warm.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def busy_cpu_seconds() -> float | None:
    """CPU-seconds the whole machine has spent busy (not idle, not waiting for I/O) since boot."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return None
    ticks = [int(value) for value in fields]
    idle = ticks[3] + ticks[4]
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def run_tier(tier: str, top: int) -> str:
    command = [sys.executable, "-m", "pytest", "-q", "-n", "auto", "--dist", "worksteal", "-p", "tests.suite_timing"]
    command += ["--ignore=tests/evals"]  # as the Makefile: they run in their own virtualenv (make test-evals)
    if tier == "deep":
        command += ["-m", "deep"]
    with tempfile.TemporaryDirectory(prefix="llm-do-suite-times-") as folder:
        env = {**os.environ, "LLM_DO_TEST_TIER": tier, "LLM_DO_SUITE_TIMES": folder}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        busy, start = busy_cpu_seconds(), time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        busy_after = busy_cpu_seconds()
        if done.returncode != 0:
            raise SystemExit(f"the {tier} tier failed:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}")
        records = [json.loads(line) for path in Path(folder).glob("*.jsonl") for line in path.read_text().splitlines()]
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
    for record in records:
        totals = files[record["test"].split("::")[0]]
        totals[0] += 1
        totals[1] += record["wall"]
        totals[2] += record["cpu"]
    machine = f"{busy_after - busy:.0f}" if busy is not None and busy_after is not None else "n/a"
    lines = [
        f"## tier {tier}: {len(records)} tests, {wall:.0f} s wall, {machine} busy CPU-seconds on the machine "
        f"({os.cpu_count()} cores), {sum(r['cpu'] for r in records):.0f} CPU-seconds in the tests' processes",
        "",
        "| test file | tests | test time (s) | CPU (s) |",
        "|---|---:|---:|---:|",
    ]
    ranked = sorted(files.items(), key=lambda item: -item[1][1])
    for name, (count, test_wall, cpu) in ranked[:top]:
        lines.append(f"| `{name}` | {count:.0f} | {test_wall:.1f} | {cpu:.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", choices=["dev", "deep", "both"], default="both")
    parser.add_argument("--top", type=int, default=10)
    arguments = parser.parse_args()
    tiers = ["dev", "deep"] if arguments.tier == "both" else [arguments.tier]
    for tier in tiers:
        print(run_tier(tier, arguments.top), end="\n\n", flush=True)


if __name__ == "__main__":
    main()
