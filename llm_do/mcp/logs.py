"""A server's log notifications (MCP `notifications/message`) on the logger `llm_do.mcp.servers.NAME`.

Each message is logged at its own level: MCP's `notice` is INFO, `alert` and `emergency` are CRITICAL.
fastmcp's default handler would log them all on its own logger, with its own handler on stderr.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from fastmcp.client.logging import LogHandler, LogMessage, create_log_callback
from pydantic_ai.mcp import MCPToolset

from .._compat import route_logs

__all__ = ["LEVELS", "route_server_logs", "server_log_handler", "server_logger"]

LEVELS: Mapping[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
"""The logging level of each MCP log level (RFC 5424's)."""


def server_logger(name: str) -> logging.Logger:
    """The logger of the messages the MCP server `name` (its toolset name) sends."""
    return logging.getLogger(f"llm_do.mcp.servers.{name}")


def server_log_handler(name: str) -> LogHandler:
    """A fastmcp log handler that logs the messages of server `name` on its logger, at their own level."""
    logger = server_logger(name)

    async def handle(message: LogMessage) -> None:
        level = LEVELS.get(str(message.level), logging.WARNING)
        if logger.isEnabledFor(level):
            source = f" ({message.logger})" if message.logger else ""
            logger.log(level, "MCP server %r %s%s: %s", name, message.level, source, _text(message.data))

    return handle


def route_server_logs(toolset: MCPToolset[Any], name: str) -> None:
    """Send `toolset`'s log notifications to server `name`'s logger, unless its user chose a handler (or
    built its fastmcp `Client`). pydantic-ai and fastmcp offer no way to change it once built (`_compat`)."""
    route_logs(toolset, create_log_callback(server_log_handler(name)))


def _text(data: Any) -> str:
    if isinstance(data, str):
        return data
    if isinstance(data, Mapping) and isinstance(data.get("msg"), str):  # fastmcp servers send {"msg", "extra"}
        extra = data.get("extra")
        return data["msg"] if not extra else f"{data['msg']} {json.dumps(extra, ensure_ascii=False, default=repr)}"
    return json.dumps(data, ensure_ascii=False, default=repr)
