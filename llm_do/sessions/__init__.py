"""Sessions: one conversation across runs, opened by an id; its objects, approvals, history and usage, where
histories are kept (`HistoryStore`: in memory, PostgreSQL), and where its open questions wait (`Inbox`).

May import: errors, scopes, approvals, results.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._history import (
        HistoryConflict as HistoryConflict,
        HistoryError as HistoryError,
        HistoryStore as HistoryStore,
        InMemoryHistoryStore as InMemoryHistoryStore,
        StoredHistory as StoredHistory,
    )
    from ._inbox import (
        Held as Held,
        Inbox as Inbox,
        OpenQuestion as OpenQuestion,
        QuestionSource as QuestionSource,
    )
    from ._postgres import (
        PostgresHistoryStore as PostgresHistoryStore,
    )
    from ._registry import (
        SessionRegistry as SessionRegistry,
    )
    from ._session import (
        Session as Session,
        SessionBusy as SessionBusy,
        SessionError as SessionError,
        SessionHost as SessionHost,
        SessionRuntime as SessionRuntime,
    )

_EXPORTS: dict[str, tuple[str, ...]] = {
    "_history": (
        "HistoryConflict",
        "HistoryError",
        "HistoryStore",
        "InMemoryHistoryStore",
        "StoredHistory",
    ),
    "_inbox": ("Held", "Inbox", "OpenQuestion", "QuestionSource"),
    "_postgres": ("PostgresHistoryStore",),
    "_registry": ("SessionRegistry",),
    "_session": (
        "Session",
        "SessionBusy",
        "SessionError",
        "SessionHost",
        "SessionRuntime",
    ),
}
"""Each private module of the room, and the names it gives the other rooms."""

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
