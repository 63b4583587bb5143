"""`llm_do.process.children`: process groups started with `spawn_options` end when the process that started them
dies without ending them, even when its guardian was killed first and had to be started again."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from ..mcp_support import alive, gone_within

PARENT = """
import os, signal, subprocess, sys
from pathlib import Path
from llm_do.process import children

STUBBORN = ["sh", "-c", "trap '' TERM HUP; sleep 600 & echo $!; wait"]


def start():
    process = subprocess.Popen(STUBBORN, stdout=subprocess.PIPE, **children.spawn_options(0.5))
    children.guard(process.pid, 0.5)
    return process.pid, int(process.stdout.readline())


def guardian():
    for proc in Path("/proc").iterdir():
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (proc / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and b"llm-do guardian" in command:
            return int(proc.name)


first = start()
killed = guardian()
os.kill(killed, signal.SIGKILL)  # the guardian dies: the next spawn starts another, told of `first`
os.waitpid(killed, 0)
second = start()
print(*first, *second, guardian(), flush=True)
os._exit(0) if sys.argv[1] == "exit" else os.kill(os.getpid(), signal.SIGKILL)
"""


def test_groups_end_when_their_parent_dies_without_ending_them_and_a_killed_guardian_is_replaced(
    tmp_path: Path,
) -> None:
    for how in ("exit", "kill"):  # os._exit: no teardown, no atexit; SIGKILL: on Linux, the parent-death signal too
        done = subprocess.run(
            [sys.executable, "-c", PARENT, how], capture_output=True, text=True, timeout=60, cwd=tmp_path
        )
        *pids, guardian = (int(pid) for pid in done.stdout.split())
        assert len(pids) == 4, done.stderr
        # The shells ignore SIGTERM and SIGHUP, and so do their sleeps: SIGKILL after the 0.5 s grace.
        assert gone_within(pids, 15) == [], f"{how}: still running: {[pid for pid in pids if alive(pid)]}"
        deadline = time.monotonic() + 15
        while alive(guardian) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(guardian), "the guardian ends once its groups have"
