"""Files read safely: attachments handed to agents, paths confined to a root, and the limits on both.

May import: errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._attachments import (
        METADATA_KEY as METADATA_KEY,
        TAKES_ATTACHMENTS as TAKES_ATTACHMENTS,
        Attachment as Attachment,
        AttachmentError as AttachmentError,
        AttachmentInfo as AttachmentInfo,
        check_call as check_call,
        check_count as check_count,
        check_model as check_model,
        detect_media_type as detect_media_type,
        names_in as names_in,
        normal_name as normal_name,
        prompt_with as prompt_with,
    )
    from ._confine import (
        ALLOWED_PATHS as ALLOWED_PATHS,
        MAX_NAME_BYTES as MAX_NAME_BYTES,
        MAX_PATH_CHARS as MAX_PATH_CHARS,
        ConfinedRoot as ConfinedRoot,
        PathRefused as PathRefused,
    )
    from ._limits import (
        AttachmentSettings as AttachmentSettings,
        FilesystemSettings as FilesystemSettings,
    )

_EXPORTS: dict[str, tuple[str, ...]] = {
    "_attachments": (
        "Attachment",
        "AttachmentError",
        "AttachmentInfo",
        "METADATA_KEY",
        "TAKES_ATTACHMENTS",
        "check_call",
        "check_count",
        "check_model",
        "detect_media_type",
        "names_in",
        "normal_name",
        "prompt_with",
    ),
    "_confine": (
        "ALLOWED_PATHS",
        "ConfinedRoot",
        "MAX_NAME_BYTES",
        "MAX_PATH_CHARS",
        "PathRefused",
    ),
    "_limits": (
        "AttachmentSettings",
        "FilesystemSettings",
    ),
}
"""Each private module of the room, and the names it gives the other rooms."""

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
