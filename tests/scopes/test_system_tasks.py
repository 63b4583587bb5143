"""System tasks and timers (`llm_do.scopes`): started in an empty context, so that whoever starts them lends
them nothing of theirs (a run, a request), and a set of them waited out when its owner closes."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Generator
from typing import Any

import pytest

from llm_do.scopes import SystemTasks, SystemTimeout, system_task, system_timer

CALLER: contextvars.ContextVar[str | None] = contextvars.ContextVar("caller", default=None)


async def caller_seen() -> str | None:
    return CALLER.get()


class Ready:
    """An awaitable that is not a coroutine (what `asyncio.ensure_future` also takes)."""

    def __init__(self, value: str) -> None:
        self.value = value

    def __await__(self) -> Generator[Any, None, str]:
        yield from asyncio.sleep(0).__await__()
        return f"{self.value} for {CALLER.get()}"


async def test_a_system_task_sees_nothing_of_its_starters_context() -> None:
    CALLER.set("alice")
    assert await system_task(caller_seen) is None
    assert await system_task(lambda: Ready("ready")) == "ready for None"  # called in the empty context too
    assert CALLER.get() == "alice"


async def test_a_system_timer_sees_nothing_of_the_context_that_armed_it() -> None:
    CALLER.set("alice")
    seen: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
    system_timer(0, lambda: seen.set_result(CALLER.get()))
    assert await seen is None


async def test_a_system_timeout_times_out() -> None:
    with pytest.raises(TimeoutError):
        async with SystemTimeout(0.01):
            await asyncio.Event().wait()


async def test_system_tasks_are_waited_out_those_started_meanwhile_too_whatever_is_cancelled() -> None:
    tasks = SystemTasks()
    log: list[str] = []
    go_on = asyncio.Event()

    async def second() -> None:
        log.append("second")

    async def first() -> None:
        await go_on.wait()
        tasks.spawn(second)
        log.append("first")

    tasks.spawn(first)
    waiting = asyncio.ensure_future(tasks.wait())
    await asyncio.sleep(0)
    waiting.cancel()  # a cancelled wait still waits every task out, then gives the cancellation back
    await asyncio.sleep(0)
    go_on.set()
    cancelled = await waiting
    assert isinstance(cancelled, asyncio.CancelledError)
    assert log == ["first", "second"]
    assert len(tasks) == 0
