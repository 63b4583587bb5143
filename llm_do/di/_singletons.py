"""`RunLocalSingleton` and `SessionLocalSingleton`: providers whose instances nothing can keep alive
after their run (or session).

A plain `ContextLocalSingleton` stores its instance in a `ContextVar`, so every context snapshot
taken during a run (a `call_later` timer a connection pool arms, a task, an executor job) keeps
that instance alive for as long as the snapshot lives. These providers store their instance in a
`Box` instead: the run's box, or its session's. Snapshots hold the box, and the run (or session)
empties it when it ends.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

from dependency_injector import providers

from .._compat import context_local_provide
from ..errors import ScopeError
from ..scopes._box import CURRENT_BOX, Box


class _BoxLocal(providers.ContextLocalSingleton[Any]):
    """A `ContextLocalSingleton` whose instance lives in a box of the current run."""

    _lifetime = "run"
    _in_session = False

    def _values(self, run: Box | None) -> dict[object, Any] | None:
        """Where this provider's instance lives in the current run: its box, or its session's."""
        if run is None:
            return None
        return ((run.session or run) if self._in_session else run).values

    def _provide(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        run = CURRENT_BOX.get()
        values = self._values(run)
        if values is None:
            raise self._outside(run)
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
        """Forget the current instance (the next resolution builds a new one)."""
        values = self._values(CURRENT_BOX.get())
        if values is not None:
            values.pop(self, None)
        return super().reset()

    def _outside(self, run: Box | None) -> ScopeError:
        made = getattr(self.provides, "__qualname__", repr(self.provides))
        lifetime = self._lifetime
        if run is not None and run.session is not None:  # (a session's context: its box has no run's objects)
            return ScopeError(
                f"{type(self).__name__}({made}) was resolved by a per-session object or a task it started, which "
                f"belong to no run; per-{lifetime} objects exist only in their {lifetime}. Resolve it inside "
                "Runtime.run, or make the object per-run too."
            )
        ended = run is not None
        when = f"after its {lifetime} ended (in a callback or task the run started)" if ended else "outside any run"
        threads = (
            ""
            if ended
            else " A thread started without the run's context is outside it too (loop.run_in_executor, "
            "threading.Thread): use asyncio.to_thread, or call the function through contextvars.copy_context().run."
        )
        return ScopeError(
            f"{type(self).__name__}({made}) was resolved {when}; per-{lifetime} objects exist only while their "
            f"{lifetime} does. Resolve it inside Runtime.run, or read a finished run's instance from "
            f"RunResult.per_run (or llm_do.run_report(error).per_run when the run failed).{threads}"
        )


class RunLocalSingleton(_BoxLocal):
    """One instance per `Runtime.run`, shared by every call of that run, forgotten when it ends.

    Declare it like a `ContextLocalSingleton` (`audit = RunLocalSingleton(Audit, ...)`). Inside a
    run every resolution gives the run's instance, in parallel tool calls and nested calls too.
    Resolving it outside a run, or after its run ended (in a callback the run scheduled), raises
    `ScopeError`: read a finished run's instances from `RunResult.per_run` instead.
    """


class SessionLocalSingleton(_BoxLocal):
    """One instance per session, shared by every run of that session, never seen by another session.

    Declare it like a `RunLocalSingleton` (`sandbox = SessionLocalSingleton(Sandbox, ...)`). It is made
    when the session's first run starts and torn down when the session closes, idles out, or the
    runtime closes. A run given no session is a session of its own: there it lives as long as the run.
    """

    _lifetime = "session"
    _in_session = True


_base_provide = context_local_provide()


def _settled(values: dict[object, Any], provider: providers.Provider[Any], future: asyncio.Future[Any]) -> None:
    """An async initialisation finished: keep the instance, or forget the failure so the next use retries."""
    if values.get(provider) is not future:
        return
    if future.cancelled() or future.exception() is not None:
        del values[provider]
    else:
        values[provider] = future.result()
