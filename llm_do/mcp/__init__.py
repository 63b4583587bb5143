"""MCP servers as scoped resources: owned connections and processes, supervision, declarations.

Needs the `mcp` extra (`pip install 'llm-do[mcp]'`). A plain pydantic-ai `MCPToolset` built by any
provider is owned by an `McpServer` with that provider's scope; `confined_roots` gives the directories
to offer one as MCP roots; see docs/mcp.md.
"""

from ..mcp_roots import RootRefused, confined_roots
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
