"""How long the `llm-do` command takes, against the fairest baseline: `python -c "import pydantic_ai"`.

Each case is a fresh process, run `--runs` times, the cases interleaved round by round so that a
busy machine slows them alike. The report gives the median wall-clock time of each case, its median
CPU time (user + system, which other processes on the machine disturb less), and the run's cost
over the baseline. Bytecode caching is on (`PYTHONDONTWRITEBYTECODE` is dropped), as for an installed
package. Cases:

- `import pydantic_ai`: the baseline, `python -c "import pydantic_ai"`;
- `--help` and `--version`: the command answering without running anything;
- `run (replay)`: `llm-do run examples/bank_clerk -m replay:.../recording.json --approve-all`, a
  whole replayed run (five model requests, a SQLite transaction) with its tree and usage table.

    python benchmarks/bench_cli.py [--runs 21] [--python PATH]

`--python` measures another environment (say, a virtualenv where `pip install llm-do` installed
llm-do without extras). The cases run from the repository root (for `examples/bank_clerk`).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BANK = ROOT / "examples" / "bank_clerk"


def cases(python: str) -> dict[str, list[str]]:
    command = [python, "-m", "llm_do.cli"]
    replay = ["run", str(BANK), "-m", f"replay:{BANK / 'recording.json'}", "--approve-all"]
    return {
        "import pydantic_ai": [python, "-c", "import pydantic_ai"],
        "llm-do --help": [*command, "--help"],
        "llm-do --version": [*command, "--version"],
        "llm-do run (replay)": [*command, *replay],
    }


def once(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one run of `command` (which must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="runs of each case (default 21)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter of the environment to measure")
    args = parser.parse_args()
    runs = cases(args.python)
    # As an installed package runs: bytecode cached (pip compiles it; here the first run writes it).
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_DO_") and k != "PYTHONDONTWRITEBYTECODE"}
    for command in runs.values():  # warm the file cache and the bytecode cache
        once(command, env)
    walls: dict[str, list[float]] = {name: [] for name in runs}
    cpus: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.runs):
        for name, command in runs.items():
            wall, cpu = once(command, env)
            walls[name].append(wall)
            cpus[name].append(cpu)
    load = os.getloadavg()
    print(f"{args.python}: python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores")
    print(f"load average {load[0]:.1f} at the end")
    print(f"{args.runs} runs each, interleaved; medians\n")
    print("| case | wall-clock (s) | CPU (s) |\n|---|---:|---:|")
    for name in runs:
        print(f"| {name} | {statistics.median(walls[name]):.3f} | {statistics.median(cpus[name]):.3f} |")
    base_wall, base_cpu = (
        statistics.median(walls["import pydantic_ai"]),
        statistics.median(cpus["import pydantic_ai"]),
    )
    run_wall, run_cpu = statistics.median(walls["llm-do run (replay)"]), statistics.median(cpus["llm-do run (replay)"])
    print(f"\nthe replayed run costs {run_wall - base_wall:+.3f} s wall-clock, {run_cpu - base_cpu:+.3f} s CPU")
    print(f"over `import pydantic_ai` (ratio {run_wall / base_wall:.2f} wall-clock, {run_cpu / base_cpu:.2f} CPU)")


if __name__ == "__main__":
    main()
