"""Sync tools run off the event loop: in their run's own thread, one at a time, finished before teardown.

A sync `@tool` method blocks nothing but its own run: the loop serves every other task meanwhile. A run's sync
tools run one after another on one thread of the run's, so the run's objects are never used by two of them at
once, and a connection a tool opens is released on the thread that opened it. Each wait below is a bound on a
thread that may never be woken (so that a bug fails the test instead of hanging it), never a timing assertion.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import providers
from dependency_injector.wiring import Provide
from pydantic_ai import Agent
from pydantic_ai.messages import FunctionToolResultEvent
from pydantic_ai.toolsets import FunctionToolset

from containers import AgentContainer
from llm_do import (
    AgentEntry,
    CallEvent,
    HandleOpened,
    Handles,
    Runtime,
    RuntimeConfig,
    ToolPolicy,
    Toolset,
    ToolsetError,
    injected,
    tool,
)
from llm_do.testing import ScriptedModel, answering, settle, tool_call, track_leaks

WAKE = 10.0
"""How long a tool waits for something only a free loop (or another run) can do: reached only by a bug."""

ALLOWED = ToolPolicy()


def runtime_of(entry: AgentEntry, toolsets: dict[str, Callable[[], Toolset]], **options: Any) -> Runtime:
    """A runtime whose toolsets' calls run without asking (these tests are about threads, not approvals)."""
    return Runtime(None, entries=[entry], toolsets=toolsets, policies=dict.fromkeys(toolsets, ALLOWED), **options)


def run_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("llm-do run")]


class Waits(Toolset):
    """A sync tool that waits for the loop to set an event."""

    def __init__(self, inside: threading.Event, freed: threading.Event) -> None:
        self.inside, self.freed = inside, freed

    @tool
    def wait(self) -> str:
        """Wait until the event loop answers."""
        self.inside.set()
        answered = self.freed.wait(WAKE)
        return f"answered={answered} loop_thread={threading.current_thread() is threading.main_thread()}"


async def test_a_sync_tool_leaves_the_event_loop_free() -> None:
    inside, freed = threading.Event(), threading.Event()
    ticks = 0

    async def ticker() -> None:  # a task of the loop: it can only run while the loop is free
        nonlocal ticks
        while True:
            ticks += 1
            if inside.is_set():
                freed.set()
            await asyncio.sleep(0.001)

    waiter = AgentEntry(Agent(ScriptedModel(tool_call("wait"), lambda turn: turn.returns[0])), name="w", toolsets=["w"])
    ticking = asyncio.create_task(ticker())
    try:
        async with runtime_of(waiter, {"w": lambda: Waits(inside, freed)}) as runtime:
            result = await runtime.run("w", "go")
    finally:
        ticking.cancel()
    assert result.output == "answered=True loop_thread=False"
    assert ticks > 1
    assert run_threads() == []  # the run's thread ended with the run


class Counts(Toolset):
    """Sync tools that record who is inside, and on which thread."""

    def __init__(self, log: list[tuple[str, str, int]], lock: threading.Lock, inside: list[int]) -> None:
        self.log, self.lock, self.inside = log, lock, inside

    def _visit(self, name: str) -> str:
        with self.lock:
            self.inside.append(1)
            self.log.append(("enter", name, threading.get_ident()))
        time.sleep(0.05)  # the time for a tool that could overlap this one to come in
        with self.lock:
            self.inside.pop()
            self.log.append(("exit", name, threading.get_ident()))
        return name

    @tool
    def first(self) -> str:
        """The first of two tools called at once."""
        return self._visit("first")

    @tool
    def second(self) -> str:
        """The second of two tools called at once."""
        return self._visit("second")


async def test_one_runs_sync_tools_run_one_at_a_time_on_one_thread_not_the_loops() -> None:
    log: list[tuple[str, str, int]] = []
    lock, inside = threading.Lock(), []
    both = AgentEntry(
        Agent(ScriptedModel([tool_call("first"), tool_call("second")], [tool_call("first")], "done")),
        name="both",
        toolsets=["counts"],
    )
    async with runtime_of(both, {"counts": lambda: Counts(log, lock, inside)}) as runtime:
        await runtime.run("both", "go")
    assert [(kind, name) for kind, name, _ in log[:4]] in (
        [("enter", "first"), ("exit", "first"), ("enter", "second"), ("exit", "second")],
        [("enter", "second"), ("exit", "second"), ("enter", "first"), ("exit", "first")],
    )
    threads = {ident for _, _, ident in log}
    assert len(log) == 6 and len(threads) == 1  # the next model turn's tool ran on the same thread too
    assert threading.get_ident() not in threads


class Meets(Toolset):
    """A sync tool that waits until the other run's tool is running too."""

    def __init__(self, arrived: dict[str, threading.Event]) -> None:
        self.arrived = arrived

    @tool
    def meet(self, me: str, other: str) -> str:
        """Arrive, then wait for the other run's tool."""
        self.arrived[me].set()
        return f"{me} met {other}: {self.arrived[other].wait(WAKE)}"


async def test_two_runs_run_their_sync_tools_at_the_same_time() -> None:
    arrived = {"a": threading.Event(), "b": threading.Event()}
    model = answering(
        lambda turn: (
            tool_call("meet", me=turn.prompt, other="b" if turn.prompt == "a" else "a")
            if turn.step == 0
            else turn.returns[0]
        )
    )
    meeting = AgentEntry(Agent(model), name="meet", toolsets=["meets"])
    async with runtime_of(meeting, {"meets": lambda: Meets(arrived)}) as runtime:
        a, b = await asyncio.gather(runtime.run("meet", "a"), runtime.run("meet", "b"))
    assert (a.output, b.output) == ("a met b: True", "b met a: True")


class Ledger(Toolset):
    """SQLite the ordinary way (`check_same_thread` left on): a transaction opened by a tool, kept under a
    handle or on the toolset, released when the call ends by `cleanup()` or the handle map."""

    def __init__(self, path: Path, log: list[str]) -> None:
        self.path, self.log = path, log
        self.conn: sqlite3.Connection | None = None
        self.txns: Handles[sqlite3.Connection] = Handles("txn")  # forgotten: conn.rollback(), on its own thread

    @tool
    def open(self) -> str:
        """Open a connection that cleanup() closes."""
        self.conn = sqlite3.connect(self.path, isolation_level=None, timeout=0)
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("INSERT INTO notes VALUES ('kept by cleanup')")
        return "opened"

    @tool
    def begin(self) -> str:
        """Open a transaction under a handle, never committed."""
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=0)
        conn.execute("BEGIN")
        conn.execute("INSERT INTO notes VALUES ('forgotten')")
        return self.txns.open(conn)

    def cleanup(self) -> None:
        if self.conn is not None:
            self.conn.execute("ROLLBACK")
            self.conn.close()
            self.log.append("closed")


def notes_database(folder: Path) -> Path:
    path = folder / "notes.db"
    with sqlite3.connect(path) as setup:
        setup.execute("CREATE TABLE notes (text TEXT)")
    setup.close()
    return path


async def test_a_sqlite_connection_a_sync_tool_opens_is_released_on_its_thread(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path, log = notes_database(tmp_path), []
    clerk = AgentEntry(
        Agent(ScriptedModel(tool_call("open"), "opened", tool_call("begin"), "begun")), name="clerk", toolsets=["db"]
    )
    async with runtime_of(clerk, {"db": lambda: Ledger(path, log)}) as runtime:
        await runtime.run("clerk", "open")
        await runtime.run("clerk", "begin")
    assert log == ["closed"]
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]
    check = sqlite3.connect(path, timeout=0)  # a lock still held would refuse this write at once
    try:
        check.execute("INSERT INTO notes VALUES ('after')")
        assert check.execute("SELECT text FROM notes").fetchall() == [("after",)]
    finally:
        check.close()


class MadeOnTheLoop(Toolset):
    """A connection made in `__init__` (on the event loop, when the call builds its toolsets)."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path)

    @tool
    def count(self) -> int:
        """Count the notes."""
        return int(self.conn.execute("SELECT count(*) FROM notes").fetchone()[0])

    @tool(thread=False)
    def count_on_the_loop(self) -> str:
        """Count the notes on the event loop's thread."""
        return f"{self.count()} on the loop: {threading.current_thread() is threading.main_thread()}"

    def cleanup(self) -> None:
        self.conn.close()


async def test_a_tool_declared_thread_false_runs_on_the_loop(tmp_path: Path) -> None:
    path = notes_database(tmp_path)
    clerk = AgentEntry(
        Agent(ScriptedModel(tool_call("count_on_the_loop"), lambda turn: turn.returns[0])), name="c", toolsets=["db"]
    )
    async with runtime_of(clerk, {"db": lambda: MadeOnTheLoop(path)}) as runtime:
        assert (await runtime.run("c", "go")).output == "0 on the loop: True"


async def test_a_sqlite_object_from_another_thread_is_explained(tmp_path: Path) -> None:
    path = notes_database(tmp_path)
    clerk = AgentEntry(Agent(ScriptedModel(tool_call("count"), "never")), name="c", toolsets=["db"])
    async with runtime_of(clerk, {"db": lambda: MadeOnTheLoop(path)}) as runtime:
        with pytest.raises(ToolsetError) as raised:
            await runtime.run("c", "go")
    message = str(raised.value)
    assert "tool 'count' of MadeOnTheLoop ran in its run's own thread" in message
    assert "check_same_thread=False" in message and "@tool(thread=False)" in message
    assert isinstance(raised.value.__cause__, sqlite3.ProgrammingError)


class UsesTheLoop(Toolset):
    @tool
    def schedule(self) -> str:
        """Schedule a callback on the running loop."""
        asyncio.get_running_loop().call_soon(print)
        return "scheduled"


async def test_a_sync_tool_that_needs_the_running_loop_is_explained() -> None:
    clerk = AgentEntry(Agent(ScriptedModel(tool_call("schedule"), "never")), name="c", toolsets=["loop"])
    async with runtime_of(clerk, {"loop": UsesTheLoop}) as runtime:
        with pytest.raises(ToolsetError, match=r"no event loop runs there: make it `async def`, or declare it"):
            await runtime.run("c", "go")


class Stuck(Toolset):
    """A sync tool that runs until released; its teardown says whether the tool had returned."""

    def __init__(self, log: list[str], inside: threading.Event, release: threading.Event) -> None:
        self.log, self.inside, self.release = log, inside, release

    @tool
    def work(self) -> str:
        """Work until released."""
        self.inside.set()
        self.release.wait(WAKE)
        self.log.append("tool returned")
        return "worked"

    async def __aexit__(self, *exc_info: object) -> None:
        self.log.append("exit")

    def cleanup(self) -> None:
        self.log.append("cleanup")


async def wait_for(event: threading.Event) -> None:
    for _ in range(int(WAKE / 0.005)):
        if event.is_set():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the tool never started")


async def test_a_cancelled_call_waits_for_its_sync_tool_before_teardown() -> None:
    log: list[str] = []
    inside, release = threading.Event(), threading.Event()
    worker = AgentEntry(Agent(ScriptedModel(tool_call("work"), "never")), name="w", toolsets=["stuck"])
    with track_leaks() as leaks:
        async with runtime_of(worker, {"stuck": lambda: Stuck(log, inside, release)}) as runtime:
            task = asyncio.create_task(runtime.run("w", "go"))
            await wait_for(inside)
            task.cancel()
            for _ in range(20):
                await asyncio.sleep(0)  # the run waits for its tool, however often the loop turns
            assert not task.done() and log == []
            release.set()
            with pytest.raises(asyncio.CancelledError):
                await task
        assert log == ["tool returned", "exit", "cleanup"]
        await settle()
        leaks.assert_no_leaks()
    assert run_threads() == []


async def test_a_sync_tool_still_running_after_the_cleanup_budget_is_left_behind_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log: list[str] = []
    inside, release = threading.Event(), threading.Event()
    worker = AgentEntry(Agent(ScriptedModel(tool_call("work"), "never")), name="w", toolsets=["stuck"])
    runtime = runtime_of(
        worker, {"stuck": lambda: Stuck(log, inside, release)}, config=RuntimeConfig(cleanup_timeout=0.05)
    )
    try:
        async with runtime:
            task = asyncio.create_task(runtime.run("w", "go"))
            await wait_for(inside)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        assert "tool returned" not in log and "exit" in log
        errors = [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]
        assert any(
            "tool 'work' of Stuck was still running 0.05s after its call was cancelled" in error for error in errors
        ), errors
    finally:
        release.set()
    for thread in run_threads():
        await asyncio.to_thread(thread.join, WAKE)
    assert run_threads() == []
    assert log[-1] == "tool returned"


async def test_a_handle_a_sync_tool_opens_joins_the_stream_before_the_tools_result() -> None:
    class Opens(Toolset):
        def __init__(self) -> None:
            self.items: Handles[str] = Handles("item", on_forget=lambda _: None)

        @tool
        def open(self) -> str:
            """Open an item."""
            return self.items.open("x")

    clerk = AgentEntry(Agent(ScriptedModel(tool_call("open"), "done")), name="c", toolsets=["opens"])
    async with runtime_of(clerk, {"opens": Opens}) as runtime, runtime.stream("c", "go") as run:
        events = [event async for event in run]
    kinds = [
        "opened" if isinstance(event, HandleOpened) else "result"
        for event in events
        if isinstance(event, HandleOpened)
        or (isinstance(event, CallEvent) and isinstance(event.event, FunctionToolResultEvent))
    ]
    assert kinds == ["opened", "result"]


async def test_nothing_of_a_run_stays_with_its_thread() -> None:
    log: list[tuple[str, str, int]] = []
    lock, inside = threading.Lock(), []
    both = AgentEntry(
        Agent(answering(lambda turn: [tool_call("first"), tool_call("second")] if turn.step == 0 else "done")),
        name="both",
        toolsets=["counts"],
    )
    with track_leaks() as leaks:
        async with runtime_of(both, {"counts": lambda: Counts(log, lock, inside)}) as rt:
            for _ in range(3):
                await rt.run("both", "go")
            await settle()
            leaks.assert_no_leaks()
    assert run_threads() == []


class Teller:
    def where(self) -> str:
        return threading.current_thread().name


@injected
def injected_where(teller: Teller = Provide["teller"]) -> str:
    """Where an injected sync function runs."""
    return f"injected on {teller.where()}"


def plain_where() -> str:
    """Where pydantic-ai runs a plain sync function tool."""
    return f"plain on {threading.current_thread().name}"


class Bank(AgentContainer):
    teller = providers.Singleton(Teller)
    tools = providers.Object(FunctionToolset([injected_where, plain_where]))


async def test_an_injected_sync_function_runs_on_its_runs_thread_and_a_plain_one_where_pydantic_ai_runs_it() -> None:
    both = [tool_call("injected_where"), tool_call("plain_where")]
    clerk = AgentEntry(
        Agent(ScriptedModel(both, lambda turn: " | ".join(turn.returns))), name="clerk", toolsets=["tools"]
    )
    async with Runtime(Bank(), entries=[clerk], policies={"tools": ALLOWED}) as runtime:
        injected_on, plain_on = (await runtime.run("clerk", "go")).output.split(" | ")
    assert injected_on == "injected on llm-do run"
    assert plain_on.startswith("plain on ") and plain_on not in ("plain on llm-do run", "plain on MainThread")
