"""Files read safely: attachments handed to agents, paths confined to a root, and the limits on both.

May import: errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_imports

if TYPE_CHECKING:
    from ._attachments import (
        METADATA_KEY as METADATA_KEY,
        TAKES_ATTACHMENTS as TAKES_ATTACHMENTS,
        check_call as check_call,
    )
    from ._confine import (
        ALLOWED_PATHS as ALLOWED_PATHS,
        ConfinedRoot as ConfinedRoot,
        PathRefused as PathRefused,
    )
    from ._limits import (
        FilesystemSettings as FilesystemSettings,
    )

__getattr__, __dir__ = lazy_imports(globals())
