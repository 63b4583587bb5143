"""The scopes room."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._owner import (
        ScopeOwner as ScopeOwner,
    )
    from ._teardown import (
        Teardown as Teardown,
    )
    from ._teardown import (
        logger as logger,
    )
    from ._teardown import (
        wait_out as wait_out,
    )
    from ._tracking import (
        Adoption as Adoption,
    )
    from ._tracking import (
        Tracker as Tracker,
    )
    from ._tracking import (
        trackers as trackers,
    )

_EXPORTS: dict[str, tuple[str, ...]] = {
    "_owner": ("ScopeOwner",),
    "_teardown": (
        "Teardown",
        "logger",
        "wait_out",
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
