"""The core every run goes through: the `Runtime` that launches runs, what it resolves at load, the run's
scope, each call's scope, entries (agents and functions), how a call lends its toolsets to pydantic-ai, the gate
that applies approvals to each tool call, and live runs.

May import: errors, scopes, files, approvals, guards, di, results, events, toolkit, sessions, tracing, mcp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_imports

if TYPE_CHECKING:
    from ._call_scope import (
        current_scope as current_scope,
    )
    from ._entries import (
        entry_toolset as entry_toolset,
    )
    from ._live import (
        Outcome as Outcome,
    )
    from ._plan import (
        models_given_later as models_given_later,
    )
    from ._run_scope import (
        RunScope as RunScope,
    )
    from ._usage import (
        usage_of as usage_of,
    )

__getattr__, __dir__ = lazy_imports(globals())
