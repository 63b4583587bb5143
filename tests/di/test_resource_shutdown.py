"""A runtime closing shuts its container's `Resource`s down as it releases any object: every one, a failing or
hanging one included, dependents first, each within the cleanup budget, failures logged and never raised."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from dependency_injector import providers
from pydantic_ai import Agent

from containers import AgentContainer
from llm_do import AgentEntry, Runtime, RuntimeConfig, ToolPolicy, Toolset, tool
from llm_do.testing import answering, tool_call


class Boom(Exception):
    pass


class Uses(Toolset):
    def __init__(self, client: str) -> None:
        self.client = client

    @tool
    async def work(self) -> str:
        """Use the client."""
        return self.client


def runtime_of(events: list[str], fail: bool = False, hang: bool = False) -> Runtime:
    async def opened(name: str, *built_from: str) -> AsyncIterator[str]:  # (a container copies its arguments)
        events.append(f"open {name}")
        yield name
        events.append(f"close {name}")
        if name == "client" and hang:
            await asyncio.Event().wait()
        if name == "client" and fail:
            raise Boom(f"{name} cannot close")
        events.append(f"closed {name}")

    class App(AgentContainer):
        pool = providers.Resource(opened, "pool")
        client = providers.Resource(opened, "client", pool)  # built from the pool
        uses = providers.Factory(Uses, client)

    agent = Agent(answering(lambda turn: tool_call("work") if turn.step == 0 else turn.returns[0]))
    return Runtime(
        App(),
        entries=[AgentEntry(agent, name="job", toolsets=["uses"])],
        policies={"uses": ToolPolicy()},
        config=RuntimeConfig(cleanup_timeout=0.2),
    )


async def test_a_resource_that_fails_to_close_is_logged_and_what_it_was_built_from_is_still_closed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: list[str] = []
    caplog.set_level(logging.ERROR, logger="llm_do")
    async with runtime_of(events, fail=True) as runtime:
        assert (await runtime.run("job", "go")).output == "client"
    assert events == ["open pool", "open client", "close client", "close pool", "closed pool"]
    [record] = [r for r in caplog.records if r.name == "llm_do"]
    assert "resource 'client'" in record.getMessage()
    assert record.exc_info is not None and str(record.exc_info[1]) == "client cannot close"


async def test_a_failing_resource_does_not_replace_the_error_of_the_block_that_used_the_runtime() -> None:
    events: list[str] = []
    with pytest.raises(LookupError, match="the caller's own"):
        async with runtime_of(events, fail=True) as runtime:
            await runtime.run("job", "go")
            raise LookupError("the caller's own")
    assert events[-1] == "closed pool"


async def test_a_resource_that_hangs_as_it_closes_is_given_up_after_the_budget_and_the_rest_close(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: list[str] = []
    caplog.set_level(logging.ERROR, logger="llm_do")
    async with asyncio.timeout(30):  # a guard: before, closing the runtime waited for the resource forever
        async with runtime_of(events, hang=True) as runtime:
            await runtime.run("job", "go")
    assert events == ["open pool", "open client", "close client", "close pool", "closed pool"]
    assert any(
        "resource 'client'" in r.getMessage() and "did not finish within" in r.getMessage() for r in caplog.records
    )


async def test_a_close_cancelled_while_a_resource_closes_still_shuts_every_resource_down_then_ends_cancelled() -> None:
    events: list[str] = []
    closing, release = asyncio.Event(), asyncio.Event()

    async def opened(name: str, *built_from: str) -> AsyncIterator[str]:
        yield name
        events.append(f"close {name}")
        if name == "client":
            closing.set()
            await release.wait()
        events.append(f"closed {name}")

    class App(AgentContainer):
        pool = providers.Resource(opened, "pool")
        client = providers.Resource(opened, "client", pool)
        uses = providers.Factory(Uses, client)

    agent = Agent(answering(lambda turn: tool_call("work") if turn.step == 0 else turn.returns[0]))
    runtime = Runtime(
        App(), entries=[AgentEntry(agent, name="job", toolsets=["uses"])], policies={"uses": ToolPolicy()}
    )
    await runtime.run("job", "go")
    shutting = asyncio.create_task(runtime.aclose())
    await closing.wait()
    shutting.cancel()  # a shutdown deadline passes while the client closes
    await asyncio.sleep(0)
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await shutting
    assert events == ["close client", "closed client", "close pool", "closed pool"]
