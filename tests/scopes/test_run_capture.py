"""Nothing of a run outlives it, even in context snapshots that a global resource keeps after the run
(a pool arming an idle timer from a tool, as asyncpg does on every connection release)."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import re
import warnings
import weakref
from typing import Any

import pytest
from dependency_injector import providers
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelResponse
from pydantic_ai.tool_manager import ToolManager

from containers import AgentContainer
from llm_do import (
    AgentEntry,
    CallScope,
    CapturablePerRunWarning,
    RunLocalSingleton,
    RunState,
    Runtime,
    ScopeError,
    Toolset,
    tool,
)
from llm_do.testing import ScriptedModel, Step, Turn, answering, tool_call, track_leaks

pytestmark = pytest.mark.usefixtures("tools_without_a_policy_run")  # not about approvals: undeclared tools run


class Pool:
    """Global. Each connection re-arms a 300 s idle timer when it is released (cancelling its last one)."""

    def __init__(self, connections: int = 8) -> None:
        self.timers: list[asyncio.TimerHandle | None] = [None] * connections
        self.released = 0

    def release(self) -> None:
        slot = self.released % len(self.timers)
        self.released += 1
        previous = self.timers[slot]
        if previous is not None:
            previous.cancel()
        self.timers[slot] = asyncio.get_running_loop().call_later(300, self.expire)

    def expire(self) -> None:
        """Close an idle connection (never reached in these tests)."""

    def close(self) -> None:
        for timer in self.timers:
            if timer is not None:
                timer.cancel()


class Audit:
    def __init__(self) -> None:
        self.lines: list[str] = []


class Ledger(Toolset):
    def __init__(self, pool: Pool, audit: Audit, audit_provider: Any) -> None:
        self.pool, self.audit, self.audit_provider = pool, audit, audit_provider

    @tool(thread=False)  # the pool arms its timer on the running loop: on the loop, not on the run's thread
    def work(self, note: str) -> str:
        """Do some work, then release the connection."""
        self.audit.lines.append(note)
        self.pool.release()
        same = self.audit_provider() is self.audit  # a tool resolving the per-run provider itself
        return f"worked same-audit={same}"


class App(AgentContainer):
    pool = providers.Singleton(Pool)
    audit = RunLocalSingleton(Audit)
    ledger = providers.Factory(Ledger, pool=pool, audit=audit, audit_provider=audit.provider)


class PlainApp(App):
    audit = providers.ContextLocalSingleton(Audit)
    ledger = providers.Factory(Ledger, pool=App.pool, audit=audit, audit_provider=audit.provider)


def clerk() -> AgentEntry:
    def script(turn: Turn) -> Step:
        if turn.step == 0:
            return [tool_call("work", note=turn.prompt), tool_call("work", note=turn.prompt + "!")]  # in parallel
        if turn.step == 1 and turn.prompt.startswith("nested"):
            return tool_call("clerk", input="child")
        return "done"

    # On the loop: a sync model's worker threads would each keep their last job's messages.
    return AgentEntry(Agent(answering(script, threads=False)), name="clerk", toolsets=["ledger", "clerk"])


async def alive(kind: type) -> int:
    await asyncio.sleep(0)  # the loop lets go of the last finished task (and the results the test dropped)
    gc.collect()
    return sum(isinstance(obj, kind) for obj in gc.get_objects())


@pytest.mark.long
async def test_context_snapshots_taken_during_runs_keep_nothing_of_them() -> None:
    app = App()
    baseline = await alive(ModelResponse)
    async with Runtime(app, entries=[clerk()]) as runtime:
        outputs = [(await runtime.run("clerk", f"nested {i}")).output for i in range(25)]
        gathered = await asyncio.gather(*(runtime.run("clerk", f"run {i}") for i in range(25)))
        del gathered
        pool = app.pool()
        assert pool.released == 25 * 4 + 25 * 2 and all(timer is not None for timer in pool.timers)
        # The pool's timers hold context snapshots taken inside tools of the last runs.
        assert await alive(ModelResponse) == baseline
        for kind in (Audit, RunState, Ledger):
            assert await alive(kind) == 0, kind
        scopes = [obj for obj in gc.get_objects() if isinstance(obj, CallScope)]
        assert all(scope._toolsets == [] and scope._all_messages == [] for scope in scopes)
        # pydantic-ai's run context of each of those calls: no tools, toolsets, prompt or messages left
        contexts = [obj for obj in gc.get_objects() if isinstance(obj, RunContext) and obj.deps in scopes]
        assert contexts
        assert all(ctx.tool_manager is None and ctx.prompt is None and ctx.messages == [] for ctx in contexts)
        assert await alive(ToolManager) == 0
        with pytest.raises(ScopeError, match="has ended"):
            _ = scopes[0].state
        pool.close()
    assert set(outputs) == {"done"}


class Briefed(Ledger):
    """Writes instructions: pydantic-ai gets it lent alone, not in the group of plain toolsets."""

    async def get_instructions(self, ctx: RunContext[Any]) -> str:
        return "Work carefully."


@pytest.mark.parametrize("toolset", [Ledger, Briefed])
async def test_the_context_a_sync_model_answered_in_keeps_no_toolset_of_its_call(toolset: type[Ledger]) -> None:
    """pydantic-ai runs a sync model function in a worker thread, in a copy of the run's context that
    holds its run context for the request, tools included. The thread lets go of that copy only when
    it next gets the CPU, which under load is after the call has ended (and a leak check has run)."""
    app = App()
    kept: list[contextvars.Context] = []

    def answer(turn: Turn) -> str:
        kept.append(contextvars.copy_context())  # what the worker thread still holds
        return "done"

    entry = AgentEntry(Agent(ScriptedModel(tool_call("work", note="a"), answer)), name="clerk", toolsets=["ledger"])
    with (
        app.ledger.override(
            providers.Factory(toolset, pool=app.pool, audit=app.audit, audit_provider=app.audit.provider)
        ),
        track_leaks() as leaks,
    ):
        async with Runtime(app, entries=[entry]) as runtime:
            assert (await runtime.run("clerk", "go")).output == "done"
            leaks.assert_no_leaks()
            app.pool().close()
    assert len(kept) == 1


async def test_a_tool_resolving_a_per_run_provider_gets_its_runs_instance() -> None:
    async with Runtime(App(), entries=[clerk()]) as runtime:
        result = await runtime.run("clerk", "nested")
    returns = [
        part.content
        for message in result.messages
        for part in getattr(message, "parts", [])
        if part.part_kind == "tool-return"
    ]
    assert returns[:2] == ["worked same-audit=True"] * 2
    audit = result.per_run["audit"]
    assert audit.lines == ["nested", "nested!", "child", "child!"]  # parent and nested child: one audit


async def test_after_its_run_a_per_run_provider_refuses_to_build_a_new_empty_instance() -> None:
    app = App()
    captured: list[contextvars.Context] = []

    class Capturing(Ledger):
        @tool
        def capture(self) -> str:
            """Keep the context, as a scheduled callback would."""
            captured.append(contextvars.copy_context())
            return "captured"

    entry = AgentEntry(
        Agent(answering(lambda turn: tool_call("capture") if turn.step == 0 else "done")),
        name="job",
        toolsets=["ledger"],
    )
    with app.ledger.override(
        providers.Factory(Capturing, pool=app.pool, audit=app.audit, audit_provider=app.audit.provider)
    ):
        async with Runtime(app, entries=[entry]) as runtime:
            await runtime.run("job", "go")
    with pytest.raises(ScopeError, match=r"RunLocalSingleton\(Audit\) was resolved after its run ended"):
        captured[0].run(app.audit)
    with pytest.raises(
        ScopeError, match=r"RunLocalSingleton\(Audit\) was resolved outside any run.*RunResult\.per_run"
    ):
        app.audit()


async def test_plain_context_local_singletons_are_named_and_their_capture_is_explained() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runtime = Runtime(PlainApp(), entries=[clerk()])
    assert runtime.capturable == ("audit",)
    [warning] = [w for w in caught if issubclass(w.category, CapturablePerRunWarning)]
    assert "'audit'" in str(warning.message) and "RunLocalSingleton" in str(warning.message)
    assert warning.filename == __file__  # points at the user's Runtime(...) line
    with track_leaks() as leaks:
        async with runtime:
            await runtime.run("clerk", "go")
            await asyncio.sleep(0)  # the loop lets go of the finished run's task (and its result)
            found = leaks.leaks()
            runtime.container.pool().close()  # type: ignore[union-attr]
    assert len(found) == 1, found
    assert re.fullmatch(
        r"Audit of per-run provider 'audit' outlived its scope; made by Audit \(tests/scopes/test_run_capture\.py:\d+\)"
        r"(?: in a scope opened at [^;]+)?; held by the value of ContextVar "
        r"'_storage' in a context snapshot kept by a timer \(call_later/call_at\) calling Pool\.expire "
        r"\(tests/scopes/test_run_capture\.py:\d+\) \(a ContextLocalSingleton keeps its instance in the context, .*"
        r"declare the provider with llm_do\.RunLocalSingleton\).*",
        found[0],
    ), found[0]


async def test_nothing_of_a_cancelled_run_is_alive_once_aclose_returns() -> None:
    started = asyncio.Event()

    class Hanging(Toolset):
        def __init__(self, audit: Audit) -> None:
            self.audit = audit

        @tool
        async def hang(self) -> str:
            """Never return."""
            started.set()
            await asyncio.Event().wait()
            return "unreachable"

    class HangApp(AgentContainer):
        audit = RunLocalSingleton(Audit)
        hanging = providers.Factory(Hanging, audit=audit)

    entry = AgentEntry(Agent(answering(lambda turn: tool_call("hang"))), name="job", toolsets=["hanging"])
    runtime = Runtime(HangApp(), entries=[entry])
    task = asyncio.create_task(runtime.run("job", "go"))
    await started.wait()
    watched = [weakref.ref(obj) for obj in gc.get_objects() if isinstance(obj, Audit | Hanging | RunState)]
    assert len(watched) == 3
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    del task
    await runtime.aclose()
    assert [ref() for ref in watched] == [None, None, None]  # no settle() and no loop turn needed
