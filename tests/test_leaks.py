"""After runs of every outcome, no per-call or per-run instance is still alive and no handle is open."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest
from dependency_injector import providers
from pydantic_ai import Agent

from containers import AgentContainer
from llm_do import AgentEntry, Handles, Runtime, Toolset, open_handles, tool

from .helpers import by_prompt, call, text

alive: list[weakref.ref[object]] = []


class RunLog:
    def __init__(self) -> None:
        alive.append(weakref.ref(self))


class Files(Toolset):
    def __init__(self, log: RunLog) -> None:
        alive.append(weakref.ref(self))
        self.log = log
        self.open_files: Handles[list[str]] = Handles("file")

    @tool
    def create(self) -> str:
        """Open a file; never closed by the model."""
        return self.open_files.open([])

    @tool
    async def fail(self) -> str:
        """Fail."""
        raise ValueError("tool failed")

    @tool
    async def hang(self) -> str:
        """Never return."""
        await asyncio.Event().wait()
        return "unreachable"


class App(AgentContainer):
    run_log = providers.ContextLocalSingleton(RunLog)
    files = providers.Factory(Files, log=run_log)


def worker() -> AgentEntry:
    def script(prompt: str, step: int, messages: object) -> object:
        if step == 0:
            return call("create")
        if step == 1:
            if prompt == "deep":
                return call("worker", input="ok")
            if prompt in ("fail", "hang"):
                return call(prompt)
        return text("done")

    return AgentEntry(Agent(by_prompt(script)), name="worker", toolsets=["files", "worker"])


async def test_nothing_outlives_its_scope() -> None:
    app = App()
    async with Runtime(app, entries=[worker()]) as runtime:
        assert (await runtime.run("worker", "deep")).output == "done"
        await asyncio.gather(*(runtime.run("worker", "ok") for _ in range(20)))
        with pytest.raises(ValueError, match="tool failed"):
            await runtime.run("worker", "fail")
        task = asyncio.create_task(runtime.run("worker", "hang"))
        for _ in range(50):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        del task
    await asyncio.sleep(0)  # asyncio holds the last failed task's exception until the loop turns once
    gc.collect()
    assert len(alive) == 2 * (2 + 20 + 1 + 1) - 1  # one run log per run, one Files per call
    survivors = [ref() for ref in alive if ref() is not None]
    assert survivors == [], f"still alive: {survivors}"
    assert open_handles() == []
