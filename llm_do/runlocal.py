"""`RunLocalSingleton`: a per-run provider whose instances nothing can keep alive after the run.

A plain `ContextLocalSingleton` stores its instance in a `ContextVar`, so every context snapshot
taken during a run (a `call_later` timer a connection pool arms, a task, an executor job) keeps
that instance alive for as long as the snapshot lives. A `RunLocalSingleton` stores its
instance in the run's `RunBox` instead: snapshots hold the box, and the run empties the box
when it ends.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

from dependency_injector import providers

from .errors import ScopeError

__all__ = ["RunBox", "RunLocalSingleton", "open_run_box"]


class RunBox:
    """The instances of every `RunLocalSingleton` for one run; emptied when the run ends."""

    __slots__ = ("values",)

    def __init__(self) -> None:
        self.values: dict[providers.Provider[Any], Any] | None = {}

    def close(self) -> None:
        """Forget every instance: snapshots taken during the run now hold an empty box."""
        if self.values is not None:
            self.values.clear()  # a pending async initialisation may still hold the dict
        self.values = None


_CURRENT: contextvars.ContextVar[RunBox | None] = contextvars.ContextVar("llm_do.run_box", default=None)


def open_run_box() -> RunBox:
    """Give the current context (a run's own task) a fresh box; the caller closes it at run end."""
    box = RunBox()
    _CURRENT.set(box)
    return box


class RunLocalSingleton(providers.ContextLocalSingleton[Any]):
    """One instance per `Runtime.run`, shared by every call of that run, forgotten when it ends.

    Declare it like a `ContextLocalSingleton` (`audit = RunLocalSingleton(Audit, ...)`). Inside a
    run every resolution gives the run's instance, in parallel tool calls and nested calls too.
    Resolving it outside a run, or after its run ended (in a callback the run scheduled), raises
    `ScopeError`: read a finished run's instances from `RunResult.per_run` instead.
    """

    def _provide(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        box = _CURRENT.get()
        values = None if box is None else box.values
        if values is None:
            raise self._outside_run(box is not None)
        try:
            return values[self]
        except KeyError:
            pass
        # The base class caches in its own ContextVar; let it do so in a throwaway copy.
        made = contextvars.copy_context().run(_base_provide, self, args, kwargs)
        values[self] = made
        if isinstance(made, asyncio.Future):
            made.add_done_callback(lambda future: _settled(values, self, future))
        return made

    def reset(self) -> Any:
        """Forget the current run's instance (the next resolution in this run builds a new one)."""
        box = _CURRENT.get()
        if box is not None and box.values is not None:
            box.values.pop(self, None)
        return super().reset()

    def _outside_run(self, ended: bool) -> ScopeError:
        made = getattr(self.provides, "__qualname__", repr(self.provides))
        when = "after its run ended (in a callback or task the run started)" if ended else "outside any run"
        return ScopeError(
            f"RunLocalSingleton({made}) was resolved {when}; per-run objects exist only while their run "
            "does. Resolve it inside Runtime.run, or read a finished run's instance from "
            "RunResult.per_run (or llm_do.run_report(error).per_run when the run failed)."
        )


_base_provide: Any = getattr(providers.ContextLocalSingleton, "_provide")  # noqa: B009 (untyped Cython method)


def _settled(
    values: dict[providers.Provider[Any], Any], provider: providers.Provider[Any], future: asyncio.Future[Any]
) -> None:
    """An async initialisation finished: keep the instance, or forget the failure so the next use retries."""
    if values.get(provider) is not future:
        return
    if future.cancelled() or future.exception() is not None:
        del values[provider]
    else:
        values[provider] = future.result()
