"""The files room."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._attachments import (
        METADATA_KEY as METADATA_KEY,
    )
    from ._attachments import (
        TAKES_ATTACHMENTS as TAKES_ATTACHMENTS,
    )
    from ._attachments import (
        Attachment as Attachment,
    )
    from ._attachments import (
        AttachmentError as AttachmentError,
    )
    from ._attachments import (
        AttachmentInfo as AttachmentInfo,
    )
    from ._attachments import (
        check_call as check_call,
    )
    from ._attachments import (
        check_count as check_count,
    )
    from ._attachments import (
        check_model as check_model,
    )
    from ._attachments import (
        detect_media_type as detect_media_type,
    )
    from ._attachments import (
        names_in as names_in,
    )
    from ._attachments import (
        normal_name as normal_name,
    )
    from ._attachments import (
        prompt_with as prompt_with,
    )
    from ._confine import (
        ALLOWED_PATHS as ALLOWED_PATHS,
    )
    from ._confine import (
        MAX_NAME_BYTES as MAX_NAME_BYTES,
    )
    from ._confine import (
        MAX_PATH_CHARS as MAX_PATH_CHARS,
    )
    from ._confine import (
        ConfinedRoot as ConfinedRoot,
    )
    from ._confine import (
        PathRefused as PathRefused,
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
}
"""Each private module of the room, and the names it gives the other rooms."""

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
