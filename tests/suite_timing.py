"""A pytest plugin that writes each test's wall time and CPU time to `$LLM_DO_SUITE_TIMES/<worker>.jsonl`.

`benchmarks/bench_suite.py` loads it (`-p tests.suite_timing`) to publish where the suite's time goes.
CPU time is this process's (all its threads) plus that of the child processes it reaped during the test
(commands, workers, MCP servers); servers that outlive a test (PostgreSQL) are not counted per test.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    folder = os.environ.get("LLM_DO_SUITE_TIMES")
    start, (own, children) = time.perf_counter(), _cpu()
    yield
    if folder:
        wall, (own_after, children_after) = time.perf_counter() - start, _cpu()
        record = {"test": item.nodeid, "wall": wall, "cpu": own_after - own + children_after - children}
        with (Path(folder) / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.jsonl").open("a") as out:
            out.write(json.dumps(record) + "\n")
