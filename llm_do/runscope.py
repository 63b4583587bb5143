"""`RunScope`: one top-level run's shared state and the per-run objects it owns."""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry.trace import Tracer

from .errors import ScopeError
from .lifecycle import Teardown
from .run import RunState
from .runlocal import RunBox
from .scopes import ToolsetSpec

__all__ = ["RunScope"]


class RunScope:
    """One run: its `RunState`, the teardown of its per-run objects, and the box its
    `RunLocalSingleton`s fill. `close()` forgets all of it, so that nothing a callback or task
    captured during the run can reach the run's objects afterwards."""

    __slots__ = ("_cache", "_state", "box", "per_run", "teardown", "tracer")

    def __init__(self, teardown: Teardown, box: RunBox) -> None:
        self.teardown = teardown
        self.box = box
        self.per_run: dict[str, Any] = {}
        """Per-run objects by provider (or toolset) name, reported to the caller."""
        self._state: RunState | None = None
        self._cache: dict[ToolsetSpec, asyncio.Future[Any]] = {}
        self.tracer: Tracer | None = None
        """Where the run's calls record their spans; None when tracing is off."""

    @property
    def state(self) -> RunState:
        state = self._state
        if state is None:
            raise ScopeError("this run has ended (or not started): its state is gone")
        return state

    @state.setter
    def state(self, state: RunState) -> None:
        self._state = state

    async def acquire(self, spec: ToolsetSpec, label: str, name: str) -> Any:
        """The run's one instance of a per-run spec, created on first use and owned by the run."""
        pending = self._cache.get(spec)
        if pending is not None:  # made, or being made by a parallel call of this run
            return pending.result() if pending.done() else await asyncio.shield(pending)
        pending = self._cache[spec] = asyncio.get_running_loop().create_future()
        try:
            obj = await spec.create()
            if await self.teardown.adopt(obj, label):
                self.per_run.setdefault(name, obj)
        except BaseException as error:
            del self._cache[spec]  # the next use tries again
            if isinstance(error, asyncio.CancelledError):
                pending.cancel()
            else:
                pending.set_exception(error)
                pending.exception()  # parallel waiters re-raise it; nobody else need retrieve it
            raise
        pending.set_result(obj)
        return obj

    def close(self) -> None:
        """Forget the run's objects (after their teardown): the box, the cache and the state."""
        self.box.close()
        self._cache.clear()
        self._state = None
