"""The terminal approval prompt: show the call, read a key, answer approve / for the session / deny."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TextIO

from pydantic_core import to_jsonable_python
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from .. import Approval, ApprovalRequest
from ..errors import LlmDoError
from .lines import Lines
from .render import shown

__all__ = ["NoAnswer", "TerminalApprover"]

_CHOICES = escape("[a] approve once  [s] approve for this session  [d] deny (with a note)")


class NoAnswer(LlmDoError):
    """The input ended (Ctrl-D, or the terminal went away) while an approval question waited for its answer."""

    def __init__(self, request: ApprovalRequest) -> None:
        self.request = request
        super().__init__(
            f"the input ended (Ctrl-D) at the question for {request.toolset}.{request.tool} of entry "
            f"{request.entry!r}: the call was not approved and the run stops; answer a, s or d to go on"
        )


class TerminalApprover:
    """Asks on the terminal, one question at a time: questions that come together wait their turn here.

    Answers are read from `lines` (default: the lines of `stdin`, default stdin), the reader the chat
    prompt shares, in a daemon thread: a Ctrl-C while the prompt waits cancels the run at once, and the
    line typed next goes to whoever asks next. `pause()` returns a context manager during which the live
    display is stopped.
    """

    def __init__(
        self,
        console: Console,
        *,
        stdin: TextIO | None = None,
        lines: Lines | None = None,
        pause: Callable[[], AbstractContextManager[object]] | None = None,
    ) -> None:
        self.console = console
        self.lines = lines if lines is not None else Lines(stdin)
        self.pause = pause if pause is not None else nullcontext
        self._turn = asyncio.Lock()

    async def __call__(self, request: ApprovalRequest) -> Approval:
        async with self._turn:
            return await self._prompt(request)

    async def _prompt(self, request: ApprovalRequest) -> Approval:
        with self.pause():
            self.lines.discard_typed_ahead()  # keys typed before the question was shown do not answer it
            self.console.print(_panel(request))
            while True:
                line = await self._ask("approve? [a/s/d] ")
                if line == "":  # the end of input (an empty line is "\n")
                    raise NoAnswer(request)
                answer = line.strip().lower()
                if answer in ("a", "approve", "y", "yes"):
                    return Approval.approve()
                if answer in ("s", "session"):
                    return Approval.for_session()
                if answer in ("d", "deny", "n", "no"):
                    note = (await self._ask("note for the model (optional): ")).strip()
                    return Approval.deny(note or None)
                self.console.print(f"[red]answer a, s or d[/] ({_CHOICES})")

    async def _ask(self, prompt: str) -> str:
        self.console.print(escape(prompt), end="")
        return await self.lines.next()


def _panel(request: ApprovalRequest) -> Panel:
    """The question: every text in it escaped for rich and made `printable` (the arguments are the model's)."""
    args = json.dumps(to_jsonable_python(dict(request.args), fallback=repr), indent=2, ensure_ascii=False)
    files = "".join(f"\n  {shown(info.describe())}" for info in request.attachments)
    if files:
        files = f"\nfiles it hands over (name, type, size):{files}"
    body = (
        f"[bold]{shown(request.toolset)}[/] . [bold]{shown(request.tool)}[/]"
        f"  (entry {shown(' > '.join(request.chain))}, depth {request.depth})\n"
        f"{shown(request.description)}\n"
        f"[dim]why: {shown(request.reason)}[/]\n"
        f"arguments:\n{shown(args)}{files}\n\n{_CHOICES}"
    )
    return Panel(body, title="approval needed", title_align="left", border_style="yellow")
