"""`RunThread`: one run's own thread for its sync work, so that a slow sync tool blocks its run and not the loop.

A run's sync tool bodies run there one at a time, in the order they were given, each in a copy of its caller's
context: the run's objects are never used by two of its sync tools at once, and an object a tool opens (a SQLite
connection) stays on the thread that opened it, where the scopes also release it (`home_of`). The thread starts
with the run's first sync job, and ends with the run, holding nothing of it once idle.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import logging
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar, cast

from ._box import CURRENT_BOX
from ._bus import CURRENT_SINK, Event, Sink
from ._tasks import dropped

T = TypeVar("T")
_Job = tuple["concurrent.futures.Future[Any]", contextvars.Context, Callable[[], Any]]
logger = logging.getLogger("llm_do")


class _Worker(threading.Thread):
    """The thread of one run: takes jobs until it is handed the run's end (an asyncio future to settle)."""

    def __init__(self, jobs: queue.SimpleQueue[_Job | asyncio.Future[None]], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(name="llm-do run", daemon=True)  # a sync tool that never returns does not block the exit
        self.jobs: queue.SimpleQueue[_Job | asyncio.Future[None]] | None = jobs
        self.loop: asyncio.AbstractEventLoop | None = loop

    def run(self) -> None:
        jobs, loop = self.jobs, self.loop
        assert jobs is not None and loop is not None
        self.jobs = self.loop = None
        while True:
            job = jobs.get()
            if isinstance(job, asyncio.Future):
                loop.call_soon_threadsafe(_settle, job)
                return
            future, context, function = job
            del job  # an idle thread keeps nothing of its last job: not its arguments, result, error or context
            if future.set_running_or_notify_cancel():  # (False: cancelled before it started)
                try:
                    result = context.run(function)
                except BaseException as error:
                    future.set_exception(error)
                else:
                    future.set_result(result)
                    del result
            del future, context, function


def _settle(ended: asyncio.Future[None]) -> None:
    if not ended.done():
        ended.set_result(None)


class _Relay(Sink):
    """A call's sink as a job of the run's thread sees it: each event is heard on the loop, in order, as if the
    job had run there (observers, a live stream's queue among them, are not thread-safe)."""

    __slots__ = ("_loop", "_sink")

    def __init__(self, sink: Sink, loop: asyncio.AbstractEventLoop) -> None:
        self.call = sink.call
        self.observers = ()
        self._sink = sink
        self._loop = loop

    def emit(self, event: Event) -> None:
        self._loop.call_soon_threadsafe(self._sink.emit, event)


class RunThread:
    """One run's thread for its sync work: started by the first job, ended by `close` when the run ends.

    `run` runs a sync tool body there and waits for it, even when cancelled (it cannot be interrupted), for at
    most `timeout` seconds (the run's cleanup budget). `submit` hands it a job without waiting (a scope's sync
    finalizer). `home_of` tells the scopes which objects live there: those whose sync tools ran there."""

    __slots__ = ("_ended", "_jobs", "_residents", "_worker", "timeout")

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._ended = False
        self._jobs: queue.SimpleQueue[_Job | asyncio.Future[None]] | None = None
        self._worker: _Worker | None = None
        self._residents: weakref.WeakSet[Any] | None = None

    def _put(self, function: Callable[[], T], resident: object) -> concurrent.futures.Future[T]:
        loop = asyncio.get_running_loop()
        jobs = self._jobs
        if jobs is None:
            if self._ended:
                raise RuntimeError("this run has ended: its thread takes no more jobs")
            jobs = self._jobs = queue.SimpleQueue()
            worker = self._worker = _Worker(jobs, loop)
            worker.start()
        if resident is not None:
            self._host(resident)
        context = contextvars.copy_context()
        sink = context.get(CURRENT_SINK)
        if sink is not None:
            context.run(CURRENT_SINK.set, _Relay(sink, loop))
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        jobs.put((future, context, function))
        return future

    def _host(self, resident: object) -> None:
        residents = self._residents
        if residents is None:
            residents = self._residents = weakref.WeakSet()
        with contextlib.suppress(TypeError):  # cannot be weakly referenced: its finalizers stay on the loop
            residents.add(resident)

    def hosts(self, obj: object) -> bool:
        """Whether a sync tool of `obj` ran on this thread (its sync finalizers then run here too)."""
        residents = self._residents
        if residents is None:
            return False
        try:
            return obj in residents
        except TypeError:
            return False

    def submit(self, function: Callable[[], T], resident: object = None) -> asyncio.Future[T]:
        """Queue `function` after the jobs before it; cancelling the future drops it if it has not started."""
        return asyncio.wrap_future(self._put(function, resident))

    async def run(self, function: Callable[[], T], resident: object, label: str) -> T:
        """Run `function` on this thread (after the run's sync jobs before it) and return what it returns.

        Cancelled meanwhile, it drops the job if it has not started, else waits for it to return, whatever else is
        cancelled meanwhile, for at most `timeout` seconds (logged past that), then re-raises the cancellation."""
        future = self._put(function, resident)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if not future.cancel():  # running: it cannot be stopped, and uses what the call's teardown would release
                finished, _ = await _outlast(asyncio.wrap_future(future), self.timeout)
                if not finished:
                    logger.error(
                        "%s was still running %ss after its call was cancelled; the call's teardown goes on "
                        "without it (it cannot be interrupted)",
                        label,
                        self.timeout,
                    )
            raise

    async def close(self) -> bool:
        """End the thread once the jobs given before have run, waiting at most `timeout` seconds, whatever else is
        cancelled meanwhile (the thread is left to finish on its own past that, logged). True when a cancellation
        arrived meanwhile. Afterwards the thread takes no more jobs."""
        jobs, worker = self._jobs, self._worker
        self._jobs = self._worker = self._residents = None
        self._ended = True
        if jobs is None or worker is None:
            return False
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        jobs.put(ended)
        finished, interrupted = await _outlast(ended, self.timeout)
        if finished:
            worker.join()  # it has settled `ended`, its last act: this returns at once
        else:
            logger.error(
                "a run ended while a sync tool was still running in its thread %ss later; the thread is left to "
                "finish it on its own",
                self.timeout,
            )
        return interrupted


async def _outlast(future: asyncio.Future[Any], budget: float) -> tuple[bool, bool]:
    """Wait for `future` at most `budget` seconds, whatever is cancelled meanwhile: (finished, interrupted)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + budget
    interrupted = False
    while not future.done():
        remaining = deadline - loop.time()
        if remaining <= 0:
            future.add_done_callback(dropped)
            return False, interrupted
        try:
            await asyncio.wait((future,), timeout=remaining)
        except asyncio.CancelledError:
            interrupted = True
    dropped(future)
    return True, interrupted


def current_run_thread() -> RunThread | None:
    """The thread of the run the current context belongs to (None outside a run, or once it has ended)."""
    box = CURRENT_BOX.get()
    return None if box is None else cast("RunThread | None", box.thread)


def home_of(obj: object) -> RunThread | None:
    """The current run's thread if a sync tool of `obj` ran there, where its sync finalizers then run; else None."""
    thread = current_run_thread()
    return thread if thread is not None and thread.hosts(obj) else None


def on_run_thread() -> bool:
    """Whether the calling code runs on a run's thread (a sync tool's body)."""
    return isinstance(threading.current_thread(), _Worker)
