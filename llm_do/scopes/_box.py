"""Run and session boxes: where per-run and per-session objects live, so that no context snapshot keeps them.

asyncio copies the context into every task, callback and executor job started during a run, and such a
copy can outlive the run by minutes (a pool's idle timer). The context holds only the run's `Box`; the
run empties it when it ends, so a copy taken meanwhile then holds an empty box.
"""

from __future__ import annotations

import contextvars
from typing import Any


class Box:
    """The instances of every box-local provider of one run (or session); emptied when it ends."""

    __slots__ = ("overrides", "session", "thread", "values")

    def __init__(self, session: Box | None = None, overrides: Any = None, thread: Any = None) -> None:
        self.values: dict[object, Any] | None = {}
        self.session = session
        """A run's box: its session's box, where `SessionLocalSingleton`s live (None: the run is its own session)."""
        self.overrides: Any = overrides
        """The providers this run (or session) overrides (`llm_do.di`'s `Overrides`), if any."""
        self.thread: Any = thread
        """A run's box: the run's `RunThread`, for its sync tools (None: a session's box, or the run has ended)."""

    def close(self) -> None:
        """Forget every instance: snapshots taken meanwhile now hold an empty box."""
        if self.values is not None:
            self.values.clear()  # a pending async initialisation may still hold the dict
        self.values = None
        self.session = None
        self.overrides = None
        self.thread = None


CURRENT_BOX: contextvars.ContextVar[Box | None] = contextvars.ContextVar("llm_do.run_box", default=None)
"""The box of the run (or session) the current context belongs to."""


def current_box() -> Box | None:
    """The box of the run the current context belongs to (None outside any run)."""
    return CURRENT_BOX.get()


def session_context(session: Box) -> contextvars.Context:
    """A context of no run, for making a session's objects (`session`: its box): its per-session objects
    resolve there, per-run ones do not, and nothing of the run or caller that asked is in it, so the tasks
    and timers those objects start keep no run alive. (The box of a run given no session stands for its
    session.)"""
    box = Box(session)
    box.values = None  # no run's objects: only the session's
    context = contextvars.Context()
    context.run(CURRENT_BOX.set, box)
    return context


def open_run_box(session: Box | None = None, overrides: Any = None, thread: Any = None) -> Box:
    """Give the current context (a run's own task) a fresh box; the caller closes it (and `thread`) at run end."""
    box = Box(session, overrides, thread)
    CURRENT_BOX.set(box)
    return box
