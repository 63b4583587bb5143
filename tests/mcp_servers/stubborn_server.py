"""An MCP server that does not stop by itself, for the tests: it ignores SIGTERM, SIGHUP and the end of
its stdin, and keeps a child process that does the same (as npx or uvx keep the real server as their
child). Only SIGKILL ends them.

At start it appends its pid and its child's pid to the file named by STUBBORN_PIDS. With
STUBBORN_SLOW_START=SECONDS it waits that long before answering the MCP handshake. Its tool `hold`
creates the file `marker`, then sleeps.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from fastmcp import FastMCP

IGNORE = """
import signal, time
for signum in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(signum, signal.SIG_IGN)
time.sleep(600)
"""

server = FastMCP("stubborn")


@server.tool
async def hold(marker: str, seconds: float = 600) -> str:
    """Create the file `marker`, then sleep."""
    Path(marker).touch()  # noqa: ASYNC240 - a test server, one tiny file
    await asyncio.sleep(seconds)
    return "held"


if __name__ == "__main__":
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", IGNORE], stdin=subprocess.DEVNULL)
    with open(os.environ["STUBBORN_PIDS"], "a") as pids:
        pids.write(f"{os.getpid()}\n{child.pid}\n")
    time.sleep(float(os.environ.get("STUBBORN_SLOW_START", "0")))
    server.run(show_banner=False, log_level="WARNING")
    while True:  # stdin has ended: stay anyway
        time.sleep(1)
