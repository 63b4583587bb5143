"""Teardown that runs every finalizer in reverse order and never masks the body's outcome."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from ..errors import ScopeError
from ._bus import FinalizerFailed, Sink
from ._tasks import is_awaitable
from ._thread import home_of

logger = logging.getLogger("llm_do")

Finalizer = Callable[[BaseException | None], object]
"""Called with the body's exception (or None); may return an awaitable."""

_NO_OP_ENTERS: set[object] = set()
_NO_OP_EXITS: set[object] = set()
_NEVER_CLOSED: list[type] = []


def no_op_context(cls: type) -> None:
    """Declare that `cls.__aenter__` and `cls.__aexit__` do nothing (pydantic-ai's `AbstractToolset`'s): objects
    whose class keeps them are neither entered nor exited. Declare it before any such object is adopted."""
    _NO_OP_ENTERS.add(cls.__aenter__)  # type: ignore[attr-defined]
    _NO_OP_EXITS.add(cls.__aexit__)  # type: ignore[attr-defined]
    _PROTOCOLS.clear()


def never_closed(cls: type) -> None:
    """Declare that objects of `cls` and its subclasses are never released by their `close()` or `aclose()`
    (pydantic-ai's toolsets: a method of that name may be a tool). Declare it before any such object is adopted."""
    _NEVER_CLOSED.append(cls)
    _PROTOCOLS.clear()


class HandleMap:
    """Base of a map of open handles (`llm_do.Handles`): the scope that releases an object holding one (as an
    attribute) closes the handles still open in it, rolling back what they hold."""

    __slots__ = ()

    def __len__(self) -> int:
        raise NotImplementedError

    def releases(self) -> list[tuple[str, Callable[[], Awaitable[None]]]]:
        """(handle, release) for each open handle, newest first: `release()` rolls that one back (never commits)."""
        raise NotImplementedError


class Teardown:
    """Objects owned by one scope, with the finalizers that release them.

    `register` enters an object (`__aenter__`, else `__enter__`) and registers its release: forgotten handles
    are closed, then `__aexit__` (else `__exit__`) runs with the body's exception, then `cleanup()`; an object
    with none of these is released by its `aclose()`, else its `close()`. A sync `cleanup()` or `__exit__` of an
    object whose sync tools ran on its run's thread runs on that thread (`RunThread`). `close` runs
    every registered finalizer in reverse order, each at most `timeout` seconds, shielded from
    a second cancellation; failures are logged on the `llm_do` logger (and announced to the
    scope's observers) and never raised. A stop request (`KeyboardInterrupt`, `SystemExit`) is raised once
    every finalizer has run.
    """

    __slots__ = ("_finalizers", "_owned", "_unentered", "timeout", "where")

    def __init__(self, timeout: float, where: str = "") -> None:
        self.timeout = timeout
        self.where = where
        """Whose objects these are, added to every failure logged (`of session 'ada'`); empty: said by the label."""
        self._finalizers: list[tuple[str, Finalizer]] = []
        self._owned: set[int] = set()
        self._unentered: set[int] = set()
        """Objects that failed to enter and whose `cleanup()` is registered: entered again, it is not registered twice
        (the finalizer keeps each alive, so its id stays its own)."""

    def owns(self, obj: object) -> bool:
        """Whether `obj` is registered here already."""
        return id(obj) in self._owned

    def add(self, label: str, release: Callable[[], object]) -> None:
        """Register the release of something this scope does not adopt as an object (a `Resource`'s shutdown):
        `release()`, awaited if it returns an awaitable, under the same rules as every finalizer."""
        self._finalizers.append((label, lambda _exc: release()))

    def register(self, obj: object, label: str) -> Awaitable[None] | None:
        """Register the release of `obj` (not owned here yet). Returns what enters it (`__aenter__`),
        to await, if it has one: its exit and handle release are registered once it has entered.

        An object that fails to enter is not owned: its `cleanup()` still runs when the scope closes (it
        was built), and the next adoption of the same object (a session's or the runtime's, kept by its
        provider) enters it again instead of handing it out unentered. An object with an enter but no exit
        is refused (`ScopeError`, naming `label`): nothing could release it."""
        protocol = _protocol(type(obj))
        if protocol.refused is not None:
            raise ScopeError(f"{label}: {type(obj).__qualname__} {protocol.refused}")
        key = id(obj)
        self._owned.add(key)
        has_dict = protocol.has_dict
        cleaned = protocol.cleans or (has_dict and callable(vars(obj).get("cleanup")))
        if cleaned:
            if key not in self._unentered:
                cleanup = obj.cleanup  # type: ignore[attr-defined]
                self._finalizers.append((label, lambda _exc: _at_home(obj, cleanup)))
        elif protocol.closer is not None:
            close = getattr(obj, protocol.closer)
            self._finalizers.append((label, lambda _exc: close()))
        if protocol.enters is _ASYNC:
            return self._enter(obj, label, protocol.exits, has_dict, cleaned)
        if protocol.enters is _SYNC:
            try:
                obj.__enter__()  # type: ignore[attr-defined]
            except BaseException:
                self._not_entered(obj, cleaned)
                raise
        self._registered(obj, label, protocol.exits, has_dict)
        return None

    async def _enter(self, obj: Any, label: str, exits: str | None, has_dict: bool, cleaned: bool) -> None:
        try:
            await obj.__aenter__()
        except BaseException:
            self._not_entered(obj, cleaned)
            raise
        self._registered(obj, label, exits, has_dict)

    def _not_entered(self, obj: object, cleaned: bool) -> None:
        self._owned.discard(id(obj))
        if cleaned:
            self._unentered.add(id(obj))

    def _registered(self, obj: object, label: str, exits: str | None, has_dict: bool) -> None:
        if exits is _ASYNC:
            self._finalizers.append((label, lambda exc: _aexit(obj, exc)))
        elif exits is _SYNC:
            self._finalizers.append((label, lambda exc: _at_home(obj, lambda: _exit(obj, exc))))
        if has_dict:
            self._finalizers.append((label, _ForgottenHandles(obj)))

    async def close(self, exc: BaseException | None, sink: Sink | None = None) -> bool:
        """Run and forget every finalizer; True when a cancellation arrived meanwhile. Failures are
        announced to `sink`, when the scope is observed.

        A finalizer that raises a stop request (a `BaseException` that is neither an `Exception` nor a
        cancellation: `KeyboardInterrupt`, `SystemExit`) does not stop the others: the first such one is raised
        once every finalizer has run."""
        interrupted = False
        stop: BaseException | None = None
        finalizers, self._finalizers = self._finalizers, []
        self._owned.clear()
        if self._unentered:
            self._unentered.clear()
        where = self.where
        while finalizers:
            label, finalizer = finalizers.pop()
            if isinstance(finalizer, _ForgottenHandles):  # one finalizer per handle still open: a budget each
                finalizers += reversed(finalizer.each(label))
                continue
            if where:
                label = f"{label} of {where}"
            try:
                result = finalizer(exc)
            except Exception as error:
                _failed(label, error, sink)
                continue
            except asyncio.CancelledError as error:  # raised by a sync finalizer: its own failure, not a cancellation
                _failed(label, error, sink)
                continue
            except BaseException as error:
                stop = stop or error
                continue
            if result is not None and is_awaitable(result):
                cancelled, stopped = await _await_finalizer(label, result, self.timeout, sink)
                interrupted = interrupted or cancelled
                stop = stop or stopped
        if stop is not None:
            try:
                raise stop
            finally:
                stop = None
        return interrupted


def _at_home(obj: object, release: Callable[[], object]) -> object:
    """Call `release` (a sync `cleanup()`, an `__exit__`) of `obj` on its run's thread when `obj`'s sync tools ran
    there (what they opened is released where it was opened), else here."""
    thread = home_of(obj)
    if thread is None or inspect.iscoroutinefunction(release):
        return release()
    return _awaited(thread.submit(release))


async def _awaited(job: Awaitable[object]) -> None:
    result = await job
    if is_awaitable(result):  # a sync cleanup() that returned something to await
        await result  # type: ignore[misc]


def _aexit(obj: Any, exc: BaseException | None) -> Any:
    if exc is None:
        return obj.__aexit__(None, None, None)
    return obj.__aexit__(type(exc), exc, exc.__traceback__)


def _exit(obj: Any, exc: BaseException | None) -> None:
    if exc is None:
        obj.__exit__(None, None, None)
    else:
        obj.__exit__(type(exc), exc, exc.__traceback__)


class _ForgottenHandles:
    """The finalizer of the handles an object still has open: at teardown, one finalizer per handle."""

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj = obj

    def __call__(self, exc: BaseException | None) -> None:
        raise AssertionError("expanded by Teardown.close, never called")  # pragma: no cover

    def each(self, label: str) -> list[tuple[str, Finalizer]]:
        """A finalizer per open handle of the object's handle maps, in the order they run (newest first)."""
        found: list[tuple[str, Finalizer]] = []
        for value in list(vars(self.obj).values()):
            if isinstance(value, HandleMap) and value:
                for handle, release in value.releases():
                    found.append((f"{label}, forgotten handle {handle}", _released_by(release)))
        return found


def _released_by(release: Callable[[], Awaitable[None]]) -> Finalizer:
    return lambda _exc: release()


_ASYNC = "async"
_SYNC = "sync"


class _Protocol(NamedTuple):
    """How a scope releases instances of one class (see docs/toolset-state.md#the-cleanup-protocol)."""

    enters: str | None
    """`_ASYNC` (`__aenter__`), `_SYNC` (`__enter__`, when there is no async protocol) or None."""
    exits: str | None
    """`_ASYNC` (`__aexit__`), `_SYNC` (`__exit__`) or None; called with the scope's outcome."""
    cleans: bool
    """A `cleanup()` method, called after the exit."""
    closer: str | None
    """`aclose` or `close`: called when the class has none of the above."""
    has_dict: bool
    """Instances have a `__dict__`: their `Handles` are closed, and a `cleanup` of their own is called."""
    refused: str | None
    """Why instances cannot be adopted (an enter without an exit), said after the class's name."""


_PROTOCOLS: dict[type, _Protocol] = {}


def _protocol(cls: type) -> _Protocol:
    """The release protocol of instances of `cls`, worked out once per class."""
    known = _PROTOCOLS.get(cls)
    if known is not None:
        return known
    aenter, aexit = getattr(cls, "__aenter__", None), getattr(cls, "__aexit__", None)
    real_aenter = aenter is not None and aenter not in _NO_OP_ENTERS
    real_aexit = aexit is not None and aexit not in _NO_OP_EXITS
    refused = None
    if real_aenter or real_aexit:  # the async protocol wins over a sync one
        enters, exits = (_ASYNC if real_aenter else None), (_ASYNC if real_aexit else None)
        if aexit is None:
            refused = (
                "has __aenter__ but no __aexit__, so nothing could release it once entered; give it __aexit__ (or "
                "release it in a cleanup() method instead of __aenter__)"
            )
    else:
        enter, exit_ = getattr(cls, "__enter__", None), getattr(cls, "__exit__", None)
        enters, exits = (_SYNC if enter is not None else None), (_SYNC if exit_ is not None else None)
        if enter is not None and exit_ is None:
            refused = (
                "has __enter__ but no __exit__, so nothing could release it once entered; give it __exit__ (or "
                "release it in a cleanup() method instead of __enter__)"
            )
    cleans = callable(getattr(cls, "cleanup", None))
    closer = None
    if enters is None and exits is None and not cleans and not issubclass(cls, tuple(_NEVER_CLOSED)):
        closer = next((name for name in ("aclose", "close") if callable(getattr(cls, name, None))), None)
    known = _PROTOCOLS[cls] = _Protocol(enters, exits, cleans, closer, cls.__dictoffset__ != 0, refused)
    return known


class _Stopped(NamedTuple):
    """What a finalizer's task returns in place of raising a stop request (`KeyboardInterrupt`, `SystemExit`),
    which asyncio would otherwise raise out of the event loop, past the finalizers still to run."""

    error: BaseException


async def _stop_caught(result: Awaitable[Any]) -> Any:
    try:
        return await result
    except (KeyboardInterrupt, SystemExit) as error:
        return _Stopped(error)


async def _await_finalizer(
    label: str, result: Any, budget: float, sink: Sink | None
) -> tuple[bool, BaseException | None]:
    """Await an async finalizer for at most `budget` seconds. Returns whether a cancellation arrived meanwhile,
    and the stop request it raised (a `BaseException` that is neither an `Exception` nor a cancellation), if any."""
    task: asyncio.Future[Any] = asyncio.ensure_future(_stop_caught(result))
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
            return interrupted, None
        try:
            await asyncio.wait((task,), timeout=remaining)
        except asyncio.CancelledError:
            interrupted = True  # keep going: the remaining finalizers must still run
    if task.cancelled():  # not by this teardown (that is past the budget, above): the finalizer's own failure
        try:
            task.result()
        except asyncio.CancelledError as error:
            _failed(label, error, sink)
        return interrupted, None
    failure = task.exception()
    if failure is None:
        outcome = task.result()
        return interrupted, outcome.error if isinstance(outcome, _Stopped) else None
    if isinstance(failure, Exception):
        _failed(label, failure, sink)
        return interrupted, None
    return interrupted, failure


def _failed(label: str, error: BaseException, sink: Sink | None) -> None:
    logger.error("cleanup of %s failed", label, exc_info=error)
    if sink is not None:
        sink.emit(FinalizerFailed(label, error))


def _consume(task: asyncio.Future[Any]) -> None:
    failure = None if task.cancelled() else task.exception()
    if failure is not None:
        logger.error("cleanup failed after its time budget ran out", exc_info=failure)
