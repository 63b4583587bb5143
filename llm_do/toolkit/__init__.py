"""For toolset authors: `Toolset` and `@tool` (schemas described once per class, parameters the container
fills hidden from them), `Handles` (state a model refers to by handle), and validation errors a model can always
read.

May import: errors, scopes, approvals, events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_imports

if TYPE_CHECKING:
    from ._handles import (
        UnknownAgent as UnknownAgent,
        live_handle_maps as live_handle_maps,
    )
    from ._toolset import (
        known_tool_names as known_tool_names,
    )

__getattr__, __dir__ = lazy_imports(globals())
