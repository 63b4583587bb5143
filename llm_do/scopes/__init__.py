"""Lifetimes, the one mechanism: scopes, the objects each level owns and their teardown, run and session boxes,
the event bus, the run's own thread for its sync tools, and the helpers for tasks that must not keep a run's
context.

Every scope level (global, session, run, call) is a `ScopeOwner`: it makes each spec's object once for its
level, enters it, and releases what it owns in reverse order when it closes (`Teardown`: on success, error
and cancellation, never masking the body's outcome). What happens is announced on the bus (`Sink`) to the
run's observers. Nothing here knows pydantic-ai or dependency-injector.

May import: errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_imports

if TYPE_CHECKING:
    from ._bus import (
        FinalizerFailed as FinalizerFailed,
    )
    from ._tasks import (
        SystemTasks as SystemTasks,
        SystemTimeout as SystemTimeout,
        dropped as dropped,
        side_by_side as side_by_side,
        system_task as system_task,
        system_timer as system_timer,
    )
    from ._tracking import (
        Adoption as Adoption,
        Tracker as Tracker,
        trackers as trackers,
    )

__getattr__, __dir__ = lazy_imports(globals())
