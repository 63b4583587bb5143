"""The run room."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._call_scope import (
        CallHost as CallHost,
    )
    from ._call_scope import (
        CallScope as CallScope,
    )
    from ._call_scope import (
        Entry as Entry,
    )
    from ._call_scope import (
        current_scope as current_scope,
    )
    from ._entries import (
        AgentEntry as AgentEntry,
    )
    from ._entries import (
        FunctionEntry as FunctionEntry,
    )
    from ._entries import (
        entry as entry,
    )
    from ._entries import (
        entry_toolset as entry_toolset,
    )
    from ._gate import (
        CallGate as CallGate,
    )
    from ._gate import (
        GatedCall as GatedCall,
    )
    from ._lending import (
        GatedToolset as GatedToolset,
    )
    from ._lending import (
        Lending as Lending,
    )
    from ._lending import (
        LentGroup as LentGroup,
    )
    from ._lending import (
        LentToolset as LentToolset,
    )
    from ._lending import (
        current_run_context as current_run_context,
    )
    from ._live import (
        ApprovalNotPending as ApprovalNotPending,
    )
    from ._live import (
        GuardedHandler as GuardedHandler,
    )
    from ._live import (
        LiveRun as LiveRun,
    )
    from ._live import (
        open_stream as open_stream,
    )
    from ._plan import (
        CapturablePerRunWarning as CapturablePerRunWarning,
    )
    from ._plan import (
        Loaded as Loaded,
    )
    from ._plan import (
        ToolsetSource as ToolsetSource,
    )
    from ._run_scope import (
        RunHost as RunHost,
    )
    from ._run_scope import (
        RunScope as RunScope,
    )
    from ._runtime import (
        Runtime as Runtime,
    )
    from ._servers import (
        owned as owned,
    )
    from ._servers import (
        owning as owning,
    )
    from ._servers import (
        start_servers as start_servers,
    )

_EXPORTS: dict[str, tuple[str, ...]] = {
    "_call_scope": (
        "CallHost",
        "CallScope",
        "Entry",
        "current_scope",
    ),
    "_entries": (
        "AgentEntry",
        "FunctionEntry",
        "entry",
        "entry_toolset",
    ),
    "_gate": (
        "CallGate",
        "GatedCall",
    ),
    "_lending": (
        "GatedToolset",
        "Lending",
        "LentGroup",
        "LentToolset",
        "current_run_context",
    ),
    "_live": (
        "ApprovalNotPending",
        "GuardedHandler",
        "LiveRun",
        "open_stream",
    ),
    "_plan": (
        "CapturablePerRunWarning",
        "Loaded",
        "ToolsetSource",
    ),
    "_run_scope": (
        "RunHost",
        "RunScope",
    ),
    "_runtime": ("Runtime",),
    "_servers": (
        "owned",
        "owning",
        "start_servers",
    ),
}
"""Each private module of the room, and the names it gives the other rooms."""

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
