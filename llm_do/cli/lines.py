"""The lines a user types on stdin, shared by the chat prompt and the approval questions.

Each line is read in a daemon thread, so the event loop (and Ctrl-C) stay responsive while it waits.
There is one read at a time, and a read whose reader went away (a question cancelled by Ctrl-C, a
Ctrl-C at the chat prompt) is kept for the next reader: the next line typed goes to whoever asks
next, never to a question that is gone. A question can first discard what was typed before it was
shown (`discard_typed_ahead`): an answer is only one given to that question.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import sys
import termios
import threading
from typing import TextIO

__all__ = ["Lines"]


class Lines:
    """The lines of `stream` (default: stdin), read one at a time; `""` at end of input."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self._pending: asyncio.Future[str] | None = None

    async def next(self) -> str:
        """The next line (with its newline), or `""` at end of input; a read error is raised here."""
        pending = self._pending
        if pending is None or pending.get_loop() is not asyncio.get_running_loop():
            pending = self._pending = self._read()
        text = await asyncio.shield(pending)  # a cancelled reader leaves the read to the next one
        self._pending = None
        return text

    def discard_typed_ahead(self) -> None:
        """Forget the lines typed and not read yet: those the terminal holds, and one read that nobody took."""
        pending = self._pending
        if pending is not None and pending.done():
            self._pending = None
            if not pending.cancelled():
                pending.exception()  # (retrieved, so that asyncio does not report it)
        stream = self.stream if self.stream is not None else sys.stdin
        with contextlib.suppress(OSError, ValueError, termios.error, io.UnsupportedOperation):
            if stream.isatty():
                termios.tcflush(stream.fileno(), termios.TCIFLUSH)

    def _read(self) -> asyncio.Future[str]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        stream = self.stream if self.stream is not None else sys.stdin

        def read() -> None:
            try:
                text, error = stream.readline(), None
            except BaseException as raised:  # handed to the reader, whatever it is
                text, error = "", raised
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for this line any more
                loop.call_soon_threadsafe(_settle, future, text, error)

        threading.Thread(target=read, name="llm-do terminal input", daemon=True).start()
        return future


def _settle(future: asyncio.Future[str], text: str, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(text)
