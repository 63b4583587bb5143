"""Supervision of MCP servers: start-up failures that say what to do, restarts with backoff, giving up
with the server's command, exit code and stderr, and a streamable-HTTP server on loopback (uvicorn)."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import containers, providers
from fastmcp.client.transports import StdioTransport
from pydantic_ai.mcp import MCPToolset

from llm_do import Runtime, RuntimeConfig
from llm_do.mcp import McpOptions, McpServer, McpServerError, McpServersError

from ..mcp_support import SERVER, agent_entry, answers_of, free_port, http_server, plan, server_processes, stdio_toolset

APPROVE_ALL = RuntimeConfig(approval_mode="approve_all")


def stdio(command: str, *args: str, **env: str) -> MCPToolset[Any]:
    return MCPToolset(StdioTransport(command, list(args), env=env or None))


async def test_a_missing_command_names_the_server_and_what_to_do() -> None:
    server = McpServer(stdio("no-such-mcp-server-xyz", "--flag"), name="ghost")
    async with server:
        with pytest.raises(McpServerError) as caught:
            await server.connection()
    message = str(caught.value)
    assert "MCP server 'ghost' (no-such-mcp-server-xyz --flag) could not be started" in message
    assert "command 'no-such-mcp-server-xyz' was not found" in message
    assert "fix the server's `command`" in message


async def test_a_crash_at_start_gives_the_exit_code_and_the_last_lines_of_stderr() -> None:
    server = McpServer(stdio(sys.executable, str(SERVER), COUNTER_CRASH_AT_START="1"), name="counter")
    async with server:
        with pytest.raises(McpServerError) as caught:
            await server.connection()
    error = caught.value
    assert error.exit_code == 3
    assert "crashed during start-up" in str(error)
    assert "refusing to start (COUNTER_CRASH_AT_START is set)" in str(error)
    assert server_processes() == []


async def test_a_server_that_never_answers_the_handshake_times_out_and_is_killed() -> None:
    silent = stdio(sys.executable, "-c", "import time; time.sleep(600)")
    server = McpServer(silent, name="silent", options=McpOptions(startup_timeout=1.0, stop_grace=0.5))
    async with server:
        with pytest.raises(McpServerError) as caught:
            await server.connection()
        assert "did not finish starting within 1.0s" in str(caught.value)
        assert server.pid is None  # its process is gone
    assert "answers the handshake" in str(caught.value)


async def test_a_server_that_keeps_failing_backs_off_then_gives_up_with_its_last_error() -> None:
    options = McpOptions(max_restarts=2, backoff=0.3, cooldown=60)
    server = McpServer(stdio("no-such-mcp-server-xyz"), name="ghost", options=options)
    async with server:
        for _ in range(2):  # a first failure is retried at once
            with pytest.raises(McpServerError, match="was not found"):
                await server.connection()
        with pytest.raises(McpServerError, match=r"not started again for another 0\.[0-3]s"):
            await server.connection()  # backing off: the last error, without a start
        await asyncio.sleep(0.35)
        with pytest.raises(McpServerError, match="was not found"):
            await server.connection()  # a third start: past max_restarts
        with pytest.raises(McpServerError, match=r"not started again for another [56][0-9]\.[0-9]s") as caught:
            await server.connection()
    message = str(caught.value)
    assert "ghost" in message and "no-such-mcp-server-xyz" in message and "fix the server's `command`" in message


async def test_a_failing_global_server_fails_the_run_with_a_clear_error() -> None:
    class App(containers.DeclarativeContainer):
        broken = providers.Singleton(lambda: stdio(sys.executable, str(SERVER), COUNTER_CRASH_AT_START="1"))

    async with Runtime(App(), entries=[agent_entry("clerk", ["broken"])], config=APPROVE_ALL) as rt:
        with pytest.raises(McpServerError, match=r"MCP server 'broken'.*crashed during start-up"):
            await rt.run("clerk", plan("read_count"))


async def test_a_global_server_that_died_between_runs_is_restarted_on_next_use() -> None:
    class App(containers.DeclarativeContainer):
        shared = providers.Singleton(stdio_toolset)

    async with Runtime(App(), entries=[agent_entry("clerk", ["shared"])], config=APPROVE_ALL) as rt:
        first = answers_of(await rt.run("clerk", plan(("bump", {"by": 3}), "server_pid")))
        (pid,) = server_processes()
        import os
        import signal

        os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.5)
        second = answers_of(await rt.run("clerk", plan("read_count", "server_pid")))
        assert first[0] == 3 and second[0] == 0
        assert second[1] != pid
    assert server_processes() == []


async def test_the_model_reads_that_a_server_is_down_but_not_its_command_line_nor_its_url(tmp_path: Path) -> None:
    """The command line (or URL) can hold a token and server-side paths: it is for the operator's logs."""
    crashed = tmp_path / "crash"
    starter = (
        f"import os, runpy, sys\nif os.path.exists({str(crashed)!r}):\n    sys.exit(3)\n"
        f"sys.argv = [{str(SERVER)!r}]\nrunpy.run_path({str(SERVER)!r}, run_name='__main__')"
    )

    class App(containers.DeclarativeContainer):
        shared = providers.Singleton(lambda: stdio(sys.executable, "-c", starter, "--token=s3cret-arg"))

    async with Runtime(App(), entries=[agent_entry("clerk", ["shared"])], config=APPROVE_ALL) as rt:
        (pid,) = answers_of(await rt.run("clerk", plan("server_pid")))
        crashed.touch()  # it cannot start again
        os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.5)
        (down,) = answers_of(await rt.run("clerk", plan("read_count")))
    assert down.startswith("Tool 'read_count' was not run: MCP server 'shared' ")
    assert "s3cret" not in down and str(SERVER) not in down and sys.executable not in down


QUICK = McpOptions(backoff=0.1, backoff_max=0.2, cooldown=0.5)


class HttpServers(containers.DeclarativeContainer):
    url = providers.Object("")
    shared = providers.Singleton(McpServer, providers.Singleton(MCPToolset, url), name="shared", options=QUICK)


@pytest.mark.long
async def test_a_streamable_http_server_on_loopback_is_shared_reports_a_drop_and_reconnects(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    marker = tmp_path / "waiting"
    app = HttpServers(url=providers.Object(url))
    async with Runtime(app, entries=[agent_entry("clerk", ["shared"])], config=APPROVE_ALL) as rt:
        with http_server(port) as process:
            results = await asyncio.gather(
                *(rt.run("clerk", plan(("bump", {"by": 1}), "server_pid")) for _ in range(10))
            )
            assert len({answers_of(result)[1] for result in results}) == 1
            assert sorted(answers_of(result)[0] for result in results) == list(range(1, 11))
            waiting = asyncio.create_task(
                rt.run("clerk", plan(("wait", {"seconds": 60, "marker": str(marker)}), "read_count"))
            )
            while not marker.exists():  # noqa: ASYNC110 - polled between sleeps
                await asyncio.sleep(0.05)
            process.kill()  # the server stops under the call
            lost, down = answers_of(await waiting)  # the run went on, each call a readable tool error
        assert "MCP server 'shared'" in lost and "'wait'" in lost
        assert "Tool 'read_count' was not run: MCP server 'shared'" in down
        with http_server(port):  # back: the next use reconnects (a fresh server, a fresh counter)
            await asyncio.sleep(QUICK.cooldown)  # past any backoff
            (count,) = answers_of(await rt.run("clerk", plan("read_count")))
            assert count == 0


def test_a_toolset_that_connects_per_agent_run_is_left_to_pydantic_ai() -> None:
    from llm_do.mcp import own_mcp_toolsets

    per_user = MCPToolset("http://127.0.0.1:9/mcp", headers=lambda ctx: {"X-User": str(ctx.deps)})
    assert own_mcp_toolsets(per_user, "per_user") is per_user
    fixed = MCPToolset("http://127.0.0.1:9/mcp", headers={"X-User": "ada"})
    owned = own_mcp_toolsets(fixed, "fixed")
    assert isinstance(owned, McpServer) and own_mcp_toolsets(fixed, "fixed") is owned  # one server per toolset


async def test_servers_a_call_needs_start_together_and_each_failure_is_reported() -> None:
    class App(containers.DeclarativeContainer):
        good = providers.Factory(stdio_toolset)
        crash = providers.Factory(lambda: stdio(sys.executable, str(SERVER), COUNTER_CRASH_AT_START="1"))
        ghost = providers.Factory(lambda: stdio("no-such-mcp-server-xyz"))

    async with Runtime(App(), entries=[agent_entry("clerk", ["good", "crash", "ghost"])], config=APPROVE_ALL) as rt:
        with pytest.raises(McpServersError) as caught:
            await rt.run("clerk", plan("read_count"))
    assert [(error.server, error.exit_code) for error in caught.value.errors] == [("crash", 3), ("ghost", None)]
    assert "2 MCP servers could not be started ('crash', 'ghost')" in str(caught.value)
    assert server_processes() == []


async def test_a_start_whose_call_was_cancelled_reports_its_failure_to_nobody(caplog: pytest.LogCaptureFixture) -> None:
    late_crash = "import sys, time; time.sleep(1); sys.exit(3)"

    class App(containers.DeclarativeContainer):
        late = providers.Factory(lambda: stdio(sys.executable, "-c", late_crash))

    async with Runtime(App(), entries=[agent_entry("clerk", ["late"])], config=APPROVE_ALL) as rt:
        run = asyncio.create_task(rt.run("clerk", plan("read_count")))
        await asyncio.sleep(0.3)  # the server is starting
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
    gc.collect()
    await asyncio.sleep(0)
    assert "never retrieved" not in caplog.text


async def test_a_run_cancelled_while_its_server_starts_stops_the_start_and_its_process() -> None:
    silent = "import time; time.sleep(600)  # never answers the handshake"
    options = McpOptions(startup_timeout=120)

    class App(containers.DeclarativeContainer):
        slow = providers.Factory(lambda: McpServer(stdio(sys.executable, "-c", silent), name="slow", options=options))

    async with Runtime(App(), entries=[agent_entry("clerk", ["slow"])], config=APPROVE_ALL) as rt:
        run = asyncio.create_task(rt.run("clerk", plan("read_count")))
        while not server_processes("never answers"):  # noqa: ASYNC110 - polled between sleeps
            await asyncio.sleep(0.05)
        run.cancel()
        await asyncio.wait((run,), timeout=30)  # well before its start-up timeout
        assert run.cancelled()
        assert server_processes("never answers") == []
