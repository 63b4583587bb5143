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

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._box import (
        CURRENT_BOX as CURRENT_BOX,
        Box as Box,
        current_box as current_box,
        open_run_box as open_run_box,
        session_context as session_context,
    )
    from ._bus import (
        CURRENT_SINK as CURRENT_SINK,
        Adopted as Adopted,
        CallTag as CallTag,
        Event as Event,
        FinalizerFailed as FinalizerFailed,
        HandedOver as HandedOver,
        Observer as Observer,
        Sink as Sink,
        TeardownEnded as TeardownEnded,
    )
    from ._owner import (
        ScopeOwner as ScopeOwner,
        Spec as Spec,
    )
    from ._scope import (
        NoPublicConstructor as NoPublicConstructor,
        Scope as Scope,
    )
    from ._tasks import (
        SystemTasks as SystemTasks,
        SystemTimeout as SystemTimeout,
        built as built,
        dropped as dropped,
        is_awaitable as is_awaitable,
        side_by_side as side_by_side,
        system_task as system_task,
        system_timer as system_timer,
        wait_out as wait_out,
    )
    from ._teardown import (
        HandleMap as HandleMap,
        Teardown as Teardown,
        logger as logger,
        never_closed as never_closed,
        no_op_context as no_op_context,
    )
    from ._thread import (
        RunThread as RunThread,
        current_run_thread as current_run_thread,
        home_of as home_of,
        on_run_thread as on_run_thread,
    )
    from ._tracking import (
        Adoption as Adoption,
        Tracker as Tracker,
        trackers as trackers,
    )

_EXPORTS: dict[str, tuple[str, ...]] = {
    "_box": (
        "Box",
        "CURRENT_BOX",
        "current_box",
        "open_run_box",
        "session_context",
    ),
    "_bus": (
        "Adopted",
        "CURRENT_SINK",
        "CallTag",
        "Event",
        "FinalizerFailed",
        "HandedOver",
        "Observer",
        "Sink",
        "TeardownEnded",
    ),
    "_owner": (
        "ScopeOwner",
        "Spec",
    ),
    "_scope": (
        "NoPublicConstructor",
        "Scope",
    ),
    "_tasks": (
        "SystemTasks",
        "SystemTimeout",
        "built",
        "dropped",
        "is_awaitable",
        "side_by_side",
        "system_task",
        "system_timer",
        "wait_out",
    ),
    "_teardown": (
        "HandleMap",
        "Teardown",
        "logger",
        "never_closed",
        "no_op_context",
    ),
    "_thread": (
        "RunThread",
        "current_run_thread",
        "home_of",
        "on_run_thread",
    ),
    "_tracking": (
        "Adoption",
        "Tracker",
        "trackers",
    ),
}
"""Each private module of the room, and the names it gives the other rooms."""

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
