"""A small MCP server for the tests, written with fastmcp: stdio by default, streamable HTTP with --http PORT.

Its state (a counter) lives in the process, so a test can tell which server instance answered.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from fastmcp import Context, FastMCP
from mcp_types import ToolAnnotations

server = FastMCP("counter")
_count = 0


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_count() -> int:
    """The counter's value."""
    return _count


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def bump(by: int = 1) -> int:
    """Add `by` to the counter and return its new value."""
    global _count
    _count += by
    return _count


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def reset() -> str:
    """Set the counter back to zero."""
    global _count
    _count = 0
    return "reset"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def getenv(name: str) -> str:
    """The value of an environment variable of the server process ('' when unset)."""
    return os.environ.get(name, "")


@server.tool
def server_pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def wait(seconds: float, marker: str = "") -> str:
    """Sleep, then say so. Creates the file `marker` (when given) once the wait has begun."""
    if marker:
        Path(marker).touch()  # noqa: ASYNC240 - a test server, one tiny file
    await asyncio.sleep(seconds)
    return f"waited {seconds}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def say(message: str, level: str, ctx: Context) -> str:
    """Send `message` to the client as a log notification at `level` (debug, info, ..., alert, emergency)."""
    await ctx.log(message, level=level, logger_name="counter")
    return "said"


if __name__ == "__main__":
    if os.environ.get("COUNTER_CRASH_AT_START"):
        print("counter server: refusing to start (COUNTER_CRASH_AT_START is set)", file=sys.stderr)
        sys.exit(3)
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run(transport="http", host="127.0.0.1", port=int(sys.argv[2]), show_banner=False)
    else:
        server.run(show_banner=False)
