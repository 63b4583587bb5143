"""`side_by_side` (`llm_do.scopes`): work awaited at once, each in a task of its own, and nothing left running when
it returns or raises: the first failure cancels the rest and is raised as it came, a cancellation of the caller
cancels them all."""

from __future__ import annotations

import asyncio

import pytest

from llm_do.scopes import side_by_side


async def test_the_results_come_in_order_and_the_work_ran_at_once() -> None:
    started: list[str] = []
    all_started = asyncio.Event()

    async def work(name: str) -> str:
        started.append(name)
        if len(started) == 3:
            all_started.set()
        await asyncio.wait_for(all_started.wait(), 5)  # one at a time, the first would never see the others
        return name.upper()

    assert await side_by_side([work("a"), work("b"), work("c")]) == ["A", "B", "C"]
    assert started == ["a", "b", "c"]  # started in the order given


async def test_the_first_failure_cancels_the_rest_and_is_raised_unchanged_once_they_have_ended() -> None:
    ended: list[str] = []
    failure = LookupError("the ledger is gone")
    waiting = asyncio.Event()

    async def fails() -> str:
        await waiting.wait()
        raise failure

    async def waits() -> str:
        try:
            waiting.set()
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)  # its own cleanup takes a turn: still waited for
            ended.append("waits")
        return "never"

    before = asyncio.all_tasks()
    with pytest.raises(LookupError) as raised:
        await side_by_side([fails(), waits()])
    assert raised.value is failure and ended == ["waits"]
    assert asyncio.all_tasks() == before


async def test_a_cancelled_caller_cancels_every_task_and_waits_for_them() -> None:
    ended: list[str] = []
    both = asyncio.Event()

    async def waits(name: str) -> None:
        try:
            if name == "b":
                both.set()
            await asyncio.Event().wait()
        finally:
            ended.append(name)

    before = asyncio.all_tasks()
    caller = asyncio.ensure_future(side_by_side([waits("a"), waits("b")]))
    await both.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert sorted(ended) == ["a", "b"]
    assert asyncio.all_tasks() == before
