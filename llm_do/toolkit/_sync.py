"""Sync tool bodies, run on their run's own thread (`RunThread`, in `scopes/_thread.py`), off the event loop.

The two mistakes that thread makes visible (an object only the thread that made it may use, asyncio called
where no loop runs) are explained to the tool's author, with what to do, rather than left as the library's
own words.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ToolsetError
from ..scopes._tasks import is_awaitable
from ..scopes._thread import current_run_thread

_OTHER_THREAD = "can only be used in that same thread"
"""sqlite3's `ProgrammingError` for an object made on another thread (`check_same_thread`)."""
_NO_LOOP = ("no running event loop", "There is no current event loop")
"""asyncio's `RuntimeError` where no loop runs (`get_running_loop`, `get_event_loop`)."""


async def run_sync_tool(body: Callable[[], Any], resident: object, label: str) -> Any:
    """Call `body` (a sync tool's, its arguments bound) on the current run's thread, and return its result
    (awaited, if it returns something to await). `resident` is the toolset whose tool it is, which then lives on
    that thread (its sync `cleanup()` runs there); `label` names the tool (`tool 'begin' of Ledger`). Outside a
    run (a `Toolset` given to a plain pydantic-ai agent) there is no run thread, and `body` runs here."""
    thread = current_run_thread()
    if thread is None:
        result = body()
    else:
        try:
            result = await thread.run(body, resident, label)
        except Exception as error:
            explained = _explained(error, label)
            if explained is None:
                raise
            raise explained from error
    if is_awaitable(result):
        result = await result
    return result


def _explained(error: Exception, label: str) -> ToolsetError | None:
    text = str(error)
    if type(error).__module__ == "sqlite3" and _OTHER_THREAD in text:
        return ToolsetError(
            f"{label} ran in its run's own thread (llm-do runs sync tools off the event loop) and used a SQLite "
            f"object made in another thread, such as a connection made in the toolset's __init__ on the event "
            f"loop ({text}). Open the connection with check_same_thread=False (llm-do never runs two sync tools "
            "of one run at once), or open it inside the tool, or declare the tool @tool(thread=False) to run it on "
            "the event loop"
        )
    if isinstance(error, RuntimeError) and text.startswith(_NO_LOOP):
        return ToolsetError(
            f"{label} ran in its run's own thread (llm-do runs sync tools off the event loop), and asked for the "
            f"event loop ({text}), but no event loop runs there: make it `async def`, or declare it "
            "@tool(thread=False) to run it on the event loop"
        )
    return None
