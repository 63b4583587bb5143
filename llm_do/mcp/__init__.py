"""MCP servers as scoped resources: owned connections and processes, supervision, declarations.

Needs the `mcp` extra (`pip install 'llm-do[mcp]'`). A plain pydantic-ai `MCPToolset` built by any
provider is owned by an `McpServer` with that provider's scope; `confined_roots` gives the directories
to offer one as MCP roots; see docs/mcp.md. Each name is imported when first used, so that checking
a project's MCP roots (`llm_do.mcp.roots`, standard library only) never imports fastmcp.

May import: errors, scopes, process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_imports

if TYPE_CHECKING:
    from .roots import (
        RootRefused as RootRefused,
        confined_roots as confined_roots,
    )
    from .server import (
        McpOptions as McpOptions,
        McpServer as McpServer,
        McpServerError as McpServerError,
        McpServersError as McpServersError,
        own_mcp_toolsets as own_mcp_toolsets,
    )
    from .stdio import (
        OwnedStdioTransport as OwnedStdioTransport,
        ServerCommandNotFound as ServerCommandNotFound,
    )

__getattr__, __dir__ = lazy_imports(globals())
