"""Scope isolation through the public API: per-call, per-run and global instances."""

from __future__ import annotations

import asyncio
import itertools
import re
from typing import Any

import pytest
from dependency_injector import providers
from pydantic_ai import Agent, Tool
from pydantic_ai.toolsets import FunctionToolset

from containers import AgentContainer
from llm_do import (
    AgentEntry,
    CallScope,
    Handles,
    RunLocalSingleton,
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
from llm_do.testing import Step, Turn, answering, tool_call

serials = itertools.count(1)


class Pool:
    """Global."""

    def __init__(self) -> None:
        self.serial = next(serials)


class Ledger:
    """Per run."""

    def __init__(self) -> None:
        self.serial = next(serials)
        self.seen: list[int] = []


class Notes(Toolset):
    """Per call."""

    default_policy = ToolPolicy()  # these tests are about scopes, not approvals

    def __init__(self, pool: Pool, ledger: Ledger, ledger_provider: Any) -> None:
        self.serial = next(serials)
        self.pool = pool
        self.ledger = ledger
        self.ledger_provider = ledger_provider
        self.notes: Handles[str] = Handles("note")

    @tool
    def probe(self) -> str:
        """Report which instances this call sees."""
        again = self.ledger_provider()  # resolved inside the tool's task: must be the run's one
        assert again is self.ledger, "per-run provider resolved to another instance inside a tool"
        self.ledger.seen.append(self.serial)
        return f"notes={self.serial} ledger={self.ledger.serial} pool={self.pool.serial}"

    @tool
    def write(self, text: str) -> str:
        """Keep a note; returns its handle."""
        return self.notes.open(text)

    @tool
    def read(self, handle: str) -> str:
        """Read a note by handle."""
        return self.notes.get(handle)


class App(AgentContainer):
    pool = providers.Singleton(Pool)
    ledger = RunLocalSingleton(Ledger)
    notes = providers.Factory(Notes, pool=pool, ledger=ledger, ledger_provider=ledger.provider)


def parse(report: str) -> dict[str, int]:
    return {key: int(value) for key, value in (item.split("=") for item in report.split())}


def recursive_clerk(children: int = 1) -> AgentEntry:
    """probe; at depth 0 ask `children` sub-clerks in parallel; answer with every report seen."""

    def script(turn: Turn) -> Step:
        nested = turn.prompt.startswith("sub")
        if turn.step == 0:
            return tool_call("probe")
        if turn.step == 1 and not nested:
            return [tool_call("clerk", input=f"sub {i}") for i in range(children)]
        return " | ".join(str(r) for r in turn.returns)

    return AgentEntry(Agent(answering(script)), name="clerk", toolsets=["notes", "clerk"])


async def test_recursive_call_gets_fresh_per_call_and_shared_per_run() -> None:
    app = App()
    async with Runtime(app, entries=[recursive_clerk(children=2)]) as runtime:
        result = await runtime.run("clerk", "top")
    top = parse(_probe_of(result, "call_1"))
    subs = [parse(_probe_of(result, record.id)) for record in result.calls[1:]]
    assert len(subs) == 2
    notes = {top["notes"], *(sub["notes"] for sub in subs)}
    assert len(notes) == 3, "each call, parent and parallel children, needs its own per-call toolset"
    assert {top["ledger"], *(sub["ledger"] for sub in subs)} == {top["ledger"]}, "one per-run ledger"
    assert [record.depth for record in result.calls] == [0, 1, 1]
    assert {record.parent for record in result.calls[1:]} == {"call_1"}


def _probe_of(result: Any, call_id: str) -> str:
    from pydantic_ai.messages import ModelRequest, ToolReturnPart

    entry_log = next(item for item in result.log if item.call_id == call_id)
    for message in entry_log.messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart) and part.tool_name == "probe":
                    return str(part.content)
    raise AssertionError(f"no probe in {call_id}")


async def test_two_entries_naming_one_toolset_cannot_share_handles() -> None:
    writer = AgentEntry(
        Agent(answering(lambda turn: tool_call("write", text="secret") if turn.step == 0 else turn.returns[0])),
        name="writer",
        toolsets=["notes"],
    )
    reader = AgentEntry(
        Agent(
            answering(lambda turn: tool_call("read", handle=turn.prompt) if turn.step == 0 else str(turn.returns[0]))
        ),
        name="reader",
        toolsets=["notes"],
    )

    @entry(toolsets=["writer", "reader"])
    async def relay(scope: CallScope, input_data: str) -> str:
        handle = await scope.call_agent("writer", input_data)
        assert handle.startswith("note_")
        return str(await scope.call_agent("reader", handle))

    async with Runtime(App(), entries=[writer, reader, relay]) as runtime:
        result = await runtime.run("relay", "go")
    assert "Unknown handle 'note_" in result.output
    assert "No note handle is open" in result.output
    assert [record.outcome for record in result.calls] == ["ok", "ok", "ok"]


def flat_clerk() -> AgentEntry:
    return AgentEntry(
        Agent(answering(lambda turn: tool_call("probe") if turn.step == 0 else turn.returns[0])),
        name="clerk",
        toolsets=["notes"],
    )


@pytest.mark.long
async def test_concurrent_and_sequential_runs_never_share_scoped_instances() -> None:
    app = App()
    async with Runtime(app, entries=[flat_clerk()]) as runtime:
        concurrent = await asyncio.gather(*(runtime.run("clerk", f"run {i}") for i in range(200)))
        sequential = [await runtime.run("clerk", f"run {i}") for i in range(200)]
    reports = [parse(result.output) for result in [*concurrent, *sequential]]
    assert len({report["ledger"] for report in reports}) == 400
    assert len({report["notes"] for report in reports}) == 400
    assert len({report["pool"] for report in reports}) == 1
    assert runtime.usage.requests == 800


async def test_container_overrides_swap_toolset_and_pool_for_one_test_only() -> None:
    class FakePool(Pool):
        pass

    class FakeNotes(Notes):
        @tool
        def probe(self) -> str:
            """Fake probe."""
            return f"fake pool={type(self.pool).__name__}"

    app = App()
    fake_pool = FakePool()
    with (
        app.pool.override(providers.Object(fake_pool)),
        app.notes.override(
            providers.Factory(FakeNotes, pool=app.pool, ledger=app.ledger, ledger_provider=app.ledger.provider)
        ),
    ):
        async with Runtime(app, entries=[flat_clerk()]) as runtime:
            assert (await runtime.run("clerk", "x")).output == "fake pool=FakePool"
    async with Runtime(app, entries=[flat_clerk()]) as runtime:
        output = (await runtime.run("clerk", "x")).output
    assert output.startswith("notes=")
    assert parse(output)["pool"] != fake_pool.serial


async def test_override_with_another_scope_is_refused_with_a_clear_error() -> None:
    app = App()
    shared = Notes(Pool(), Ledger(), app.ledger.provider)
    with app.notes.override(providers.Object(shared)):
        async with Runtime(app, entries=[flat_clerk()]) as runtime:
            with pytest.raises(TypeError, match=r"Factory is per_call but is overridden by Object \(global\)"):
                await runtime.run("clerk", "x")


async def test_usage_totals_are_the_sum_over_nested_calls() -> None:
    depth_script = answering(
        lambda turn: (
            (tool_call("clerk", input=turn.prompt + "!") if len(turn.prompt) < 4 else "bottom")
            if turn.step == 0
            else f"{turn.prompt}:{turn.returns[0]}"
        )
    )
    nester = AgentEntry(Agent(depth_script), name="clerk", toolsets=["clerk"])
    async with Runtime(None, entries=[nester]) as runtime:
        result = await runtime.run("clerk", "a")
    assert [record.depth for record in result.calls] == [0, 1, 2, 3]
    assert result.output == "a:a!:a!!:bottom"
    total = result.calls[0].usage
    for record in result.calls[1:]:
        total = total + record.usage
    assert (total.requests, total.input_tokens, total.output_tokens) == (
        result.usage.requests,
        result.usage.input_tokens,
        result.usage.output_tokens,
    )
    assert result.usage.requests == 7
    assert runtime.usage.requests == 7


async def test_max_depth_stops_runaway_recursion_naming_the_chain() -> None:
    forever = AgentEntry(
        Agent(answering(lambda turn: tool_call("clerk", input="again"))), name="clerk", toolsets=["clerk"]
    )
    async with Runtime(None, entries=[forever], config=RuntimeConfig(max_depth=2)) as runtime:
        with pytest.raises(Exception, match=r"exceeds max_depth=2: clerk -> clerk -> clerk -> clerk") as raised:
            await runtime.run("clerk", "go")
    assert type(raised.value).__name__ == "MaxDepthExceeded"


async def test_plain_callable_specs_work_without_a_container() -> None:
    class RunCounter(Toolset):
        default_policy = ToolPolicy()  # about scopes, not approvals

        def __init__(self) -> None:
            self.serial = next(serials)
            self.hits = 0

        @tool
        def hit(self) -> str:
            """Count a hit for this run."""
            self.hits += 1
            return f"counter={self.serial} hits={self.hits}"

    script = answering(
        lambda turn: [tool_call("hit"), tool_call("hit")] if turn.step == 0 else " ".join(sorted(turn.returns))
    )
    counting = AgentEntry(Agent(script), name="counting", toolsets=["counter"])
    runtime = Runtime(None, entries=[counting], toolsets={"counter": ToolsetSpec(RunCounter, Scope.PER_RUN)})
    async with runtime:
        first = (await runtime.run("counting", "x")).output
        second = (await runtime.run("counting", "x")).output
    first_counters, second_counters = (
        set(re.findall(r"counter=(\d+)", first)),
        set(re.findall(r"counter=(\d+)", second)),
    )
    assert len(first_counters) == 1 and first.endswith("hits=2"), "parallel calls of one run share the instance"
    assert len(second_counters) == 1 and second.endswith("hits=2")
    assert first_counters != second_counters, "two runs never share a per-run instance"


class SlowPool:
    """A global whose async start-up waits until the test lets it go."""

    release = asyncio.Event()


async def _slow_pool() -> Any:
    await SlowPool.release.wait()
    yield SlowPool()


class Bare(Toolset):
    """Per call, no tools."""

    def __init__(self, pool: SlowPool) -> None:
        self.pool = pool


class SlowPoolApp(AgentContainer):
    pool = providers.Resource(_slow_pool)
    tools = providers.Factory(Bare, pool=pool)  # async: the pool is an async Resource


async def test_a_call_cancelled_while_its_toolset_is_built_from_an_async_provider_logs_nothing() -> None:
    """dependency-injector settles the future of a provider with async dependencies from a callback:
    cancelling the call meanwhile must not make that callback fail (asyncio's InvalidStateError)."""
    SlowPool.release = asyncio.Event()
    loop = asyncio.get_running_loop()
    failures: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: failures.append(context))
    app = SlowPoolApp()
    job = AgentEntry(Agent(answering(lambda turn: "never")), name="job", toolsets=["tools"])
    try:
        async with Runtime(app, entries=[job]) as runtime:
            run = asyncio.create_task(runtime.run("job", "go"))
            for _ in range(20):
                await asyncio.sleep(0)  # the call is waiting for the pool
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
            SlowPool.release.set()  # the pool starts, and the factory's future is settled
            for _ in range(20):
                await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
    assert failures == []


class ReadyPool:
    """Global: an async resource, opened once."""

    opened = 0

    def __init__(self) -> None:
        ReadyPool.opened += 1
        self.serial = ReadyPool.opened


async def _ready_pool() -> Any:
    yield ReadyPool()


class UsesPool(Toolset):
    """Per call: keeps the pool it was given."""

    def __init__(self, pool: Any, kind: str = "real") -> None:
        self.pool = pool
        self.kind = kind


class ReadyPoolApp(AgentContainer):
    pool = providers.Resource(_ready_pool)
    tools = providers.Factory(UsesPool, pool=pool)


async def _shut_down(app: ReadyPoolApp) -> None:
    closing = app.shutdown_resources()
    if closing is not None:  # an awaitable while an async resource is open
        await closing


def _finished_without_suspending(awaitable: Any) -> Any:
    """Drive a coroutine one step: return its result if it finished without yielding to the loop."""
    coroutine = awaitable.__await__()
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise AssertionError("building the toolset waited on the event loop")


async def test_a_factory_on_a_ready_async_resource_is_built_without_waiting_on_the_loop() -> None:
    app = ReadyPoolApp()
    spec = ToolsetSpec.from_provider(app.tools)
    first = await spec.create()  # the pool is opened on the way (dependency-injector's async path)
    assert isinstance(first.pool, ReadyPool)
    second = _finished_without_suspending(spec.create())
    third = _finished_without_suspending(spec.create())
    assert second is not first and third is not second  # still one toolset per call
    assert second.pool is first.pool is third.pool  # the resource's one object
    await _shut_down(app)


async def test_overrides_of_a_ready_async_resource_or_its_factory_still_win() -> None:
    app = ReadyPoolApp()
    spec = ToolsetSpec.from_provider(app.tools)
    real = (await spec.create()).pool
    fake = ReadyPool()
    with app.pool.override(providers.Object(fake)):
        assert (await spec.create()).pool is fake
    assert (await spec.create()).pool is real
    with app.tools.override(providers.Factory(UsesPool, pool=app.pool, kind="fake")):
        built_by_override = await spec.create()
    assert (built_by_override.kind, built_by_override.pool) == ("fake", real)
    app.tools.set_kwargs(pool=providers.Object(fake))  # rewired after load: seen at the next call
    assert (await spec.create()).pool is fake
    app.tools.set_kwargs(pool=app.pool)
    assert (await spec.create()).pool is real
    await _shut_down(app)
    reopened = (await spec.create()).pool  # shut down: opened again through dependency-injector
    assert isinstance(reopened, ReadyPool) and reopened is not real
    await _shut_down(app)


async def test_a_run_gets_the_ready_resource_through_its_per_call_toolset() -> None:
    app = ReadyPoolApp()
    serials: list[int] = []

    @entry(toolsets=["tools"])
    async def job(scope: CallScope, text: str) -> str:
        serials.append(scope.toolset("tools").pool.serial)  # type: ignore[attr-defined]
        return text

    async with Runtime(app, entries=[job]) as runtime:
        for _ in range(3):
            await runtime.run("job", "x")
    assert len(serials) == 3 and len(set(serials)) == 1


class Witness:
    """Per run: where it was resolved, and for which request."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []


class Witnesses(AgentContainer):
    witness = RunLocalSingleton(Witness)


WITNESSES = Witnesses()


class EveryPath(Toolset):
    """Tools that resolve the per-run provider from each place a tool's code can run."""

    default_policy = ToolPolicy()

    @tool
    def on_run_thread(self, tag: str) -> str:
        """A sync tool: on the run's own thread."""
        WITNESSES.witness().seen.append(("run thread", tag))
        return tag

    @tool(thread=False)
    def on_loop(self, tag: str) -> str:
        """A sync tool on the event loop."""
        WITNESSES.witness().seen.append(("loop", tag))
        return tag

    @tool
    async def in_spawned_task(self, tag: str) -> str:
        """An async tool that resolves it in a task of its own."""

        async def spawned() -> Witness:
            await asyncio.sleep(0)
            return WITNESSES.witness()

        (await asyncio.create_task(spawned())).seen.append(("task", tag))
        return tag

    @tool
    async def in_worker_thread(self, tag: str) -> str:
        """An async tool that resolves it in a worker thread (`asyncio.to_thread`)."""
        (await asyncio.to_thread(WITNESSES.witness)).seen.append(("to_thread", tag))
        return tag


def plain_function(tag: str) -> str:
    """A plain sync function tool: pydantic-ai runs it in its worker threads."""
    WITNESSES.witness().seen.append(("plain", tag))
    return tag


async def test_concurrent_runs_each_resolve_their_own_per_run_object_from_threads_tasks_and_nested_calls() -> None:
    paths = ("on_run_thread", "on_loop", "in_spawned_task", "in_worker_thread", "plain_function")

    def script(turn: Turn) -> Step:
        if turn.step > 0:
            return "done"
        calls = [tool_call(path, tag=turn.prompt) for path in paths]
        return calls if turn.prompt.endswith("child") else [*calls, tool_call("job", input=f"{turn.prompt} child")]

    job = AgentEntry(Agent(answering(script)), name="job", toolsets=["every", "plain", "job"])
    toolsets = {"every": EveryPath, "plain": lambda: FunctionToolset([Tool(plain_function)])}
    async with Runtime(WITNESSES, entries=[job], toolsets=toolsets, policies={"plain": ToolPolicy()}) as runtime:
        for _ in range(2):
            results = await asyncio.gather(*(runtime.run("job", f"run {i}") for i in range(20)))
            witnesses = [result.per_run["witness"] for result in results]
            assert len({id(witness) for witness in witnesses}) == 20
            for i, witness in enumerate(witnesses):
                assert sorted(witness.seen) == sorted(
                    (where, tag)
                    for where in ("loop", "plain", "run thread", "task", "to_thread")
                    for tag in (f"run {i}", f"run {i} child")
                )


async def test_a_per_run_object_asked_for_from_a_thread_without_the_runs_context_says_how_to_pass_it() -> None:
    """`loop.run_in_executor` and a bare thread start in no run: the error says so, and what to use instead."""

    class Executor(Toolset):
        default_policy = ToolPolicy()

        @tool
        async def in_executor(self) -> str:
            """Resolve the per-run object in the loop's executor."""
            loop = asyncio.get_running_loop()
            try:
                await loop.run_in_executor(None, WITNESSES.witness)
            except ScopeError as error:
                return str(error)
            return "resolved"

    job = AgentEntry(
        Agent(answering(lambda turn: tool_call("in_executor") if turn.step == 0 else str(turn.returns[0]))),
        name="job",
        toolsets=["executor"],
    )
    async with Runtime(WITNESSES, entries=[job], toolsets={"executor": Executor}) as runtime:
        said = (await runtime.run("job", "go")).output
    assert said.startswith("RunLocalSingleton(Witness) was resolved outside any run")
    assert "loop.run_in_executor" in said and "asyncio.to_thread" in said
