"""Signal handlers on the running event loop that leave the process's signals as they were found.

Two things asyncio's `loop.add_signal_handler` does not do on its own:

- respect a signal the process inherited as ignored: `nohup` ignores SIGHUP, and a shell ignores
  SIGINT in a command it starts in the background with `&`. They are ignored on purpose, so they
  are left ignored (and the child processes started meanwhile inherit that);
- restore the disposition that was there before: `loop.remove_signal_handler` sets SIGINT to
  Python's `default_int_handler` and any other signal to `SIG_DFL`, whatever it was (an
  application's own handler, asyncio's Ctrl-C handler of `asyncio.run`, an ignored signal).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
from collections.abc import Callable, Iterable, Iterator
from types import FrameType
from typing import Any

__all__ = ["handling"]


@contextlib.contextmanager
def handling(
    signums: Iterable[int], callback: Callable[[int], object], *, then_former: bool = False
) -> Iterator[list[int]]:
    """Call `callback(signum)` on the running loop when one of `signums` arrives, while in the block;
    `then_former`: then the handler that was there before, if it was a Python function (a server's own, say
    uvicorn's graceful shutdown).

    Yields the signals handled: not those the process ignores, and none where the loop cannot
    handle signals (a thread other than the main one). On exit every signal gets back its former
    disposition.
    """
    loop = asyncio.get_running_loop()
    former: dict[int, Callable[[int, FrameType | None], Any] | int | None] = {}
    for signum in signums:
        before = signal.getsignal(signum)
        if before == signal.SIG_IGN:
            continue
        handler = callback
        if then_former and callable(before):
            handler = functools.partial(_both, callback, before)
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread, say
            loop.add_signal_handler(signum, handler, int(signum))
            former[signum] = before
    try:
        yield list(former)
    finally:
        for signum, before in former.items():
            loop.remove_signal_handler(signum)
            if before is not None:  # None: a handler not set from Python, which cannot be put back
                signal.signal(signum, before)


def _both(callback: Callable[[int], object], before: Callable[[int, FrameType | None], Any], signum: int) -> None:
    try:
        callback(signum)
    finally:
        before(signum, None)
