"""MCP servers as scoped resources: owned connections and processes, supervision, declarations.

Needs the `mcp` extra (`pip install 'llm-do[mcp]'`). A plain pydantic-ai `MCPToolset` built by any
provider is owned by an `McpServer` with that provider's scope; `confined_roots` gives the directories
to offer one as MCP roots; see docs/mcp.md. Each name is imported when first used, so that checking
a project's MCP roots (`llm_do.mcp.roots`, standard library only) never imports fastmcp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_names

if TYPE_CHECKING:
    from .roots import RootRefused, confined_roots
    from .server import McpOptions, McpServer, McpServerError, McpServersError, own_mcp_toolsets
    from .stdio import OwnedStdioTransport, ServerCommandNotFound

__all__ = [
    "McpOptions",
    "McpServer",
    "McpServerError",
    "McpServersError",
    "OwnedStdioTransport",
    "RootRefused",
    "ServerCommandNotFound",
    "confined_roots",
    "own_mcp_toolsets",
]

_MODULES = {
    "McpOptions": "server",
    "McpServer": "server",
    "McpServerError": "server",
    "McpServersError": "server",
    "OwnedStdioTransport": "stdio",
    "RootRefused": "roots",
    "ServerCommandNotFound": "stdio",
    "confined_roots": "roots",
    "own_mcp_toolsets": "server",
}


__getattr__, __dir__ = lazy_names(__name__, _MODULES, globals())
