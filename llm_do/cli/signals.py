"""SIGTERM and SIGHUP end a command as Ctrl-C does: its work is cancelled and torn down before it exits.

Python's default for both is to die at once, with no teardown: an MCP server or a shell command
the command started would be left running. `run` here cancels the command's main task instead,
lets it tear down (MCP servers stopped, handles rolled back, cleanups run), then raises
`Terminated`, which the command reports with exit code 128 + the signal's number (143 for SIGTERM,
129 for SIGHUP), as Ctrl-C gives 130. A second signal cancels the teardown's wait again, which
the teardown survives (it is shielded). A signal the command inherited as ignored stays ignored
(`nohup llm-do run ...` goes on when the terminal hangs up).
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
"""The signals a command handles as Ctrl-C (SIGINT is asyncio's own)."""


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)`, where SIGTERM and SIGHUP cancel `main` and, once it has unwound, raise `Terminated`."""
    received: list[int] = []
    try:
        result = asyncio.run(_cancelled_by_signals(main, received))
    except Exception:
        if received:  # the teardown that the signal started failed too (a terminal that hung up, say)
            raise Terminated(received[0])  # noqa: B904 - the signal is the cause; the error stays its context
        raise
    if received:
        raise Terminated(received[0])
    return result  # type: ignore[return-value]


async def _cancelled_by_signals(main: Coroutine[Any, Any, T], received: list[int]) -> T | None:
    task = asyncio.current_task()
    assert task is not None

    def cancel(signum: int) -> None:
        received.append(signum)
        task.cancel()

    with handling(TERMINATING, cancel):
        try:
            return await main
        except asyncio.CancelledError:
            if not received:
                raise  # Ctrl-C: asyncio turns it into KeyboardInterrupt
            return None
