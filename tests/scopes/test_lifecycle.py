"""Teardown: reverse order, exactly once, every outcome, failing and slow finalizers, double cancellation."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
from pydantic_ai import Agent

from llm_do import (
    AgentEntry,
    CallScope,
    Runtime,
    RuntimeConfig,
    Scope,
    ScopeError,
    ToolPolicy,
    Toolset,
    ToolsetSpec,
    entry,
    tool,
)
from llm_do.testing import ScriptedModel, answering, tool_call


class Boom(Exception):
    pass


class Tracked(Toolset):
    def __init__(self, name: str, events: list[str], *, on_cleanup: Callable[[], Any] | None = None) -> None:
        self.name = name
        self.events = events
        self.on_cleanup = on_cleanup

    async def __aenter__(self) -> Tracked:
        self.events.append(f"enter {self.name}")
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.events.append(f"exit {self.name} {exc_type.__name__ if exc_type else None}")

    async def cleanup(self) -> None:
        self.events.append(f"cleanup {self.name}")
        if self.on_cleanup is not None:
            result = self.on_cleanup()
            if asyncio.iscoroutine(result):
                await result
        self.events.append(f"cleaned {self.name}")


class Worker(Tracked):
    def __init__(self, events: list[str], behaviour: Callable[[], Any]) -> None:
        super().__init__("c", events)
        self.behaviour = behaviour

    @tool
    async def work(self) -> str:
        """Do the work."""
        self.events.append("work")
        result = self.behaviour()
        if asyncio.iscoroutine(result):
            result = await result
        return "worked"


def make_runtime(
    events: list[str],
    behaviour: Callable[[], Any] = lambda: None,
    *,
    b_cleanup: Callable[[], Any] | None = None,
    c_cleanup: Callable[[], Any] | None = None,
    timeout: float = 5.0,
) -> Runtime:
    def worker() -> Worker:
        made = Worker(events, behaviour)
        made.on_cleanup = c_cleanup
        return made

    agent = Agent(answering(lambda turn: tool_call("work") if turn.step == 0 else "done"))
    return Runtime(
        None,
        entries=[AgentEntry(agent, name="job", toolsets=["a", "b", "c"])],
        toolsets={
            "a": lambda: Tracked("a", events),
            "b": lambda: Tracked("b", events, on_cleanup=b_cleanup),
            "c": worker,
        },
        policies={"c": ToolPolicy()},  # declared: its calls need no approval (these tests are about teardown)
        config=RuntimeConfig(cleanup_timeout=timeout),
    )


def teardown_of(outcome: str | None) -> list[str]:
    return [
        f"exit c {outcome}",
        "cleanup c",
        "cleaned c",
        f"exit b {outcome}",
        "cleanup b",
        "cleaned b",
        f"exit a {outcome}",
        "cleanup a",
        "cleaned a",
    ]


ENTERED = ["enter a", "enter b", "enter c", "work"]


async def test_success_tears_down_in_reverse_order_exactly_once() -> None:
    events: list[str] = []
    async with make_runtime(events) as runtime:
        result = await runtime.run("job", "go")
    assert result.output == "done"
    assert events == ENTERED + teardown_of(None)


async def test_a_raising_tool_propagates_the_same_exception_after_full_teardown() -> None:
    events: list[str] = []
    raised: list[Boom] = []

    def explode() -> None:
        raised.append(Boom("tool failed"))
        raise raised[-1]

    async with make_runtime(events, explode) as runtime:
        with pytest.raises(Boom) as caught:
            await runtime.run("job", "go")
    assert caught.value is raised[0]
    assert events == ENTERED + teardown_of("Boom")


async def test_cancellation_in_the_middle_of_a_tool_tears_everything_down() -> None:
    events: list[str] = []
    started = asyncio.Event()

    async def hang() -> None:
        started.set()
        await asyncio.Event().wait()

    async with make_runtime(events, hang) as runtime:
        task = asyncio.create_task(runtime.run("job", "go"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert events == ENTERED + teardown_of("CancelledError")


async def test_a_failing_finalizer_is_logged_and_the_others_still_run(caplog: pytest.LogCaptureFixture) -> None:
    events: list[str] = []

    def fail() -> None:
        raise RuntimeError("b cannot clean")

    caplog.set_level(logging.ERROR, logger="llm_do")
    async with make_runtime(events, b_cleanup=fail) as runtime:
        result = await runtime.run("job", "go")
    assert result.output == "done", "a failing finalizer never replaces the body's outcome"
    expected = teardown_of(None)
    expected.remove("cleaned b")
    assert events == ENTERED + expected
    [record] = [r for r in caplog.records if r.name == "llm_do"]
    assert "toolset 'b' (per_call) of entry 'job'" in record.getMessage()
    assert record.exc_info is not None and str(record.exc_info[1]) == "b cannot clean"


async def test_a_failing_finalizer_does_not_replace_the_body_error() -> None:
    events: list[str] = []
    raised: list[Boom] = []

    def explode() -> None:
        raised.append(Boom("first"))
        raise raised[-1]

    def fail() -> None:
        raise RuntimeError("second")

    async with make_runtime(events, explode, b_cleanup=fail) as runtime:
        with pytest.raises(Boom) as caught:
            await runtime.run("job", "go")
    assert caught.value is raised[0]
    assert "cleaned a" in events


async def test_a_second_cancellation_during_a_slow_finalizer_does_not_stop_teardown() -> None:
    events: list[str] = []
    started, cleaning, release = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def hang() -> None:
        started.set()
        await asyncio.Event().wait()

    async def slow_cleanup() -> None:
        cleaning.set()
        await release.wait()

    async with make_runtime(events, hang, c_cleanup=slow_cleanup) as runtime:
        task = asyncio.create_task(runtime.run("job", "go"))
        await started.wait()
        task.cancel()
        await cleaning.wait()
        task.cancel()  # the second cancellation, while c's cleanup is still running
        await asyncio.sleep(0.01)
        assert not task.done()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert events == ENTERED + teardown_of("CancelledError")


async def test_a_finalizer_over_its_time_budget_is_cancelled_and_the_rest_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: list[str] = []

    async def forever() -> None:
        await asyncio.Event().wait()

    caplog.set_level(logging.ERROR, logger="llm_do")
    async with make_runtime(events, c_cleanup=forever, timeout=0.05) as runtime:
        result = await runtime.run("job", "go")
    assert result.output == "done"
    expected = teardown_of(None)
    expected.remove("cleaned c")
    assert events == ENTERED + expected
    assert any("did not finish within 0.05s" in r.getMessage() for r in caplog.records)


async def test_a_failing_factory_is_not_masked_and_earlier_toolsets_are_released() -> None:
    events: list[str] = []
    raised: list[Boom] = []

    def broken() -> Tracked:
        raised.append(Boom("factory failed"))
        raise raised[-1]

    agent = Agent(answering(lambda turn: "never"))
    runtime = Runtime(
        None,
        entries=[AgentEntry(agent, name="job", toolsets=["a", "broken"])],
        toolsets={"a": lambda: Tracked("a", events), "broken": broken},
    )
    async with runtime:
        with pytest.raises(Boom) as caught:
            await runtime.run("job", "go")
    assert caught.value is raised[0]
    assert events == ["enter a", "exit a Boom", "cleanup a", "cleaned a"]


async def test_per_run_and_global_toolsets_are_entered_and_exited_once() -> None:
    events: list[str] = []
    script = answering(
        lambda turn: (
            ([tool_call("job", input="child 1"), tool_call("job", input="child 2")] if turn.prompt == "top" else "leaf")
            if turn.step == 0
            else ",".join(turn.returns)
        )
    )
    runtime = Runtime(
        None,
        entries=[AgentEntry(Agent(script), name="job", toolsets=["run_wide", "shared", "job"])],
        toolsets={
            "run_wide": ToolsetSpec(lambda: Tracked("run", events), Scope.PER_RUN),
            "shared": ToolsetSpec(lambda: _the_global(events), Scope.GLOBAL),
        },
    )
    async with runtime:
        for _ in range(3):
            result = await runtime.run("job", "top")
            assert result.output == "leaf,leaf"
            assert len(result.calls) == 3
    run_cycle = ["enter run", "exit run None", "cleanup run", "cleaned run"]
    assert events == [
        "enter run",
        "enter global",
        *run_cycle[1:],
        *run_cycle,
        *run_cycle,
        "exit global None",
        "cleanup global",
        "cleaned global",
    ]


_globals: dict[int, Tracked] = {}


def _the_global(events: list[str]) -> Tracked:
    return _globals.setdefault(id(events), Tracked("global", events))


async def test_a_failing_per_run_factory_fails_parallel_users_with_its_own_error() -> None:
    raised: list[Boom] = []

    def broken() -> Tracked:
        raised.append(Boom("per-run factory failed"))
        raise raised[-1]

    script = answering(
        lambda turn: [tool_call("job", input="a"), tool_call("job", input="b")] if turn.prompt == "top" else "leaf"
    )
    runtime = Runtime(
        None,
        entries=[
            AgentEntry(Agent(script), name="top", toolsets=["job"]),
            AgentEntry(Agent(script), name="job", toolsets=["run_wide"]),
        ],
        toolsets={"run_wide": ToolsetSpec(broken, Scope.PER_RUN)},
    )
    async with runtime:
        with pytest.raises(Boom) as caught:
            await runtime.run("top", "top")
    assert caught.value in raised


def closing_runtime(events: list[str], release: asyncio.Event, started: asyncio.Event) -> Runtime:
    async def wait_for_release() -> None:
        started.set()
        await release.wait()

    agent = Agent(answering(lambda turn: tool_call("work") if turn.step == 0 else "done"))
    return Runtime(
        None,
        entries=[AgentEntry(agent, name="job", toolsets=["shared", "c"])],
        toolsets={
            "shared": ToolsetSpec(lambda: _the_global(events), Scope.GLOBAL),
            "c": lambda: Worker(events, wait_for_release),
        },
        policies={"c": ToolPolicy()},  # declared: its calls need no approval (these tests are about teardown)
    )


async def test_aclose_waits_for_runs_in_flight_before_tearing_down_globals() -> None:
    events: list[str] = []
    release, started = asyncio.Event(), asyncio.Event()
    runtime = closing_runtime(events, release, started)
    run = asyncio.create_task(runtime.run("job", "go"))
    await started.wait()
    closing = asyncio.create_task(runtime.aclose())
    await asyncio.sleep(0.01)
    assert not closing.done(), "aclose waits while a run is in flight"
    with pytest.raises(RuntimeError, match="closed"):
        await runtime.run("job", "again")
    release.set()
    assert (await run).output == "done"
    await closing
    assert events[-6:] == [
        "exit c None",
        "cleanup c",
        "cleaned c",
        "exit global None",
        "cleanup global",
        "cleaned global",
    ]


async def test_a_cancelled_aclose_cancels_runs_in_flight_and_still_tears_down_in_order() -> None:
    events: list[str] = []
    release, started = asyncio.Event(), asyncio.Event()
    runtime = closing_runtime(events, release, started)
    run = asyncio.create_task(runtime.run("job", "go"))
    await started.wait()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await runtime.aclose()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert events[-6:] == [
        "exit c CancelledError",
        "cleanup c",
        "cleaned c",
        "exit global None",
        "cleanup global",
        "cleaned global",
    ]


class FailsToEnter(Tracked):
    async def __aenter__(self) -> FailsToEnter:
        self.events.append(f"enter {self.name} failed")
        raise Boom("cannot connect")


async def test_a_toolset_that_fails_to_enter_is_not_exited_and_those_before_it_are_torn_down() -> None:
    events: list[str] = []
    runtime = Runtime(
        None,
        entries=[AgentEntry(Agent(answering(lambda turn: "never")), name="job", toolsets=["a", "b"])],
        toolsets={"a": lambda: Tracked("a", events), "b": lambda: FailsToEnter("b", events)},
    )
    async with runtime:
        with pytest.raises(Boom, match="cannot connect"):
            await runtime.run("job", "go")
    assert events == [
        "enter a",
        "enter b failed",
        "cleanup b",  # its cleanup() still runs: it was built
        "cleaned b",
        "exit a Boom",
        "cleanup a",
        "cleaned a",
    ]


async def test_aclose_from_within_one_of_its_runs_refuses_at_once_and_leaves_the_runtime_open() -> None:
    """A tool that shuts its own runtime down: waiting for the runs in flight would wait for itself."""
    runtimes: list[Runtime] = []

    class Console(Toolset):
        @tool
        async def shut_down(self) -> str:
            """Shut the service down."""
            await runtimes[0].aclose()
            return "shut down"

    @entry()
    async def ping(scope: CallScope, input_data: str) -> str:
        return "pong"

    agent = Agent(ScriptedModel(tool_call("shut_down"), lambda turn: "never"))
    job = AgentEntry(agent, name="job", toolsets=["console"])
    runtime = Runtime(None, entries=[job, ping], toolsets={"console": Console}, policies={"console": ToolPolicy()})
    runtimes.append(runtime)
    async with runtime:
        async with asyncio.timeout(10):  # a guard: before, the run waited for itself forever
            with pytest.raises(ScopeError, match=r"Runtime.aclose\(\) was called from within one of its runs"):
                await runtime.run("job", "go")
        assert (await runtime.run("ping", "")).output == "pong"  # still open


class Halt(BaseException):
    """A stop request that is not an `Exception` (as `KeyboardInterrupt` and `SystemExit` are not)."""


class AsyncWorker(Tracked):
    @tool
    async def work(self) -> str:
        """Do the work."""
        self.events.append("work")
        return "worked"


class SyncWorker(Toolset):
    """Released by a sync `__exit__` and a sync `cleanup()`: on the run's own thread, where its sync tool ran."""

    def __init__(self, name: str, events: list[str], on_cleanup: Callable[[], Any]) -> None:
        self.name, self.events, self.on_cleanup = name, events, on_cleanup

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.events.append(f"exit {self.name} {exc_type.__name__ if exc_type else None}")

    def cleanup(self) -> None:
        self.events.append(f"cleanup {self.name}")
        self.on_cleanup()
        self.events.append(f"cleaned {self.name}")

    @tool
    def work(self) -> str:
        """Do the work."""
        self.events.append("work")
        return "worked"


class LoopWorker(SyncWorker):
    """The same, its sync tool (and so its release) on the event loop."""

    @tool(thread=False)
    def work(self) -> str:
        """Do the work."""
        self.events.append("work")
        return "worked"


@pytest.mark.parametrize("stop", [Halt, KeyboardInterrupt, SystemExit], ids=lambda stop: stop.__name__)
@pytest.mark.parametrize("worker", [AsyncWorker, LoopWorker, SyncWorker], ids=lambda worker: worker.__name__)
def test_a_cleanup_raising_a_base_exception_lets_every_other_finalizer_run_then_raises_it(
    stop: type[BaseException], worker: type[Toolset]
) -> None:
    """Ctrl-C (or a `SystemExit`) landing in a cleanup stops the program, but only once every other object of the
    scope is released (nothing is left open, no transaction uncommitted); the stop is raised as it came. (asyncio
    raises a `KeyboardInterrupt` or `SystemExit` of any task out of its event loop: hence a loop of the test's own.)"""
    events: list[str] = []
    raised: list[BaseException] = []

    def halt() -> None:
        raised.append(stop("stop now"))
        raise raised[-1]

    async def serve() -> None:
        agent = Agent(answering(lambda turn: tool_call("work") if turn.step == 0 else "done"))
        runtime = Runtime(
            None,
            entries=[AgentEntry(agent, name="job", toolsets=["a", "b", "c"])],
            toolsets={
                "a": lambda: Tracked("a", events),
                "b": lambda: worker("b", events, on_cleanup=halt),  # type: ignore[call-arg]
                "c": lambda: Tracked("c", events),
            },
            policies={"b": ToolPolicy()},
        )
        async with runtime:
            await runtime.run("job", "go")

    with pytest.raises(stop) as caught:
        asyncio.run(serve())
    assert caught.value is raised[0]
    entered = ["enter a", "enter b", "enter c"] if worker is AsyncWorker else ["enter a", "enter c"]
    assert events == [
        *entered,
        "work",
        "exit c None",
        "cleanup c",
        "cleaned c",
        "exit b None",
        "cleanup b",
        "exit a None",
        "cleanup a",
        "cleaned a",
    ]


async def test_a_cleanup_that_raises_cancelled_error_of_its_own_is_logged_as_failed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A cleanup awaiting something another task cancelled raises `CancelledError` though nobody cancelled the
    run: a failure like any other, logged, not a silence."""
    events: list[str] = []

    async def cancelled_under_it() -> None:
        gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        gone.cancel()
        await gone

    caplog.set_level(logging.ERROR, logger="llm_do")
    async with make_runtime(events, b_cleanup=cancelled_under_it) as runtime:
        result = await runtime.run("job", "go")
    assert result.output == "done"
    expected = teardown_of(None)
    expected.remove("cleaned b")
    assert events == ENTERED + expected
    [record] = [r for r in caplog.records if r.name == "llm_do"]
    assert "cleanup of toolset 'b' (per_call) of entry 'job' failed" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is asyncio.CancelledError


@pytest.mark.parametrize("stop", [Halt, KeyboardInterrupt, SystemExit], ids=lambda stop: stop.__name__)
def test_a_tool_raising_a_base_exception_tears_everything_down_and_the_stop_reaches_the_caller(
    stop: type[BaseException],
) -> None:
    """A tool interrupted by Ctrl-C (or `SystemExit`, or another stop request): every object of the call is released
    before the stop leaves the event loop. asyncio raises a `KeyboardInterrupt` or `SystemExit` of a task out of the
    loop at once, then cancels the tasks left: their teardown is told `CancelledError`; another stop request is the
    run's own outcome, told to every exit and raised unchanged."""
    events: list[str] = []
    raised: list[BaseException] = []

    def halt() -> None:
        raised.append(stop("stop now"))
        raise raised[-1]

    async def serve() -> None:
        async with make_runtime(events, halt) as runtime:
            await runtime.run("job", "go")

    with pytest.raises(stop) as caught:
        asyncio.run(serve())
    assert caught.value is raised[0]
    assert events == ENTERED + teardown_of("Halt" if stop is Halt else "CancelledError")
