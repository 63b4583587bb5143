"""Sessions: one conversation across runs, opened by an id; its objects, approvals, history and usage, where
histories are kept (`HistoryStore`: in memory, PostgreSQL), and where its open questions wait (`Inbox`).

May import: errors, scopes, approvals, results.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_imports

if TYPE_CHECKING:
    from ._inbox import (
        OpenQuestion as OpenQuestion,
    )

__getattr__, __dir__ = lazy_imports(globals())
