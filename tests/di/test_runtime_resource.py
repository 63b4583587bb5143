"""The runtime as a provider of the application's own container: opened and closed with its resources, injected
with `Provide`, overridden in tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from dependency_injector import containers, providers
from dependency_injector.wiring import Provide, inject
from pydantic_ai import Agent

from llm_do import AgentEntry, Runtime, RuntimeResource, Toolset, tool
from llm_do.testing import Turn, answering, tool_call

events: list[str] = []
started = asyncio.Event()


class Pool:
    def __init__(self) -> None:
        self.open = True


async def open_pool() -> AsyncIterator[Pool]:
    pool = Pool()
    events.append("pool opened")
    try:
        yield pool
    finally:
        pool.open = False
        events.append("pool closed")


class Slow(Toolset):
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    @tool(read_only=True)
    async def work(self) -> str:
        """Work a while with the pool."""
        events.append("work started")
        started.set()
        await asyncio.sleep(0.05)
        events.append(f"work ended, pool {'open' if self.pool.open else 'CLOSED'}")
        return "worked"


def answer(turn: Turn) -> Any:
    return tool_call("work") if turn.step == 0 else str(turn.returns[0])


worker = AgentEntry(Agent(answering(answer)), name="worker", toolsets=["slow"])


class Application(containers.DeclarativeContainer):
    __self__ = providers.Self()
    pool = providers.Resource(open_pool)
    slow = providers.Factory(Slow, pool=pool)
    runtime = RuntimeResource(__self__, entries=[worker])


@inject
async def endpoint(runtime: Runtime = Provide[Application.runtime]) -> str:
    result = await runtime.run("worker", "go")
    return str(result.output)


async def test_the_runtime_opens_with_the_resources_and_closes_first_waiting_for_its_runs() -> None:
    events.clear()
    started.clear()
    container = Application()
    await container.init_resources()  # type: ignore[misc]
    runtime = await container.runtime()  # type: ignore[misc]
    assert isinstance(runtime, Runtime)
    assert await container.runtime() is runtime  # type: ignore[misc]
    running = asyncio.create_task(runtime.run("worker", "go"))
    await started.wait()
    await container.shutdown_resources()  # type: ignore[misc]
    assert (await running).output == "worked"
    assert events == ["pool opened", "work started", "work ended, pool open", "pool closed"]


async def test_an_endpoint_takes_it_with_provide_and_a_test_overrides_it() -> None:
    container = Application()
    container.wire(modules=[__name__])
    try:
        await container.init_resources()  # type: ignore[misc]
        assert await endpoint() == "worked"
        fake_agent = AgentEntry(Agent(answering(lambda turn: "faked")), name="worker")
        async with Runtime(None, entries=[fake_agent]) as fake:
            with container.runtime.override(fake):
                assert await endpoint() == "faked"
        await container.shutdown_resources()  # type: ignore[misc]
    finally:
        container.unwire()
