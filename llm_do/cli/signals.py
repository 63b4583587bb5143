"""Ctrl-C, SIGTERM and SIGHUP end a command the same way: its work is cancelled and torn down before it exits.

Python's default for SIGTERM and SIGHUP is to die at once, with no teardown: an MCP server or a
shell command the command started would be left running; asyncio's for Ctrl-C cancels once, but
a second Ctrl-C raises KeyboardInterrupt in the middle of the teardown, which then never finishes.
`run` here cancels the command's main task instead, lets it tear down (MCP servers stopped,
handles rolled back, cleanups run), then raises KeyboardInterrupt (Ctrl-C: exit code 130) or
`Terminated`, which the command reports with exit code 128 + the signal's number (143 for SIGTERM,
129 for SIGHUP). A second signal cancels the teardown's wait again, which the teardown survives (it
is shielded). A signal the command inherited as ignored stays ignored (`nohup llm-do run ...` goes
on when the terminal hangs up; `llm-do run ... &` from a script is not ended by Ctrl-C).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

from ..process.signals import handling
from .failures import Terminated

__all__ = ["TERMINATING", "run"]

T = TypeVar("T")

TERMINATING = (signal.SIGTERM, signal.SIGHUP)
"""The signals a command handles as Ctrl-C."""


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)`, where Ctrl-C, SIGTERM and SIGHUP cancel `main` and, once it has unwound, raise
    KeyboardInterrupt (Ctrl-C) or `Terminated`."""
    received: list[int] = []
    try:
        result = asyncio.run(_cancelled_by_signals(main, received))
    except Exception:
        if received:  # the teardown that the signal started failed too (a terminal that hung up, say)
            raise _ended_by(received[0])  # noqa: B904 - the signal is the cause; the error stays its context
        raise
    if received:
        raise _ended_by(received[0])
    return result  # type: ignore[return-value]


def _ended_by(signum: int) -> KeyboardInterrupt:
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


async def _cancelled_by_signals(main: Coroutine[Any, Any, T], received: list[int]) -> T | None:
    task = asyncio.current_task()
    assert task is not None

    def cancel(signum: int) -> None:
        received.append(signum)
        task.cancel()

    with handling((signal.SIGINT, *TERMINATING), cancel):
        try:
            return await main
        except asyncio.CancelledError:
            if not received:
                raise
            return None
