"""MCP servers declared as plain pydantic-ai `MCPToolset`s in providers of every scope, against the
real fastmcp counter server on stdio: sharing, isolation, and no process left behind."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from pathlib import Path

import pytest
from dependency_injector import containers, providers
from pydantic_ai.exceptions import ToolFailed

from llm_do import RunLocalSingleton, Runtime, RuntimeConfig, SessionLocalSingleton, entry
from llm_do.mcp import McpServer

from ..mcp_support import agent_entry, alive, plan, server_processes, stdio_toolset
from ..tiers import sized

APPROVE_ALL = RuntimeConfig(approval_mode="approve_all")  # tools not annotated read-only ask by default


class Servers(containers.DeclarativeContainer):
    shared = providers.Singleton(stdio_toolset)
    per_run = RunLocalSingleton(stdio_toolset)
    per_call = providers.Factory(stdio_toolset)


def runtime(*entries: object) -> Runtime:
    return Runtime(Servers(), entries=entries, config=APPROVE_ALL)  # type: ignore[arg-type]


def answers(output: str) -> list[object]:
    return [json.loads(item) if isinstance(item, str) and item[:1].isdigit() else item for item in json.loads(output)]


async def test_a_global_server_is_one_process_shared_by_50_concurrent_runs_and_gone_after_aclose() -> None:
    rt = runtime(agent_entry("clerk", ["shared"]))
    results = await asyncio.gather(*(rt.run("clerk", plan(("bump", {"by": 1}), "server_pid")) for _ in range(50)))
    pids = {answers(result.output)[1] for result in results}
    counts = sorted(answers(result.output)[0] for result in results)
    assert len(pids) == 1
    assert counts == list(range(1, 51))  # one counter: every run saw the others' bumps
    (pid,) = pids
    assert server_processes() == [pid]
    await rt.aclose()
    assert not alive(pid)
    assert server_processes() == []


@pytest.mark.long
async def test_each_call_gets_its_own_server_and_its_process_ends_with_the_call() -> None:
    seen: list[int] = []

    @entry(name="parent", toolsets=["per_call", "child"])
    async def parent(scope, data):  # type: ignore[no-untyped-def]
        first = await scope.call_tool("bump", {"by": 5})
        pid = await scope.call_tool("server_pid")
        seen.append(pid)
        child = await scope.call_agent("child", plan(("bump", {"by": 1}), "server_pid"))
        assert alive(pid)  # the parent's call is still running
        return [first, pid, answers(child)]

    async with runtime(parent, agent_entry("child", ["per_call"])) as rt:
        output = (await rt.run("parent", "")).output
        again = (await rt.run("parent", "")).output
        assert server_processes() == []  # per-call servers are gone before aclose
    first, pid, (child_count, child_pid) = output
    assert first == 5 and child_count == 1  # the child's server has its own, fresh counter
    assert child_pid != pid
    assert again[1] != pid and again[0] == 5
    assert not alive(pid) and not alive(child_pid)


async def test_a_per_run_server_is_shared_by_the_calls_of_one_run_only() -> None:
    @entry(name="parent", toolsets=["per_run", "child"])
    async def parent(scope, data):  # type: ignore[no-untyped-def]
        first = await scope.call_tool("bump", {"by": 1})
        child = answers(await scope.call_agent("child", plan(("bump", {"by": 1}), "server_pid")))
        return [first, *child, await scope.call_tool("server_pid")]

    async with runtime(parent, agent_entry("child", ["per_run"])) as rt:
        one = (await rt.run("parent", "")).output
        two = (await rt.run("parent", "")).output
        assert server_processes() == []
    assert one[:2] == [1, 2] and one[2] == one[3]  # parent and child: one server
    assert two[:2] == [1, 2] and two[2] != one[2]  # the next run: a fresh one


class PerSession(containers.DeclarativeContainer):
    mine = SessionLocalSingleton(stdio_toolset)


@entry(name="counting", toolsets=["mine"])
async def counting(scope, by):  # type: ignore[no-untyped-def]
    return [await scope.call_tool("bump", {"by": by}), await scope.call_tool("server_pid")]


@pytest.mark.long
async def test_a_per_session_server_lasts_across_its_sessions_runs_and_ends_when_the_session_idles_out() -> None:
    config = RuntimeConfig(approval_mode="approve_all", session_idle_timeout=0.2)
    async with Runtime(PerSession(), entries=[counting], config=config) as rt:
        alice = await rt.session("alice")
        first, second = [(await alice.run("counting", 1)).output for _ in range(2)]
        assert first[0] == 1 and second == [2, first[1]]  # one server across Alice's runs: her count goes on
        bob = await rt.session("bob")
        bobs, third = await asyncio.gather(bob.run("counting", 5), alice.run("counting", 1))
        assert third.output == [3, first[1]]
        assert bobs.output[0] == 5 and bobs.output[1] != first[1]  # Bob's server is his own
        await alice.wait_closed()
        await bob.wait_closed()
        assert not alive(first[1]) and not alive(bobs.output[1])  # each one's process ended with the session
        again = (await rt.run("counting", 1, session="alice")).output
        assert again[0] == 1 and again[1] != first[1]  # the id opened again: a new session, a new server
        alone = (await rt.run("counting", 7)).output  # a run given no session is a session of its own
        assert alone[0] == 7 and not alive(alone[1])
    assert server_processes() == []


@pytest.mark.long
@pytest.mark.deep
async def test_no_process_is_left_after_many_runs_with_per_call_servers() -> None:
    """6 runs in `make test`, 20 in `make test-deep`, four at a time."""
    runs = sized(dev=6, deep=20)
    gate = asyncio.Semaphore(4)

    async def one(rt: Runtime) -> int:
        async with gate:
            result = await rt.run("clerk", plan(("bump", {"by": 1}), "server_pid"))
        count, pid = answers(result.output)
        assert count == 1
        return int(pid)

    async with runtime(agent_entry("clerk", ["per_call"])) as rt:
        pids = await asyncio.gather(*(one(rt) for _ in range(runs)))
        assert len(set(pids)) == runs
        assert server_processes() == []
    assert not any(alive(pid) for pid in pids)


async def _started(calls: list[int]) -> int:
    for _ in range(600):
        if calls:
            return calls[0]
        await asyncio.sleep(0.05)
    raise AssertionError("the server never answered")


@pytest.mark.parametrize("cancellations", [1, 2])
async def test_a_call_cancelled_mid_tool_leaves_no_per_call_process(cancellations: int) -> None:
    pids: list[int] = []

    @entry(name="waiter", toolsets=["per_call"])
    async def waiter(scope, data):  # type: ignore[no-untyped-def]
        pids.append(await scope.call_tool("server_pid"))
        return await scope.call_tool("wait", {"seconds": 60})

    async with runtime(waiter) as rt:
        task = asyncio.create_task(rt.run("waiter", ""))
        pid = await _started(pids)
        await asyncio.sleep(0.2)  # inside the wait tool
        task.cancel()
        if cancellations == 2:
            await asyncio.sleep(0.05)  # teardown under way: cancel it again
            task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not alive(pid)
        assert server_processes() == []


async def test_a_global_server_outlives_a_cancelled_run_entered_in_it_and_closes_from_another_task(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pids: list[int] = []

    @entry(name="waiter", toolsets=["shared"])
    async def waiter(scope, data):  # type: ignore[no-untyped-def]
        pids.append(await scope.call_tool("server_pid"))
        return await scope.call_tool("wait", {"seconds": data})

    rt = runtime(waiter)
    first = asyncio.create_task(rt.run("waiter", 60))  # the first user of the server is this task
    pid = await _started(pids)
    await asyncio.sleep(0.2)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert alive(pid)
    assert (await rt.run("waiter", 0)).output == "waited 0.0"
    assert pids[-1] == pid
    with caplog.at_level(logging.WARNING):
        await asyncio.create_task(rt.aclose())  # closed from yet another task
    assert not alive(pid)
    assert "cancel scope" not in caplog.text


async def _until(path: Path) -> None:
    for _ in range(1200):
        if path.exists():  # noqa: ASYNC240 - polled between sleeps
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


async def test_a_global_server_killed_mid_call_gives_a_tool_error_and_restarts_on_next_use(tmp_path: Path) -> None:
    pids: list[int] = []

    @entry(name="waiter", toolsets=["shared"])
    async def waiter(scope, data):  # type: ignore[no-untyped-def]
        pids.append(await scope.call_tool("server_pid"))
        return await scope.call_tool("wait", {"seconds": 60})

    async with runtime(waiter, agent_entry("clerk", ["shared"])) as rt:
        await rt.run("clerk", plan(("bump", {"by": 7})))
        marker = tmp_path / "waiting"
        waiting = plan("server_pid", ("wait", {"seconds": 60, "marker": str(marker)}), "read_count")
        clerk = asyncio.create_task(rt.run("clerk", waiting))
        await _until(marker)  # the clerk is inside `wait`
        (pid,) = server_processes()
        os.kill(pid, signal.SIGKILL)
        first, lost, after = answers((await clerk).output)
        assert first == pid
        assert "MCP server 'shared' stopped while running tool 'wait' (exit code -9)" in lost
        assert after == 0  # the run went on: the next call restarted the server, with a fresh counter
        (new_pid,) = server_processes()
        assert new_pid != pid
    assert server_processes() == []


async def test_a_per_call_server_killed_mid_call_leaves_nothing_and_the_run_goes_on(tmp_path: Path) -> None:
    marker = tmp_path / "waiting"
    async with runtime(agent_entry("clerk", ["per_call"])) as rt:
        waiting = plan(("wait", {"seconds": 60, "marker": str(marker)}), ("bump", {"by": 2}))
        clerk = asyncio.create_task(rt.run("clerk", waiting))
        await _until(marker)
        (pid,) = server_processes()
        os.kill(pid, signal.SIGKILL)
        lost, count = answers((await clerk).output)
        assert "stopped while running tool 'wait'" in lost
        assert count == 2
        assert server_processes() == []


async def test_a_server_started_from_a_task_keeps_nothing_of_that_tasks_context() -> None:
    import contextvars
    import gc
    import weakref

    class Marker:
        pass

    marker: contextvars.ContextVar[Marker] = contextvars.ContextVar("marker")
    server = McpServer(stdio_toolset(), name="counter")
    async with server:
        held = [Marker()]
        ref = weakref.ref(held[0])

        async def first_use() -> None:
            marker.set(held[0])  # in this task's own copy of the context
            await server.connection()

        await asyncio.create_task(first_use())
        held.clear()
        await asyncio.sleep(0)  # the loop lets go of the finished task
        gc.collect()
        assert ref() is None  # the owner task and the session's tasks did not copy the caller's context
        pid = server.pid
        assert pid is not None and alive(pid)
        owner = server._conn.task  # type: ignore[union-attr]
        assert owner is not None and owner.get_name() == "llm-do MCP server counter"
    assert not alive(pid)


async def test_a_server_from_load_mcp_toolsets_is_owned_through_its_prefixed_wrapper(tmp_path: Path) -> None:
    import sys

    from pydantic_ai.mcp import load_mcp_toolsets

    from ..mcp_support import SERVER

    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"counter": {"command": sys.executable, "args": [str(SERVER)]}}}))

    class FromJson(containers.DeclarativeContainer):
        counter = providers.Singleton(lambda: load_mcp_toolsets(config)[0])

    rt = Runtime(FromJson(), entries=[agent_entry("clerk", ["counter"])], config=APPROVE_ALL)
    result = await rt.run("clerk", plan(("counter_bump", {"by": 4}), "counter_server_pid"))
    count, pid = answers(result.output)
    assert count == 4 and alive(int(pid))
    await rt.aclose()
    assert not alive(int(pid))
    assert server_processes() == []


async def test_a_global_server_killed_under_concurrent_calls_fails_each_and_is_started_again_once(
    tmp_path: Path,
) -> None:
    async with runtime(agent_entry("clerk", ["shared"])) as rt:
        markers = [tmp_path / f"waiting {i}" for i in range(5)]
        runs = [
            asyncio.create_task(rt.run("clerk", plan(("wait", {"seconds": 60, "marker": str(marker)}), "read_count")))
            for marker in markers
        ]
        for marker in markers:
            await _until(marker)  # every run is inside `wait`
        (pid,) = server_processes()
        os.kill(pid, signal.SIGKILL)
        for run in runs:
            lost, after = answers((await run).output)
            assert "MCP server 'shared' stopped while running tool 'wait' (exit code -9)" in lost
            assert after == 0  # each run went on, on the restarted server
        (new_pid,) = server_processes()  # started again once, for all of them
        assert new_pid != pid
    assert server_processes() == []


async def test_a_per_run_server_killed_mid_call_is_restarted_for_its_run_alone(tmp_path: Path) -> None:
    """Another run's server, inside a call at that moment, is not touched: its call completes, its count goes on."""
    pids: dict[str, int] = {}

    @entry(name="counter_run", toolsets=["per_run"])
    async def counter_run(scope, data):  # type: ignore[no-untyped-def]
        name, by, seconds = data.split()
        pids[name] = await scope.call_tool("server_pid")
        await scope.call_tool("bump", {"by": int(by)})
        try:
            waited = await scope.call_tool("wait", {"seconds": float(seconds), "marker": str(tmp_path / name)})
        except ToolFailed as error:
            waited = str(error)
        return [waited, await scope.call_tool("read_count"), await scope.call_tool("server_pid")]

    async with runtime(counter_run) as rt:
        run_a = asyncio.create_task(rt.run("counter_run", "a 3 60"))
        run_b = asyncio.create_task(rt.run("counter_run", "b 5 2"))
        await _until(tmp_path / "a")
        await _until(tmp_path / "b")  # both runs are inside `wait`, each on a server of its own
        assert pids["a"] != pids["b"]
        os.kill(pids["a"], signal.SIGKILL)
        lost, count_a, pid_a = (await run_a).output
        waited, count_b, pid_b = (await run_b).output
        assert "MCP server 'per_run' stopped while running tool 'wait' (exit code -9)" in lost
        assert (count_a, pid_a != pids["a"]) == (0, True)  # run a went on, on a server started again for it
        assert (waited, count_b, pid_b) == ("waited 2.0", 5, pids["b"])  # run b's server and count are its own
    assert server_processes() == []
