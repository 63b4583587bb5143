"""Teardown that runs every finalizer in reverse order and never masks the body's outcome."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ._bus import FinalizerFailed, Sink
from ._tasks import is_awaitable

__all__ = ["HandleMap", "Teardown", "logger", "no_op_context"]

logger = logging.getLogger("llm_do")

Finalizer = Callable[[BaseException | None], object]
"""Called with the body's exception (or None); may return an awaitable."""

_NO_OP_ENTERS: set[object] = set()
_NO_OP_EXITS: set[object] = set()


def no_op_context(cls: type) -> None:
    """Declare that `cls.__aenter__` and `cls.__aexit__` do nothing (pydantic-ai's `AbstractToolset`'s): objects
    whose class keeps them are neither entered nor exited. Declare it before any such object is adopted."""
    _NO_OP_ENTERS.add(cls.__aenter__)  # type: ignore[attr-defined]
    _NO_OP_EXITS.add(cls.__aexit__)  # type: ignore[attr-defined]
    _PROTOCOLS.clear()


class HandleMap:
    """Base of a map of open handles (`llm_do.Handles`): the scope that releases an object holding one (as an
    attribute) closes the handles still open in it, rolling back what they hold."""

    __slots__ = ()

    def __len__(self) -> int:
        raise NotImplementedError

    async def close_all(self) -> None:
        """Release every open handle (rolled back, never committed)."""
        raise NotImplementedError


class Teardown:
    """Objects owned by one scope, with the finalizers that release them.

    `adopt` enters an object (`__aenter__`) and registers its release: forgotten handles are
    closed, then `__aexit__` runs with the body's exception, then `cleanup()`. `close` runs
    every registered finalizer in reverse order, each at most `timeout` seconds, shielded from
    a second cancellation; failures are logged on the `llm_do` logger (and announced to the
    scope's observers) and never raised.
    """

    __slots__ = ("_finalizers", "_owned", "_unentered", "timeout", "where")

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.where = ""
        """Whose objects these are, added to every failure logged (`of session 'ada'`); empty: said by the label."""
        self._finalizers: list[tuple[str, Finalizer]] = []
        self._owned: set[int] = set()
        self._unentered: set[int] = set()
        """Objects that failed to enter and whose `cleanup()` is registered: entered again, it is not registered twice
        (the finalizer keeps each alive, so its id stays its own)."""

    def owns(self, obj: object) -> bool:
        """Whether `obj` is registered here already."""
        return id(obj) in self._owned

    def register(self, obj: object, label: str) -> Awaitable[None] | None:
        """Register the release of `obj` (not owned here yet). Returns what enters it (`__aenter__`),
        to await, if it has one: its exit and handle release are registered once it has entered.

        An object that fails to enter is not owned: its `cleanup()` still runs when the scope closes (it
        was built), and the next adoption of the same object (a session's or the runtime's, kept by its
        provider) enters it again instead of handing it out unentered."""
        key = id(obj)
        self._owned.add(key)
        enters, exits, cleans, has_dict = _protocol(type(obj))
        cleaned = cleans or (has_dict and callable(vars(obj).get("cleanup")))
        if cleaned and key not in self._unentered:
            cleanup = obj.cleanup  # type: ignore[attr-defined]
            self._finalizers.append((label, lambda _exc: cleanup()))
        if enters:
            return self._enter(obj, label, has_dict, cleaned)
        self._registered(obj, label, exits, has_dict)
        return None

    async def _enter(self, obj: Any, label: str, has_dict: bool, cleaned: bool) -> None:
        try:
            await obj.__aenter__()
        except BaseException:
            self._owned.discard(id(obj))
            if cleaned:
                self._unentered.add(id(obj))
            raise
        self._registered(obj, label, True, has_dict)

    def _registered(self, obj: object, label: str, exits: bool, has_dict: bool) -> None:
        if exits:
            self._finalizers.append((label, lambda exc: _aexit(obj, exc)))
        if has_dict:
            self._finalizers.append((label, lambda _exc: _close_forgotten_handles(obj)))

    async def close(self, exc: BaseException | None, sink: Sink | None = None) -> bool:
        """Run and forget every finalizer; True when a cancellation arrived meanwhile. Failures are
        announced to `sink`, when the scope is observed."""
        interrupted = False
        finalizers, self._finalizers = self._finalizers, []
        self._owned.clear()
        if self._unentered:
            self._unentered.clear()
        where = self.where
        while finalizers:
            label, finalizer = finalizers.pop()
            if where:
                label = f"{label} of {where}"
            try:
                result = finalizer(exc)
            except Exception as error:
                _failed(label, error, sink)
                continue
            if (
                result is not None
                and is_awaitable(result)
                and await _await_finalizer(label, result, self.timeout, sink)
            ):
                interrupted = True
        return interrupted


def _aexit(obj: Any, exc: BaseException | None) -> Any:
    if exc is None:
        return obj.__aexit__(None, None, None)
    return obj.__aexit__(type(exc), exc, exc.__traceback__)


def _close_forgotten_handles(obj: object) -> Any:
    for value in vars(obj).values():
        if isinstance(value, HandleMap) and value:
            return _close_all(obj)
    return None


async def _close_all(obj: object) -> None:
    for value in list(vars(obj).values()):
        if isinstance(value, HandleMap):
            await value.close_all()


_PROTOCOLS: dict[type, tuple[bool, bool, bool, bool]] = {}


def _protocol(cls: type) -> tuple[bool, bool, bool, bool]:
    """(enter, exit, cleanup, has a __dict__) for instances of `cls`, worked out once per class."""
    known = _PROTOCOLS.get(cls)
    if known is None:
        aexit = getattr(cls, "__aexit__", None)
        aenter = getattr(cls, "__aenter__", None)
        exits = aexit is not None and aenter is not None and aexit not in _NO_OP_EXITS
        enters = exits and aenter not in _NO_OP_ENTERS
        known = _PROTOCOLS[cls] = (enters, exits, callable(getattr(cls, "cleanup", None)), cls.__dictoffset__ != 0)
    return known


async def _await_finalizer(label: str, result: Any, budget: float, sink: Sink | None) -> bool:
    """Await an async finalizer for at most `budget` seconds; True if a cancellation arrived meanwhile."""
    task: asyncio.Future[Any] = asyncio.ensure_future(result)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + budget
    interrupted = False
    while not task.done():
        remaining = deadline - loop.time()
        if remaining <= 0:
            task.cancel()
            task.add_done_callback(_consume)
            logger.error("cleanup of %s did not finish within %ss and was cancelled", label, budget)
            if sink is not None:
                sink.emit(FinalizerFailed(label, TimeoutError(f"did not finish within {budget}s and was cancelled")))
            return interrupted
        try:
            await asyncio.wait((task,), timeout=remaining)
        except asyncio.CancelledError:
            interrupted = True  # keep going: the remaining finalizers must still run
    failure = None if task.cancelled() else task.exception()
    if failure is not None:
        _failed(label, failure, sink)
    return interrupted


def _failed(label: str, error: BaseException, sink: Sink | None) -> None:
    logger.error("cleanup of %s failed", label, exc_info=error)
    if sink is not None:
        sink.emit(FinalizerFailed(label, error))


def _consume(task: asyncio.Future[Any]) -> None:
    failure = None if task.cancelled() else task.exception()
    if failure is not None:
        logger.error("cleanup failed after its time budget ran out", exc_info=failure)
