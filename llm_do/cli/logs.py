"""The log messages MCP servers send, shown on stderr with -v (INFO and above) or -vv (DEBUG too).

`llm_do.mcp` logs each server's messages on `llm_do.mcp.servers.NAME` at their own level; without -v
the command shows none of them (a server's chatter is not llm-do's problem to report).
"""

from __future__ import annotations

import logging

from rich.console import Console

from .render import shown

__all__ = ["show_server_logs"]

SERVERS_LOGGER = "llm_do.mcp.servers"
"""The parent of every server's logger (named here so that the command need not import fastmcp)."""

_STYLES = {logging.CRITICAL: "red", logging.ERROR: "red", logging.WARNING: "yellow"}


class _Printed(logging.Handler):
    def __init__(self, err: Console) -> None:
        super().__init__()
        self.err = err

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = shown(record.getMessage())
            style = _STYLES.get(record.levelno, "dim")
            self.err.print(f"[{style}]{text}[/]", soft_wrap=True)
        except Exception:
            self.handleError(record)


def show_server_logs(err: Console, verbosity: int) -> None:
    """Print the servers' messages on `err` at -v (INFO and above) and -vv (DEBUG too); hide them otherwise."""
    logger = logging.getLogger(SERVERS_LOGGER)
    logger.propagate = False
    logger.handlers[:] = [_Printed(err)]
    logger.setLevel(logging.DEBUG if verbosity >= 2 else logging.INFO if verbosity == 1 else logging.CRITICAL + 1)
