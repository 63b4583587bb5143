"""Every object a scope adopts is released by the protocol docs/toolset-state.md states, or refused when adopted:
each shape (an exit without an enter, a sync context manager, close(), aclose(), cleanup() beside __aexit__, ...)
at each scope (per call, per run, per session, global), on success, error and cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from dependency_injector import providers
from dependency_injector.wiring import Provide
from pydantic_ai import Agent

from containers import AgentContainer
from llm_do import (
    AgentEntry,
    RunLocalSingleton,
    Runtime,
    Scope,
    ScopeError,
    SessionLocalSingleton,
    ToolPolicy,
    Toolset,
    ToolsetSpec,
    tool,
)
from llm_do.testing import answering, tool_call


class Boom(Exception):
    pass


class Log(list[str]):
    """What happened to the objects, shared with the copies of the providers a container instance makes."""

    def __deepcopy__(self, memo: dict[int, object]) -> Log:
        return self


def said(exc_type: type[BaseException] | None) -> str:
    return "ok" if exc_type is None else exc_type.__name__


class Shape:
    def __init__(self, log: list[str]) -> None:
        self.log = log


class ExitOnly(Shape):
    """A unit of work: commits or rolls back on the scope's outcome, and has nothing to do on entry."""

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        self.log.append(f"aexit {said(exc_type)}")


class SyncContext(Shape):
    def __enter__(self) -> SyncContext:
        self.log.append("enter")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        self.log.append(f"exit {said(exc_type)}")


class SyncExitOnly(Shape):
    def __exit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        self.log.append(f"exit {said(exc_type)}")


class Closes(Shape):
    def close(self) -> None:
        self.log.append("close")


class AsyncCloses(Shape):
    async def aclose(self) -> None:
        await asyncio.sleep(0)
        self.log.append("aclose")

    def close(self) -> None:  # aclose() is preferred
        self.log.append("close")


class CleansAndExits(Shape):
    async def __aenter__(self) -> CleansAndExits:
        self.log.append("aenter")
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        self.log.append(f"aexit {said(exc_type)}")

    def cleanup(self) -> None:
        self.log.append("cleanup")


class BothProtocols(CleansAndExits):
    """Async and sync context manager (and a close()): the async protocol alone is used."""

    def __enter__(self) -> BothProtocols:
        self.log.append("enter")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.log.append("exit")

    def close(self) -> None:
        self.log.append("close")


class EnterOnly(Shape):
    async def __aenter__(self) -> EnterOnly:
        self.log.append("aenter")
        return self


class SyncEnterOnly(Shape):
    def __enter__(self) -> SyncEnterOnly:
        self.log.append("enter")
        return self


RELEASED: dict[type[Shape], Callable[[str], list[str]]] = {
    ExitOnly: lambda outcome: [f"aexit {outcome}"],
    SyncContext: lambda outcome: ["enter", f"exit {outcome}"],
    SyncExitOnly: lambda outcome: [f"exit {outcome}"],
    Closes: lambda outcome: ["close"],
    AsyncCloses: lambda outcome: ["aclose"],
    CleansAndExits: lambda outcome: ["aenter", f"aexit {outcome}", "cleanup"],
    BothProtocols: lambda outcome: ["aenter", f"aexit {outcome}", "cleanup"],
}
"""What the scope does to each shape, given the outcome its exit is told."""

KINDS: dict[str, Callable[..., providers.Provider[Any]]] = {
    "call": providers.Factory,
    "run": RunLocalSingleton,
    "session": SessionLocalSingleton,
}


class Worker(Toolset):
    def __init__(self, behaviour: Callable[[], Any]) -> None:
        self.behaviour = behaviour

    @tool
    async def work(self, thing: Shape = Provide["thing"]) -> str:
        """Work with the thing."""
        result = self.behaviour()
        if asyncio.iscoroutine(result):
            await result
        return "worked"


def runtime_with(kind: str, shape: type[Shape], log: list[str], behaviour: Callable[[], Any]) -> Runtime:
    app_class = type(
        "App",
        (AgentContainer,),
        {"thing": KINDS[kind](shape, log), "worker": providers.Factory(Worker, behaviour)},
    )
    agent = Agent(answering(lambda turn: tool_call("work") if turn.step == 0 else "done"))
    job = AgentEntry(agent, name="job", toolsets=["worker"])
    return Runtime(app_class(), entries=[job], policies={"worker": ToolPolicy()})


def fail() -> None:
    raise Boom("the body failed")


async def run_with(runtime: Runtime, outcome: str, session: str | None) -> None:
    """Run `job` to `outcome` (ok, Boom, CancelledError)."""
    if outcome == "ok":
        assert (await runtime.run("job", "go", session=session)).output == "done"
    elif outcome == "Boom":
        with pytest.raises(Boom):
            await runtime.run("job", "go", session=session)
    else:
        running = asyncio.create_task(runtime.run("job", "go", session=session))
        await STARTED[id(runtime)].wait()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running


STARTED: dict[int, asyncio.Event] = {}


def behaviour_for(outcome: str, started: asyncio.Event) -> Callable[[], Any]:
    async def hang() -> None:
        started.set()
        await asyncio.Event().wait()

    return {"ok": lambda: None, "Boom": fail, "CancelledError": hang}[outcome]


OUTCOMES = ["ok", "Boom", "CancelledError"]


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.parametrize("shape", list(RELEASED), ids=lambda shape: shape.__name__)
@pytest.mark.parametrize("kind", ["call", "run"])
async def test_a_per_call_or_per_run_object_is_released_by_its_protocol_told_the_outcome(
    kind: str, shape: type[Shape], outcome: str
) -> None:
    log = Log()
    started = asyncio.Event()
    runtime = runtime_with(kind, shape, log, behaviour_for(outcome, started))
    STARTED[id(runtime)] = started
    async with runtime:
        await run_with(runtime, outcome, None)
        assert log == RELEASED[shape](outcome), "released when its call (or run) ended, told how it ended"
    assert log == RELEASED[shape](outcome), "exactly once"


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.parametrize("shape", list(RELEASED), ids=lambda shape: shape.__name__)
async def test_a_per_session_object_is_released_by_its_protocol_when_the_session_closes(
    shape: type[Shape], outcome: str
) -> None:
    log = Log()
    started = asyncio.Event()
    runtime = runtime_with("session", shape, log, behaviour_for(outcome, started))
    STARTED[id(runtime)] = started
    async with runtime:
        session = await runtime.session("ada")
        await run_with(runtime, outcome, "ada")
        entered = RELEASED[shape]("ok")[:1] if shape in (SyncContext, CleansAndExits, BothProtocols) else []
        assert log == entered, "the session outlives its run"
        await session.aclose()
        assert log == RELEASED[shape]("ok"), "a session ends well: its objects are told no error"


@pytest.mark.parametrize("shape", list(RELEASED), ids=lambda shape: shape.__name__)
async def test_a_per_session_object_of_a_run_given_no_session_is_told_the_runs_outcome(shape: type[Shape]) -> None:
    log = Log()
    runtime = runtime_with("session", shape, log, fail)
    async with runtime:
        await run_with(runtime, "Boom", None)
        assert log == RELEASED[shape]("Boom")


@pytest.mark.parametrize("shape", [EnterOnly, SyncEnterOnly], ids=lambda shape: shape.__name__)
@pytest.mark.parametrize("kind", ["call", "run", "session"])
async def test_an_object_with_an_enter_but_no_exit_is_refused_naming_its_provider(
    kind: str, shape: type[Shape]
) -> None:
    log = Log()
    runtime = runtime_with(kind, shape, log, lambda: None)
    half = "__aenter__ but no __aexit__" if shape is EnterOnly else "__enter__ but no __exit__"
    named = {
        "call": r"provider 'thing' for Worker\.work\(thing\) of entry 'job' \(per call\)",
        "run": "per-run provider 'thing'",
        "session": "per-session provider 'thing'",
    }
    async with runtime:
        with pytest.raises(ScopeError, match=rf"{named[kind]}: {shape.__name__} has {half}.*give it"):
            await runtime.run("job", "go")
    assert log == [], "never entered"


class ToolsetShape(Toolset):
    def __init__(self, log: list[str]) -> None:
        self.log = log

    @tool(read_only=True)
    def work(self) -> str:
        """Work."""
        return "worked"


class SyncContextToolset(ToolsetShape):
    def __enter__(self) -> SyncContextToolset:
        self.log.append("enter")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        self.log.append(f"exit {said(exc_type)}")


class EnterOnlyToolset(ToolsetShape):
    """Overrides pydantic-ai's __aenter__ alone (its __aexit__ does nothing)."""

    async def __aenter__(self) -> EnterOnlyToolset:
        self.log.append("aenter")
        return self


class ExitOnlyToolset(ToolsetShape):
    async def __aexit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        self.log.append(f"aexit {said(exc_type)}")


class ClosingToolset(ToolsetShape):
    @tool
    def close(self) -> str:
        """Close the account (a tool, not a release)."""
        self.log.append("the close tool ran")
        return "closed"


TOOLSETS: dict[type[ToolsetShape], list[str]] = {
    SyncContextToolset: ["enter", "exit ok"],
    EnterOnlyToolset: ["aenter"],
    ExitOnlyToolset: ["aexit ok"],
    ClosingToolset: [],  # a toolset's close() may be a tool: never called to release it
}


@pytest.mark.parametrize("shape", list(TOOLSETS), ids=lambda shape: shape.__name__)
@pytest.mark.parametrize("scope", [Scope.PER_CALL, Scope.PER_RUN, Scope.GLOBAL])
async def test_a_toolset_is_released_by_its_protocol_at_each_scope(shape: type[ToolsetShape], scope: Scope) -> None:
    log: list[str] = []
    made: list[ToolsetShape] = []

    def make() -> ToolsetShape:
        if scope is not Scope.GLOBAL or not made:
            made.append(shape(log))
        return made[-1]

    agent = Agent(answering(lambda turn: tool_call("work") if turn.step == 0 else "done"))
    runtime = Runtime(
        None,
        entries=[AgentEntry(agent, name="job", toolsets=["shaped"])],
        toolsets={"shaped": ToolsetSpec(make, scope)},
    )
    async with runtime:
        assert (await runtime.run("job", "go")).output == "done"
        if scope is not Scope.GLOBAL:
            assert log == TOOLSETS[shape]
    assert log == TOOLSETS[shape]


async def test_a_toolset_a_resource_gives_is_released_by_the_resource_alone() -> None:
    """dependency-injector's `Resource` enters what its generator's `async with` gives and exits it at
    `shutdown_resources()`: the runtime neither enters nor exits it a second time."""
    log: list[str] = []

    async def opened() -> AsyncIterator[CleansAndExitsToolset]:
        async with CleansAndExitsToolset(log) as toolset:
            yield toolset
        log.append("the resource's generator finished")

    class App(AgentContainer):
        shaped = providers.Resource(opened)

    agent = Agent(answering(lambda turn: tool_call("work") if turn.step == 0 else "done"))
    async with Runtime(App(), entries=[AgentEntry(agent, name="job", toolsets=["shaped"])]) as runtime:
        for _ in range(2):
            assert (await runtime.run("job", "go")).output == "done"
        assert log == ["aenter"]
    assert log == ["aenter", "aexit ok", "the resource's generator finished"]


class CleansAndExitsToolset(ToolsetShape):
    async def __aenter__(self) -> CleansAndExitsToolset:
        self.log.append("aenter")
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        self.log.append(f"aexit {said(exc_type)}")
