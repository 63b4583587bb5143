"""The di room."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._settings import (
        ApprovalMode as ApprovalMode,
    )
    from ._settings import (
        ApprovalOnDeny as ApprovalOnDeny,
    )
    from ._settings import (
        AttachmentSettings as AttachmentSettings,
    )
    from ._settings import (
        FilesystemSettings as FilesystemSettings,
    )
    from ._settings import (
        LlmDoSettings as LlmDoSettings,
    )
    from ._settings import (
        LogLevel as LogLevel,
    )
    from ._settings import (
        RuntimeConfig as RuntimeConfig,
    )
    from ._settings import (
        reveal as reveal,
    )
    from ._singletons import (
        Box as Box,
    )
    from ._singletons import (
        RunLocalSingleton as RunLocalSingleton,
    )
    from ._singletons import (
        SessionLocalSingleton as SessionLocalSingleton,
    )
    from ._singletons import (
        current_box as current_box,
    )
    from ._singletons import (
        open_run_box as open_run_box,
    )
    from ._singletons import (
        session_context as session_context,
    )
    from ._specs import (
        EntryPlan as EntryPlan,
    )
    from ._specs import (
        Scope as Scope,
    )
    from ._specs import (
        ToolsetSpec as ToolsetSpec,
    )
    from ._specs import (
        ToolsetUse as ToolsetUse,
    )
    from ._specs import (
        built as built,
    )
    from ._specs import (
        dropped as dropped,
    )
    from ._specs import (
        is_awaitable as is_awaitable,
    )
    from ._specs import (
        scope_of_provider as scope_of_provider,
    )

_EXPORTS: dict[str, tuple[str, ...]] = {
    "_settings": (
        "ApprovalMode",
        "ApprovalOnDeny",
        "AttachmentSettings",
        "FilesystemSettings",
        "LlmDoSettings",
        "LogLevel",
        "RuntimeConfig",
        "reveal",
    ),
    "_singletons": (
        "Box",
        "RunLocalSingleton",
        "SessionLocalSingleton",
        "current_box",
        "open_run_box",
        "session_context",
    ),
    "_specs": (
        "EntryPlan",
        "Scope",
        "ToolsetSpec",
        "ToolsetUse",
        "built",
        "dropped",
        "is_awaitable",
        "scope_of_provider",
    ),
}
"""Each private module of the room, and the names it gives the other rooms."""

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
