"""asyncio helpers: awaiting what providers build, waiting tasks out, awaiting work side by side, and the runtime's
system tasks and timers.

A system task (after trio's `spawn_system_task`) is started in an empty context: whoever starts it (a
run's task, a timer's callback) lends it nothing, so it keeps no run's objects alive for as long as it
runs, and no run's context variables (a box, a sink, a span) reach it. An owner that must wait for its
system tasks when it closes keeps them in `SystemTasks`. A system timer is armed in an empty context for
the same reason: a timer keeps the context it was armed in until it is due, even once cancelled
(docs/scopes.md, "What a run leaves behind").
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable, Callable, Collection, Coroutine, Sequence
from types import GeneratorType
from typing import Any, TypeVar, TypeVarTuple, Unpack, cast

T = TypeVar("T")
Args = TypeVarTuple("Args")


async def built(value: Any) -> Any:
    """`value`, awaited when it is awaitable (what a provider with async dependencies returns).

    dependency-injector settles such a future from a callback, which fails (asyncio logs an
    `InvalidStateError`) if the future was cancelled meanwhile. So a cancellation arriving while a
    future is awaited leaves it alone to settle, and propagates; what it builds then is dropped
    unentered. Other awaitables (a coroutine) are awaited in place, in the caller's context.
    """
    if isinstance(value, asyncio.Future):
        if value.done():
            return value.result()
        try:
            return await asyncio.shield(value)
        except asyncio.CancelledError:
            value.add_done_callback(dropped)
            raise
    return await value if is_awaitable(value) else value


def dropped(future: asyncio.Future[Any]) -> None:
    """A done callback for a future whose outcome nobody needs: retrieved, so asyncio does not log it."""
    if not future.cancelled():
        future.exception()


def is_awaitable(value: object) -> bool:
    """`inspect.isawaitable`, without its slow ABC check for the common objects that are not awaitable."""
    if hasattr(type(value), "__await__"):
        return True
    return isinstance(value, GeneratorType) and inspect.isawaitable(value)  # a @types.coroutine generator


async def wait_out(tasks: Collection[asyncio.Future[Any]]) -> asyncio.CancelledError | None:
    """Wait until each of `tasks` is done, whatever else is cancelled meanwhile: teardown comes first.
    Returns the cancellation that arrived meanwhile, if any, for the caller to re-raise as it came (anyio
    knows its own by their message). `tasks` is read again before each wait, so a task added to it
    meanwhile is waited for too.

    Done tasks are left out before each wait: `asyncio.wait` suspends once even on a done task, and a
    task in a cancelled anyio scope (a Starlette response) is cancelled again at every suspension."""
    cancelled = None
    while pending := [task for task in tasks if not task.done()]:
        try:
            await asyncio.wait(pending)
        except asyncio.CancelledError as error:
            cancelled = error
    return cancelled


async def side_by_side(works: Sequence[Awaitable[T]]) -> list[T]:
    """Await each of `works` in a task of its own, all at once: their results, in order. No task outlives the
    call, as in a `TaskGroup`, but the caller's task is never cancelled and no exception is grouped: the first
    to fail (of those that failed first, in the order of `works`) cancels the others, and its exception is
    raised as it came once they have all ended; a cancellation of the caller cancels them all and is raised
    once they have ended. The tasks start in the order of `works`, each in a copy of the caller's context."""
    tasks = [asyncio.ensure_future(work) for work in works]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    except asyncio.CancelledError:
        await _cancel_all(tasks)
        raise
    error = next((task.exception() for task in tasks if _failed(task)), None)
    if error is None:
        return [task.result() for task in tasks]
    cancelled = await _cancel_all(tasks)
    if cancelled is not None:
        raise cancelled  # the caller's own cancellation wins
    raise error


def _failed(task: asyncio.Future[Any]) -> bool:
    return task.done() and not task.cancelled() and task.exception() is not None


async def _cancel_all(tasks: Sequence[asyncio.Future[Any]]) -> asyncio.CancelledError | None:
    """Cancel the tasks not done, wait until all have ended (`wait_out`), and retrieve their outcomes."""
    for task in tasks:
        task.cancel()
    cancelled = await wait_out(tasks)
    for task in tasks:
        dropped(task)
    return cancelled


def system_task(
    async_fn: Callable[[Unpack[Args]], Awaitable[T]], *args: *Args, name: str | None = None
) -> asyncio.Task[T]:
    """Start `async_fn(*args)` as a system task: called, then run, in an empty context of its own."""
    context = contextvars.Context()
    work: Awaitable[T] = context.run(async_fn, *args)
    coroutine = work if asyncio.iscoroutine(work) else _awaited(work)
    return asyncio.get_running_loop().create_task(cast(Coroutine[Any, Any, T], coroutine), name=name, context=context)


async def _awaited(work: Awaitable[T]) -> T:
    return await work


class SystemTasks:
    """The system tasks one owner keeps until they end and waits out when it closes (trio's system nursery,
    whose tasks are cancelled instead)."""

    __slots__ = ("_tasks",)

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(
        self, async_fn: Callable[[Unpack[Args]], Awaitable[T]], *args: *Args, name: str | None = None
    ) -> asyncio.Task[T]:
        """Start `async_fn(*args)` as a system task of this owner's."""
        task = system_task(async_fn, *args, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def wait(self) -> asyncio.CancelledError | None:
        """Wait until every task has ended, those started meanwhile too, whatever is cancelled meanwhile
        (`wait_out`); the cancellation that arrived meanwhile, if any."""
        return await wait_out(self._tasks)

    def __len__(self) -> int:
        return len(self._tasks)

    def __repr__(self) -> str:
        return f"SystemTasks({len(self._tasks)} running)"


def system_timer(delay: float, callback: Callable[[Unpack[Args]], object], *args: *Args) -> asyncio.TimerHandle:
    """`loop.call_later(delay, callback, *args)`, armed in an empty context: the timer keeps nothing of the
    caller's until it is due, and `callback` runs with nothing of it."""
    return asyncio.get_running_loop().call_later(delay, callback, *args, context=contextvars.Context())


class SystemTimeout:
    """`asyncio.timeout(seconds)` whose timer is armed in an empty context (a cancelled timer stays in the
    event loop until its deadline, and must hold nothing of the caller's); no limit when `seconds` is None.
    `expired` tells whether its deadline ran out."""

    __slots__ = ("seconds", "timeout")

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.timeout: asyncio.Timeout | None = None

    async def __aenter__(self) -> asyncio.Timeout | None:
        if self.seconds is None:
            return None
        timeout = self.timeout = asyncio.timeout(None)
        await timeout.__aenter__()
        contextvars.Context().run(timeout.reschedule, asyncio.get_running_loop().time() + self.seconds)
        return timeout

    async def __aexit__(self, kind: Any, error: Any, traceback: Any) -> None:
        if self.timeout is not None:
            await self.timeout.__aexit__(kind, error, traceback)

    @property
    def expired(self) -> bool:
        return self.timeout is not None and self.timeout.expired()
