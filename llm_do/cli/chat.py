"""`llm-do chat`: a conversation with one entry at depth 0, in one session, turn by turn.

Each turn is one live run in the chat's session (the command's `turn(entry, text, session=...)`), which carries the
history from turn to turn, and its "approve for session" answers; each turn's per-run and
per-call resources are torn down when it ends. Ctrl-C cancels the turn in progress (its teardown
runs, the history stays as before the turn); at the prompt it does nothing. Ctrl-D (end of input)
exits, and the project's runtime is closed.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable
from contextlib import nullcontext
from typing import Any, Protocol

from rich.console import Console
from rich.live import Live
from rich.markup import escape

from .. import Session
from ..models import RecordingModel
from ..process.signals import handling
from ..project import Project
from ..project.inputs import InputMismatch, checked_input
from ..results import RunResult
from .lines import Lines
from .render import output_text, shown, usage_table


class Turn(Protocol):
    """How chat runs one turn (the command's live run of the entry)."""

    def __call__(
        self, name: str | None, input_data: Any, *, session: Session | None = None
    ) -> Awaitable[RunResult]: ...


__all__ = ["chat"]


async def chat(
    project: Project,
    run: Turn,
    recorder: RecordingModel | None,
    entry: str | None,
    err: Console,
    live: Live | None,
    lines: Lines,
) -> None:
    """Read a line from `lines` (which the approval questions share), run it, print the answer; until end of input."""
    loop = asyncio.get_running_loop()
    turn: asyncio.Task[RunResult] | None = None

    def interrupt(_signum: int) -> None:
        if turn is not None and not turn.done():
            turn.cancel()
        else:
            err.print("\n[dim](Ctrl-D to exit)[/]\n[bold]you>[/] ", end="")

    name = entry or project.default_entry
    err.print(f"[bold]chat with {escape(str(name))}[/]: Ctrl-C ends a turn, Ctrl-D exits")
    with handling((signal.SIGINT,), interrupt):
        async with recorder if recorder is not None else nullcontext(), project:
            session = await project.runtime.session("chat")
            while True:
                err.print("[bold]you>[/] ", end="")
                line = await lines.next()
                if not line:
                    err.print()
                    break
                if not line.strip():
                    continue
                given: Any = line.strip()
                if name is not None and name in project.entries:  # a line the entry does not take, as run says it
                    try:
                        given = checked_input(project.entries[name], name, given, "your line")
                    except InputMismatch as error:
                        err.print(f"[red]the turn failed[/]: {shown(str(error))}")
                        continue
                turn = loop.create_task(_turn(run, entry, given, session))
                try:
                    with live if live is not None else nullcontext():
                        result = await turn
                except asyncio.CancelledError:
                    this = asyncio.current_task()
                    if not turn.cancelled() or (this is not None and this.cancelling()):
                        raise  # the chat itself is being cancelled (SIGTERM, SIGHUP)
                    err.print("[yellow]turn cancelled[/]")
                    continue
                except Exception as error:
                    err.print(f"[red]the turn failed[/]: {escape(type(error).__name__)}: {shown(str(error))}")
                    continue
                finally:
                    turn = None
                print(output_text(result.output, terminal=sys.stdout.isatty()), flush=True)
            err.print(usage_table((), project.runtime.usage))


async def _turn(run: Turn, entry: str | None, input_data: Any, session: Session) -> RunResult:
    return await run(entry, input_data, session=session)
