"""What a run leaves its caller: the per-run objects by provider name, after their teardown, whether
the run succeeded (`RunResult.per_run`) or failed (`run_report(error)`); and global resources
overridden after start-up are still shut down when the runtime closes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from dependency_injector import providers
from pydantic_ai import Agent

from containers import AgentContainer
from llm_do import AgentEntry, RunLocalSingleton, Runtime, ToolPolicy, Toolset, run_report, tool
from llm_do.testing import Step, Turn, answering, cancelled_run_report, tool_call


class Audit:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.closed = False

    def cleanup(self) -> None:
        self.lines.append("closed")
        self.closed = True


waiting = asyncio.Event()


class Bank(Toolset):
    default_policy = ToolPolicy()  # declared: its calls need no approval (this test is about results)

    def __init__(self, audit: Audit) -> None:
        self.audit = audit

    @tool
    def transfer(self, amount: int) -> str:
        """Move money."""
        self.audit.lines.append(f"transfer {amount}")
        if amount < 0:
            raise ValueError("negative amount")
        return "moved"

    @tool
    async def wait(self) -> str:
        """Wait forever."""
        self.audit.lines.append("waiting")
        waiting.set()
        await asyncio.Event().wait()
        return "unreachable"


class App(AgentContainer):
    audit = RunLocalSingleton(Audit)
    bank = providers.Factory(Bank, audit=audit)


def clerk() -> AgentEntry:
    def script(turn: Turn) -> Step:
        if turn.step == 0:
            return tool_call("wait") if turn.prompt == "wait" else tool_call("transfer", amount=int(turn.prompt))
        return "done"

    return AgentEntry(Agent(answering(script)), name="clerk", toolsets=["bank"])


async def test_a_result_carries_the_runs_per_run_objects_after_their_teardown() -> None:
    async with Runtime(App(), entries=[clerk()]) as runtime:
        first = await runtime.run("clerk", "10")
        second = await runtime.run("clerk", "20")
    assert set(first.per_run) == {"audit"}  # the runtime's own run_state is not reported
    assert first.per_run["audit"].lines == ["transfer 10", "closed"]
    assert second.per_run["audit"].lines == ["transfer 20", "closed"]
    with pytest.raises(TypeError):
        first.per_run["audit"] = Audit()  # type: ignore[index]


async def test_a_failed_run_reports_its_per_run_objects_on_the_exception() -> None:
    async with Runtime(App(), entries=[clerk()]) as runtime:
        with pytest.raises(ValueError, match="negative amount") as raised:
            await runtime.run("clerk", "-5")
    report = run_report(raised.value)
    assert report is not None
    assert report.outcome == "error"
    assert report.per_run["audit"].lines == ["transfer -5", "closed"]
    assert [(call.entry, call.outcome) for call in report.calls] == [("clerk", "error")]
    assert report.usage.requests == 1
    assert run_report(ValueError("not from a run")) is None


async def test_a_cancelled_run_reports_what_it_did_before_the_cancellation() -> None:
    async with Runtime(App(), entries=[clerk()]) as runtime:
        report = await cancelled_run_report(runtime, "clerk", "wait", waiting)
    assert report.per_run["audit"].lines == ["waiting", "closed"]


async def test_a_caller_cancelled_as_its_run_finishes_gets_the_finished_runs_report() -> None:
    """The run ends well, but its caller's cancellation lands before the caller resumes: the
    cancellation carries a report whose outcome is ok, so the caller knows what the run did."""
    caller: asyncio.Task[Any] | None = None

    class CancellingAudit(Audit):
        def cleanup(self) -> None:
            super().cleanup()  # the run's last act: the cancellation lands once the run has ended
            assert caller is not None
            asyncio.get_running_loop().call_soon(caller.cancel)

    container = App()
    container.audit.override(RunLocalSingleton(CancellingAudit))
    async with Runtime(container, entries=[clerk()]) as runtime:
        caller = asyncio.create_task(runtime.run("clerk", "10"))
        with pytest.raises(asyncio.CancelledError) as raised:
            await caller
    report = run_report(raised.value)
    assert report is not None and report.outcome == "ok"
    assert report.per_run["audit"].lines == ["transfer 10", "closed"]
    assert [(call.entry, call.outcome) for call in report.calls] == [("clerk", "ok")]
    assert report.usage.requests == 2


events: list[str] = []


async def pool(name: str) -> AsyncIterator[str]:
    events.append(f"open {name}")
    yield name
    events.append(f"close {name}")


class Pools(Toolset):
    default_policy = ToolPolicy()  # declared: its calls need no approval (this test is about results)

    def __init__(self, pool: str) -> None:
        self.pool = pool

    @tool
    def which(self) -> str:
        """Name the pool in use."""
        return self.pool


class PoolApp(AgentContainer):
    pool = providers.Resource(pool, "real")
    pools = providers.Factory(Pools, pool=pool)


async def test_a_resource_overridden_after_start_up_is_shut_down_when_the_runtime_closes() -> None:
    events.clear()
    app = PoolApp()
    entry = AgentEntry(
        Agent(
            answering(lambda turn: tool_call("which") if turn.step == 0 else str(turn.messages[-1].parts[0].content))
        ),
        name="job",
        toolsets=["pools"],
    )
    await app.init_resources()  # type: ignore[misc]
    async with Runtime(app, entries=[entry]) as runtime:
        assert (await runtime.run("job", "go")).output == "real"
        with app.pool.override(providers.Resource(pool, "fake")):  # after start-up, reset before closing
            await app.pool()  # type: ignore[misc]
            assert (await runtime.run("job", "go")).output == "fake"
        assert (await runtime.run("job", "go")).output == "real"
    assert sorted(events) == ["close fake", "close real", "open fake", "open real"]
