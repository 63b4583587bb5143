"""Handle maps: the explicit state a toolset shares with the model (`txn_1a2b3c4d`); and the errors of a name the
model passed that names nothing here (a handle, an agent)."""

from __future__ import annotations

import functools
import inspect
import logging
import secrets
import weakref
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Generic, TypeVar

from pydantic_ai.exceptions import ToolFailed

from ..errors import ToolsetError
from ..events import HandleClosed, HandleOpened, HandleRolledBack
from ..scopes._bus import CURRENT_SINK, Sink
from ..scopes._teardown import HandleMap
from ..scopes._thread import RunThread, current_run_thread, on_run_thread

T = TypeVar("T")
_live: weakref.WeakSet[Handles[Any]] = weakref.WeakSet()
_logger = logging.getLogger("llm_do")


class UnknownHandle(ToolFailed):
    """A tool was given a handle that is not open in this toolset; the model sees the message."""


class UnknownAgent(ToolsetError):
    """A call names an agent (`name`) that is neither an entry nor an agent made in the run or kept by its session:
    a name a model made up, as an unknown handle is."""

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.name = name


class Handles(HandleMap, Generic[T]):
    """Objects a toolset keeps open between tool calls, named by handles the model passes back.

    `open(obj)` returns a fresh handle such as `txn_1a2b3c4d`; `get` and `pop` look it up and raise
    `UnknownHandle` (the model reads the message, which lists the open handles) when it is not
    open here. Handles live in one toolset instance, so a handle minted by another call or
    worker is unknown. Objects still open when the owning scope ends are passed to `on_forget`,
    by default their `rollback()`, else `aclose()`, else `close()`: forgotten work is undone,
    never committed. An object opened by a sync tool is released on the thread the tool ran on (its run's),
    where it was made: a SQLite connection refuses any other.
    """

    def __init__(
        self, prefix: str, *, on_forget: Callable[[T], Any] | None = None, opened_by: str | None = None
    ) -> None:
        if not prefix.isidentifier():
            raise ValueError(f"handle prefix must be an identifier like 'txn', got {prefix!r}")
        self.prefix = prefix
        self.opened_by = opened_by
        """The tool that opens these handles (`begin`), which an unknown handle's message names."""
        self._on_forget = on_forget
        self._open: dict[str, T] = {}
        self._on_run_thread: set[str] | None = None
        """The handles opened on their run's thread (by a sync tool), released there."""
        _live.add(self)

    def open(self, obj: T) -> str:
        """Store `obj` and return its new handle."""
        while True:
            handle = f"{self.prefix}_{secrets.token_hex(4)}"
            if handle not in self._open:
                self._open[handle] = obj
                if on_run_thread():
                    if self._on_run_thread is None:
                        self._on_run_thread = set()
                    self._on_run_thread.add(handle)
                sink = CURRENT_SINK.get()
                if sink is not None:
                    sink.emit(HandleOpened(sink.call, handle))
                return handle

    def get(self, handle: str) -> T:
        """The object behind an open handle."""
        try:
            return self._open[handle]
        except (KeyError, TypeError):
            raise self._unknown(handle) from None

    def pop(self, handle: str) -> T:
        """Remove an open handle (the caller now owns the object's release) and return its object."""
        try:
            obj = self._open.pop(handle)
        except (KeyError, TypeError):
            raise self._unknown(handle) from None
        if self._on_run_thread is not None:
            self._on_run_thread.discard(handle)
        sink = CURRENT_SINK.get()
        if sink is not None:
            sink.emit(HandleClosed(sink.call, handle))
        return obj

    def __contains__(self, handle: object) -> bool:
        return handle in self._open

    def __len__(self) -> int:
        return len(self._open)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._open))

    async def close_all(self) -> None:
        """Release every open object, newest first; a failing release is logged and the rest go on."""
        for _, release in self.releases():
            await release()

    def releases(self) -> list[tuple[str, Callable[[], Awaitable[None]]]]:
        """(handle, release) for every open handle, newest first: `release()` rolls that one back (a failure is
        logged, never raised), where it was opened. A scope's teardown runs each within its own budget."""
        sink = CURRENT_SINK.get()
        threaded = self._on_run_thread
        thread = None if threaded is None else current_run_thread()
        return [
            (
                handle,
                functools.partial(self._close_one, handle, thread if threaded and handle in threaded else None, sink),
            )
            for handle in reversed(self._open)
        ]

    async def _close_one(self, handle: str, thread: RunThread | None, sink: Sink | None) -> None:
        try:
            obj = self._open.pop(handle)
        except KeyError:  # taken back meanwhile
            return
        if self._on_run_thread is not None:
            self._on_run_thread.discard(handle)
        failure: BaseException | None = None
        try:
            result = (
                self._release(obj) if thread is None else await thread.submit(functools.partial(self._release, obj))
            )
            del obj
            if inspect.isawaitable(result):
                await result
        except Exception as error:
            failure = error
            _logger.error("releasing forgotten handle %s failed", handle, exc_info=error)
        except BaseException as error:  # cancelled (past the cleanup budget), or a stop request: raised
            failure = error
            raise
        finally:
            if sink is not None:
                sink.emit(HandleRolledBack(sink.call, handle, failure))

    def _release(self, obj: T) -> Any:
        if self._on_forget is not None:
            return self._on_forget(obj)
        for name in ("rollback", "aclose", "close"):
            method = getattr(obj, name, None)
            if callable(method):
                return method()
        return None

    def _unknown(self, handle: object) -> UnknownHandle:
        """What a model reads for a handle that is not open: the open ones to pass instead, or how to open one
        (a small model makes handles up, like 'txn_1', or passes one before any was opened)."""
        opener = self.opened_by
        if self._open:
            how = f"; pass a handle exactly as {opener} returned it" if opener else ""
            listing = f"{how}. Open {self.prefix} handles: {', '.join(self._open)}."
        elif opener:
            listing = (
                f". No {self.prefix} handle is open: call {opener} first, then pass the handle it returns "
                f"(like '{self.prefix}_1a2b3c4d')."
            )
        else:
            listing = f". No {self.prefix} handle is open; open one first."
        return UnknownHandle(
            f"Unknown handle {handle!r}: it is not open here (never opened, or already closed){listing}"
        )

    def __repr__(self) -> str:
        return f"Handles({self.prefix!r}, open={list(self._open)})"


def live_handle_maps() -> list[Handles[Any]]:
    """Every handle map still alive in this process (for leak checks)."""
    return list(_live)


def open_handles() -> list[str]:
    """Every handle still open in any live handle map of this process."""
    return [handle for handles in list(_live) for handle in handles]
