"""For toolset authors: `Toolset` and `@tool` (schemas described once per class, parameters the container
fills hidden from them), `Handles` (state a model refers to by handle), and validation errors a model can always
read.

May import: errors, scopes, approvals, events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._handles import (
        Handles as Handles,
        UnknownAgent as UnknownAgent,
        UnknownHandle as UnknownHandle,
        live_handle_maps as live_handle_maps,
        open_handles as open_handles,
    )
    from ._injection import (
        injected as injected,
    )
    from ._toolset import (
        ReadableArguments as ReadableArguments,
        Toolset as Toolset,
        check_unique_tools as check_unique_tools,
        injected_keys as injected_keys,
        known_tool_names as known_tool_names,
        known_tool_traits as known_tool_traits,
        may_ask_for_approval as may_ask_for_approval,
        tool as tool,
    )

_EXPORTS: dict[str, tuple[str, ...]] = {
    "_handles": (
        "Handles",
        "UnknownAgent",
        "UnknownHandle",
        "live_handle_maps",
        "open_handles",
    ),
    "_injection": ("injected",),
    "_toolset": (
        "ReadableArguments",
        "Toolset",
        "check_unique_tools",
        "injected_keys",
        "known_tool_names",
        "known_tool_traits",
        "may_ask_for_approval",
        "tool",
    ),
}
"""Each private module of the room, and the names it gives the other rooms."""

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
