"""MCP servers as scoped resources: owned connections and processes, supervision, declarations.

Needs the `mcp` extra (`pip install 'llm-do[mcp]'`). A plain pydantic-ai `MCPToolset` built by any
provider is owned by an `McpServer` with that provider's scope; see docs/mcp.md.
"""

from .server import McpOptions, McpServer, McpServerError, McpServersError, own_mcp_toolsets
from .stdio import OwnedStdioTransport, ServerCommandNotFound

__all__ = [
    "McpOptions",
    "McpServer",
    "McpServerError",
    "McpServersError",
    "OwnedStdioTransport",
    "ServerCommandNotFound",
    "own_mcp_toolsets",
]
