"""`ScopeOwner`: one scope level (global, session, run or call), with one shape for every level.

A call scope asks the owner of a spec's scope (`find`) for the spec's object, made once per level:
a call builds a fresh one each time; a run or session caches futures, so parallel first uses make
one; the runtime asks the spec each time (a `Singleton` is its own cache, so an override made after
load is honoured) and adopts what it returns once, by identity, under a lock, unless its provider releases it
(a `Resource`, which the container shuts down).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from typing import Any, Protocol

from ._bus import Adopted, Sink, TeardownEnded
from ._scope import Scope
from ._tasks import built
from ._teardown import Teardown


class Spec(Protocol):
    """What an owner makes an object from (`llm_do.Spec`): a factory, and hashable, since a run or a
    session makes one object per spec."""

    @property
    def factory(self) -> Callable[[], Any]: ...

    @property
    def released_by_provider(self) -> bool:
        """Whether what the factory gives is released by its provider (a `Resource`), not by the scope."""
        ...

    def __hash__(self) -> int: ...


_LEVELS = {Scope.PER_CALL.value: 0, Scope.PER_RUN.value: 1, Scope.PER_SESSION.value: 2, Scope.GLOBAL.value: 3}
"""Each scope's place, innermost first (by value: an enum member's hash is a Python-level call)."""


class ScopeOwner:
    """The objects one scope level owns: made on demand, released when it closes, never masking errors."""

    __slots__ = ("_cache", "_late_cancel", "_level", "_lock", "context", "named", "parent", "scope", "sink", "teardown")

    def __init__(
        self,
        scope: Scope,
        timeout: float,
        parent: ScopeOwner | None = None,
        *,
        sink: Sink | None = None,
        cache: dict[Spec, asyncio.Future[Any]] | None = None,
        lock: asyncio.Lock | None = None,
        context: Callable[[], contextvars.Context] | None = None,
        where: str = "",
        late_cancel: bool = True,
    ) -> None:
        """One level's owner: what differs per level is given here (trio's `Nursery`, dishka's container).

        `cache`: where a run or a session keeps the future of each spec's object (parallel first uses make one);
        None: made each time (a call). `lock`: held while the runtime adopts a global by identity; None: no lock.
        `context`: where this level makes its objects (a session's: a context of no run); None: the asking call's.
        `where`: whose objects these are, in a failed cleanup's log. `late_cancel`: see `close`."""
        self.scope = scope
        self._level = _LEVELS[scope._value_]
        self.parent = parent
        self.teardown = Teardown(timeout, where)
        self.sink = sink
        """Where this level announces what it releases; None when nobody observes it."""
        self.context = context
        self.named: dict[str, Any] = {}
        """Objects adopted under a name (a provider's or a toolset's), first one per name: reported to callers."""
        self._cache = cache
        self._lock = lock
        self._late_cancel = late_cancel

    def find(self, scope: Scope) -> ScopeOwner:
        """The outermost of this owner and its parents that does not outlive `scope`: the owner of `scope`,
        or, when there is none, the one that stands for it (a run given no session is its own session)."""
        level = _LEVELS[scope._value_]
        owner = self
        while owner.parent is not None and owner.parent._level <= level:
            owner = owner.parent
        return owner

    async def acquire(self, spec: Spec, label: str, name: str, sink: Sink | None) -> Any:
        """This level's object of `spec`, adopted here; `sink` hears the adoption (the asking call's)."""
        if self._cache is not None:
            return await self._cached(spec, label, name, sink)
        if self._lock is not None:
            obj = await built(spec.factory())
            if spec.released_by_provider:  # a `Resource`'s: closed by the container's `shutdown_resources()`
                return obj
            async with self._lock:  # a second caller waits until the first has entered it
                await self.adopt(obj, label, None, sink)
            return obj
        obj = await built(spec.factory())
        entering = self.teardown.register(obj, label)
        if sink is not None:
            sink.emit(Adopted(self, self.scope, obj, label))
        if entering is not None:
            await entering
        return obj

    async def adopt(self, obj: object, label: str, name: str | None, sink: Sink | None) -> bool:
        """Enter `obj` and own its release; False when this level already owns it."""
        teardown = self.teardown
        if teardown.owns(obj):
            return False
        entering = teardown.register(obj, label)
        if sink is not None:
            sink.emit(Adopted(self, self.scope, obj, label))
        if entering is not None:
            await entering
        if name is not None:
            self.name(name, obj)
        return True

    async def _cached(self, spec: Spec, label: str, name: str, sink: Sink | None) -> Any:
        cache = self._cache
        assert cache is not None
        pending = cache.get(spec)
        if pending is not None:  # made, or being made by a parallel call
            return pending.result() if pending.done() else await asyncio.shield(pending)
        loop = asyncio.get_running_loop()
        pending = cache[spec] = loop.create_future()
        making = self._make(spec, label, name, sink)
        context = self.context
        task = None if context is None else loop.create_task(making, context=context())
        try:
            obj = await (making if task is None else task)
        except BaseException as error:
            if task is not None and task.done() and not task.cancelled() and task.exception() is None:
                # made and adopted, though the caller was cancelled before it resumed: it is this level's now,
                # and the next use gets it (not a second one, this one left running until the level closes)
                pending.set_result(task.result())
                raise
            del cache[spec]  # the next use tries again
            if isinstance(error, asyncio.CancelledError):
                pending.cancel()
            else:
                pending.set_exception(error)
                pending.exception()  # parallel waiters re-raise it; nobody else need retrieve it
            raise
        pending.set_result(obj)
        return obj

    async def _make(self, spec: Spec, label: str, name: str, sink: Sink | None) -> Any:
        obj = await built(spec.factory())
        await self.adopt(obj, label, name, sink)
        return obj

    def name(self, name: str, obj: object) -> None:
        """Report `obj` under `name` (first one per name) without owning it: an object an override gives."""
        self.named.setdefault(name, obj)

    async def close(self, exc: BaseException | None, sink: Sink | None = None) -> None:
        """Release everything this level owns, in reverse order, and forget it (its named objects too).

        A cancellation that arrives during the teardown of a level whose body ended well (`exc` None) is raised
        once the teardown is over, as if it had arrived after it (trio's nursery defers it the same way). The one
        exception is a level closed by the runtime's own work, outside any run (`late_cancel=False`: a session,
        in its system task; the runtime's globals, at its close), where no body waits for the level's outcome.
        `sink` hears the teardown when it is not this level's own (the runtime's background observers). A stop
        request a finalizer raised (`KeyboardInterrupt`, `SystemExit`) is raised once the whole teardown is over."""
        sink = self.sink if sink is None else sink
        try:
            interrupted = await self.teardown.close(exc, sink)  # raises a stop request a finalizer raised, at the end
        finally:
            if self._cache is not None:
                self._cache.clear()
            self.named = {}
            if sink is not None:
                sink.emit(TeardownEnded(self))
        if interrupted and exc is None and self._late_cancel:
            raise asyncio.CancelledError

    def __repr__(self) -> str:
        return f"ScopeOwner({self.scope})"
