"""The core every run goes through: the `Runtime` that launches runs, what it resolves at load, the run's
scope, each call's scope, entries (agents and functions), how a call lends its toolsets to pydantic-ai, the gate
that applies approvals to each tool call, and live runs.

May import: errors, scopes, files, approvals, guards, di, results, events, toolkit, sessions, tracing, mcp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._call_scope import (
        CallScope as CallScope,
        current_scope as current_scope,
    )
    from ._entries import (
        AgentEntry as AgentEntry,
        FunctionEntry as FunctionEntry,
        entry as entry,
        entry_toolset as entry_toolset,
        made_agent as made_agent,
    )
    from ._entry import (
        CallHost as CallHost,
        Entry as Entry,
        EntryPlan as EntryPlan,
        ToolsetUse as ToolsetUse,
    )
    from ._gate import (
        CallGate as CallGate,
        GatedCall as GatedCall,
    )
    from ._lending import (
        GatedToolset as GatedToolset,
        Lending as Lending,
        LentGroup as LentGroup,
        LentToolset as LentToolset,
    )
    from ._live import (
        ApprovalNotPending as ApprovalNotPending,
        GuardedHandler as GuardedHandler,
        LiveRun as LiveRun,
        OnEnd as OnEnd,
        Outcome as Outcome,
        open_stream as open_stream,
    )
    from ._made import (
        KEEPS as KEEPS,
        MAX_MADE as MAX_MADE,
        Keep as Keep,
        make_agent as make_agent,
    )
    from ._plan import (
        GlobalScope as GlobalScope,
        Plan as Plan,
        models_given_later as models_given_later,
    )
    from ._provider import (
        RuntimeResource as RuntimeResource,
    )
    from ._run_scope import (
        Globals as Globals,
        RunHost as RunHost,
        RunScope as RunScope,
    )
    from ._runtime import (
        Runtime as Runtime,
    )
    from ._servers import (
        owned as owned,
        owning as owning,
        start_servers as start_servers,
    )
    from ._usage import (
        usage_of as usage_of,
    )

_EXPORTS: dict[str, tuple[str, ...]] = {
    "_call_scope": (
        "CallScope",
        "current_scope",
    ),
    "_entries": (
        "AgentEntry",
        "FunctionEntry",
        "entry",
        "entry_toolset",
        "made_agent",
    ),
    "_entry": (
        "CallHost",
        "Entry",
        "EntryPlan",
        "ToolsetUse",
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
    ),
    "_live": (
        "ApprovalNotPending",
        "GuardedHandler",
        "LiveRun",
        "OnEnd",
        "Outcome",
        "open_stream",
    ),
    "_made": (
        "KEEPS",
        "MAX_MADE",
        "Keep",
        "make_agent",
    ),
    "_plan": (
        "GlobalScope",
        "Plan",
        "models_given_later",
    ),
    "_provider": ("RuntimeResource",),
    "_run_scope": (
        "Globals",
        "RunHost",
        "RunScope",
    ),
    "_runtime": ("Runtime",),
    "_servers": (
        "owned",
        "owning",
        "start_servers",
    ),
    "_usage": ("usage_of",),
}
"""Each private module of the room, and the names it gives the other rooms."""

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
