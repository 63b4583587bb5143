"""MCP toolsets built by any provider are owned by an `llm_do.mcp.McpServer` in the scope that built them.

Kept apart from `llm_do.mcp` so that a runtime without MCP toolsets never imports fastmcp.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ..di._specs import ToolsetSpec
from ..scopes._tasks import is_awaitable

_MCP_MODULE = "pydantic_ai.mcp"
_SERVER_MODULE = "llm_do.mcp.server"


def owning(spec: ToolsetSpec, name: str) -> ToolsetSpec:
    """`spec`, whose instances have each `MCPToolset` in them owned and supervised under toolset `name`."""
    if not _may_build_mcp(spec.provides):
        return spec
    factory = spec.factory

    def create() -> Any:
        obj = factory()
        if is_awaitable(obj):
            return _own_later(obj, name)
        return owned(obj, name)

    return replace(spec, factory=create)


def _may_build_mcp(provides: Any) -> bool:
    if provides is None:
        return True  # a factory function: known once called
    module = sys.modules.get(_MCP_MODULE)
    if module is None:
        return False  # no MCPToolset class exists yet, so `provides` is none
    from pydantic_ai.toolsets import AbstractToolset

    kind = provides if isinstance(provides, type) else type(provides)
    if not issubclass(kind, AbstractToolset):
        return False
    # An MCPToolset, or a toolset that holds others (wrapped, combined, ...): pydantic-ai's tree walk is overridden.
    return issubclass(kind, module.MCPToolset) or kind.visit_and_replace is not AbstractToolset.visit_and_replace


def owned(obj: Any, name: str) -> Any:
    """`obj` with every `MCPToolset` in it (itself, or anywhere in its toolset tree) owned by an `McpServer`."""
    module = sys.modules.get(_MCP_MODULE)
    if module is None:
        return obj
    from ..mcp.server import own_mcp_toolsets

    return own_mcp_toolsets(obj, name)


async def _own_later(pending: Any, name: str) -> Any:
    return owned(await pending, name)


async def start_servers(toolsets: Iterable[Any]) -> None:
    """Start the MCP servers in a call's `toolsets` together, so that every one that fails is reported
    (see `llm_do.mcp.server.start_servers`). Nothing to do, and nothing imported, without MCP servers."""
    module = sys.modules.get(_SERVER_MODULE)
    if module is not None:
        await module.start_servers(toolsets)
