"""The terminal approval prompt: show the call, read a key, answer approve / for the session / deny."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TextIO

from pydantic_core import to_jsonable_python
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from ..approval import Approval, ApprovalRequest

__all__ = ["TerminalApprover"]

_CHOICES = escape("[a] approve once  [s] approve for this session  [d] deny (with a note)")


class TerminalApprover:
    """Asks on the terminal, one question at a time: questions that come together wait their turn here.

    Reading happens in a daemon thread, so a Ctrl-C while the prompt waits cancels the run at once.
    `pause()` returns a context manager during which the live display is stopped.
    """

    def __init__(
        self,
        console: Console,
        *,
        stdin: TextIO | None = None,
        pause: Callable[[], AbstractContextManager[object]] | None = None,
    ) -> None:
        self.console = console
        self.stdin = stdin if stdin is not None else sys.stdin
        self.pause = pause if pause is not None else nullcontext
        self._turn = asyncio.Lock()

    async def __call__(self, request: ApprovalRequest) -> Approval:
        async with self._turn:
            return await self._prompt(request)

    async def _prompt(self, request: ApprovalRequest) -> Approval:
        with self.pause():
            self.console.print(_panel(request))
            while True:
                answer = (await self._ask("approve? [a/s/d] ")).strip().lower()
                if answer in ("a", "approve", "y", "yes"):
                    return Approval.approve()
                if answer in ("s", "session"):
                    return Approval.for_session()
                if answer in ("d", "deny", "n", "no"):
                    note = (await self._ask("note for the model (optional): ")).strip()
                    return Approval.deny(note or None)
                if answer == "":
                    raise EOFError("the terminal closed while an approval was pending")
                self.console.print(f"[red]answer a, s or d[/] ({_CHOICES})")

    async def _ask(self, prompt: str) -> str:
        self.console.print(escape(prompt), end="")
        loop = asyncio.get_running_loop()
        line: asyncio.Future[str] = loop.create_future()

        def read() -> None:
            try:
                text = self.stdin.readline()
            except BaseException as error:
                loop.call_soon_threadsafe(_settle, line, None, error)
            else:
                loop.call_soon_threadsafe(_settle, line, text, None)

        threading.Thread(target=read, name="llm-do approval prompt", daemon=True).start()
        return await line


def _settle(future: asyncio.Future[str], text: str | None, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(text or "")


def _panel(request: ApprovalRequest) -> Panel:
    args = json.dumps(to_jsonable_python(dict(request.args), fallback=repr), indent=2, ensure_ascii=False)
    files = "".join(f"\n  {escape(info.describe())}" for info in request.attachments)
    if files:
        files = f"\nfiles it hands over (name, type, size):{files}"
    body = (
        f"[bold]{escape(request.toolset)}[/] . [bold]{escape(request.tool)}[/]"
        f"  (entry {escape(' > '.join(request.chain))}, depth {request.depth})\n"
        f"{escape(request.description)}\n"
        f"[dim]why: {escape(request.reason)}[/]\n"
        f"arguments:\n{escape(args)}{files}\n\n{_CHOICES}"
    )
    return Panel(body, title="approval needed", title_align="left", border_style="yellow")
