"""The bus: where scopes announce what happens in them, and who hears it.

Scopes, gates and handle maps announce what they do (a call started, an object was adopted, a handle was
opened) to the `Sink` of the call (or run) they belong to. A sink forwards each event to the run's
observers: tracing, leak tracking and a live stream are observers. The current call's sink is in the
context variable `CURRENT_SINK`, which is None when nobody observes the run: an unobserved run pays one
lookup where an event would be announced, and nothing more. A sink is emptied when its call ends, so that
a callback that captured the call's context afterwards reaches nothing. An observer that raises cannot
break the run (as trio's instruments): it is logged on the `llm_do` logger and hears nothing more of it.

The scopes' own bookkeeping (an object adopted, a teardown ended or failed, objects handed over) is
defined here; the run's vocabulary (calls, approvals, handles, streamed events) is `llm_do.events`.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol, cast

from ._scope import Scope

logger = logging.getLogger("llm_do")


@dataclass(frozen=True, slots=True)
class CallTag:
    """Which call an event belongs to: enough to place it in the run's call tree."""

    id: str
    """The call's id in its run (`call_1` is the top-level call)."""
    parent: str | None
    """The id of the call that started this one; None for the top-level call."""
    entry: str
    depth: int
    chain: tuple[str, ...]
    """Entry names from the top-level call down to this one."""
    tool_call_id: str | None
    """The parent's pydantic-ai tool call that started this call (an agent used as a tool); None for the
    top-level call and for calls made from Python (`CallScope.call_agent`)."""


class Event:
    """Base class of every event; `call` is the call it happened in (None: the run itself)."""

    __slots__ = ()
    call: CallTag | None


@dataclass(frozen=True, slots=True)
class Adopted(Event):
    """A scope took ownership of an object (it will release it when the scope ends)."""

    owner: object
    scope: Scope | None
    obj: object
    label: str
    call: None = None


@dataclass(frozen=True, slots=True)
class TeardownEnded(Event):
    """A scope released everything it owned."""

    owner: object
    call: None = None


@dataclass(frozen=True, slots=True)
class FinalizerFailed(Event):
    """Releasing an object failed, or took longer than its time budget (`error` is a `TimeoutError` then)."""

    label: str
    error: BaseException
    call: None = None


@dataclass(frozen=True, slots=True)
class HandedOver(Event):
    """A run's per-run objects were given to its caller in `holder` (its result or report)."""

    holder: object
    objs: tuple[object, ...]
    call: None = None


class Observer(Protocol):
    """Hears the events of the runs it observes. `notify` runs in the task where the event happened,
    synchronously: it must not block. One that raises is logged and hears nothing more of that run."""

    def notify(self, event: Event) -> None: ...


class Sink:
    """Where one call (or run) announces its events: its tag and the run's observers.

    A run's sink holds each observer in an `_Isolated` cell that its calls' sinks share (a call's sink is
    made from them), so an observer dropped for raising is dropped for the whole run."""

    __slots__ = ("call", "observers")

    def __init__(self, call: CallTag | None, observers: tuple[Observer, ...]) -> None:
        self.call = call
        for observer in observers:  # (a call's sink gets its run's cells: kept as they are)
            if type(observer) is not _Isolated:
                observers = tuple(held if type(held) is _Isolated else _Isolated(held) for held in observers)
                break
        self.observers = cast(tuple[_Isolated, ...], observers)

    def emit(self, event: Event) -> None:
        for held in self.observers:
            observer = held.observer
            if observer is not None:
                try:
                    observer.notify(event)
                except Exception:
                    held.drop(event)

    def close(self) -> None:
        """The call has ended: a context snapshot that still holds this sink reaches no observer."""
        self.observers = ()

    def __repr__(self) -> str:
        return f"Sink({self.call.id if self.call is not None else 'run'}, observers={len(self.observers)})"


class _Isolated:
    """One observer as the sinks of one run hold it: one that raises is logged and dropped, so that it cannot
    stop what announced the event (a teardown reporting a failed cleanup goes on to the next cleanup)."""

    __slots__ = ("observer",)

    def __init__(self, observer: Observer) -> None:
        self.observer: Observer | None = observer

    def notify(self, event: Event) -> None:
        observer = self.observer
        if observer is not None:
            try:
                observer.notify(event)
            except Exception:
                self.drop(event)

    def drop(self, event: Event) -> None:
        """The observer raised hearing `event` (the exception being handled): logged, and it hears no more."""
        observer, self.observer = self.observer, None
        logger.exception("observer %r raised on %s; it hears nothing more of this run", observer, type(event).__name__)


CURRENT_SINK: ContextVar[Sink | None] = ContextVar("llm_do_sink", default=None)
"""The sink of the call running in this context; None when nobody observes its run."""
