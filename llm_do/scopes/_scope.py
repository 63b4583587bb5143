"""`Scope`: the four lifetimes a resource can have."""

from __future__ import annotations

import enum

__all__ = ["Scope"]


class Scope(enum.Enum):
    """The lifetime of a resource."""

    GLOBAL = "global"
    """Shared by every run; torn down when the runtime closes."""
    PER_SESSION = "per_session"
    """One per session (a conversation, across its runs); a run given no session is a session of its own."""
    PER_RUN = "per_run"
    """One per top-level run, shared by all of its nested calls."""
    PER_CALL = "per_call"
    """One per entry invocation; a nested call gets a fresh one."""

    def __str__(self) -> str:
        return self.value
