"""An opt-in record of the objects scopes adopt, for leak checks (`llm_do.testing.track_leaks`).

A `Tracker` is an observer of the scopes' events (`llm_do.events`). Off by default: a runtime
checks once per run whether `trackers` is empty, so tracking costs nothing then.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import weakref
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from ._bus import Adopted, Event, HandedOver, TeardownEnded
from ._scope import Scope

_ASYNCIO = str(Path(asyncio.__file__).parent)
_LIBRARY_DIRS = (str(Path(__file__).parents[1]), str(Path(contextlib.__file__).parent))  # llm_do itself
_LIBRARY_PARTS = ("pydantic_ai", "pydantic_graph", "dependency_injector", "<frozen ")


@dataclass(eq=False, slots=True)
class Adoption:
    """One object a scope adopted: what it is, who owns it, and the code that opened the scope."""

    ref: weakref.ref[Any] | None
    """A weak reference to the object; None when it cannot be weakly referenced."""
    type_name: str
    label: str
    """The owner's label, e.g. `toolset 'db' (per_call) of entry 'clerk'`."""
    scope: Scope | None
    opened_at: tuple[str, int, str] | None
    """(file, line, function) of the innermost user code in the task that opened the scope, if any."""
    ended: bool = False
    handed_to: weakref.ref[Any] | None = None
    """The `RunResult` or `RunReport` that gave it to the run's caller: alive by design while that is."""

    def handed_over(self) -> bool:
        return self.handed_to is not None and self.handed_to() is not None

    def obj(self) -> Any:
        return None if self.ref is None else self.ref()


class Tracker:
    """Adoptions recorded while this tracker is in `trackers`: an observer of the runs started meanwhile."""

    def __init__(self) -> None:
        self.adoptions: list[Adoption] = []
        self._running: dict[int, list[Adoption]] = {}

    def notify(self, event: Event) -> None:
        if isinstance(event, Adopted):
            try:
                ref: weakref.ref[Any] | None = weakref.ref(event.obj)
            except TypeError:
                ref = None
            adoption = Adoption(ref, type(event.obj).__qualname__, event.label, event.scope, _caller(sys._getframe(1)))
            self.adoptions.append(adoption)
            self._running.setdefault(id(event.owner), []).append(adoption)
        elif isinstance(event, TeardownEnded):
            for adoption in self._running.pop(id(event.owner), ()):
                adoption.ended = True
        elif isinstance(event, HandedOver):
            keys = {id(obj) for obj in event.objs}
            for adoption in self.adoptions:
                if adoption.ref is not None and id(adoption.ref()) in keys:
                    adoption.handed_to = weakref.ref(event.holder)


trackers: list[Tracker] = []
"""Trackers recording now (innermost last): each run started meanwhile reports to each of them."""


def _caller(frame: FrameType | None) -> tuple[str, int, str] | None:
    """The innermost frame of user code in the current task; None when the task has none."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(_ASYNCIO):
            return None  # the task's first frame is behind us: what follows is the event loop's caller
        if not filename.startswith(_LIBRARY_DIRS) and not any(part in filename for part in _LIBRARY_PARTS):
            return filename, frame.f_lineno, frame.f_code.co_name
        frame = frame.f_back
    return None
