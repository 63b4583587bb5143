"""`OwnedStdioTransport`: a stdio MCP server process whose whole life is one session.

fastmcp's stdio transport keeps the process alive between sessions by default and hides it. This
one starts the process when a session opens and ends it when the session closes: stdin is closed,
then the process group gets SIGTERM, then SIGKILL after a grace period; if llm-do dies first,
`llm_do.process.children` ends the group. It keeps what supervision needs: the pid, the exit code and the
last lines of stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc
import mcp_types
from fastmcp.client.transports import StdioTransport
from fastmcp.client.transports.base import TransportOptions
from mcp import ClientSession
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from ..process import children

__all__ = ["OwnedStdioTransport", "ServerCommandNotFound"]

logger = logging.getLogger("llm_do.mcp")

_POLL = 0.02
_STDIN_GRACE = 0.5
_CHUNK = 65536


class ServerCommandNotFound(FileNotFoundError):
    """The server's command could not be run (not found, or not executable)."""


class OwnedStdioTransport(StdioTransport):
    """A stdio transport that owns its server process: one process per session, ended with the session.

    `env` is laid over the few variables MCP clients pass by default (PATH, HOME, ...); `grace` is
    how long the process has to exit after SIGTERM before it is killed. `stderr_lines` of the
    server's stderr are kept for error messages (`stderr_tail`) and logged at debug level.
    """

    def __init__(
        self,
        command: str,
        args: list[str],
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        *,
        grace: float = 2.0,
        stderr_lines: int = 20,
    ) -> None:
        super().__init__(command, list(args), env=env, cwd=cwd, keep_alive=False)
        self.grace = grace
        self.pid: int | None = None
        """The pid of the running process (also its process group), None between sessions."""
        self.stderr_tail: deque[str] = deque(maxlen=stderr_lines)
        self._process: asyncio.subprocess.Process | None = None

    @classmethod
    def replacing(cls, transport: StdioTransport, *, grace: float = 2.0) -> OwnedStdioTransport:
        """An owned transport that runs what a fastmcp stdio transport would run."""
        return cls(transport.command, list(transport.args), transport.env, transport.cwd, grace=grace)

    @property
    def command_line(self) -> str:
        return shlex.join([self.command, *self.args])

    @property
    def returncode(self) -> int | None:
        """The exit code of the last process once it has exited (negative: killed by that signal)."""
        process = self._process
        return None if process is None else _exit_code(process)

    @property
    def exited(self) -> bool:
        """Whether the current (or last) process has exited."""
        process = self._process
        return process is None or _exit_code(process) is not None

    @contextlib.asynccontextmanager
    async def connect_session(
        self, *, transport_options: TransportOptions | None = None, **session_kwargs: Any
    ) -> AsyncIterator[ClientSession]:
        options = transport_options or TransportOptions()
        self._process = None
        self.stderr_tail.clear()
        pipe = asyncio.subprocess.PIPE
        try:
            process = await asyncio.create_subprocess_exec(
                self.command,
                *self.args,
                stdin=pipe,
                stdout=pipe,
                stderr=pipe,
                env=get_default_environment() | (self.env or {}),
                cwd=self.cwd,
                **children.spawn_options(self.grace),  # its own process group, which cannot outlive llm-do
            )
        except BaseException as error:
            children.spawn_failed()
            if isinstance(error, FileNotFoundError | PermissionError | NotADirectoryError):
                raise ServerCommandNotFound(f"cannot run {self.command_line}: {error.strerror or error}") from error
            raise
        self._process = process
        self.pid = process.pid
        children.guard(process.pid, self.grace)
        reader, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, writer = anyio.create_memory_object_stream[SessionMessage](0)
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._read_stdout, process, reader)
                tasks.start_soon(self._write_stdin, process, writer)
                tasks.start_soon(self._read_stderr, process)
                try:
                    async with options.session_class(read_stream, write_stream, **session_kwargs) as session:
                        yield session
                finally:
                    with anyio.CancelScope(shield=True):
                        await self._stop(process)
                    tasks.cancel_scope.cancel()
        finally:
            for stream in (read_stream, write_stream, reader, writer):
                stream.close()
            self.pid = None

    async def _read_stdout(
        self, process: asyncio.subprocess.Process, reader: anyio.abc.ObjectSendStream[SessionMessage | Exception]
    ) -> None:
        assert process.stdout is not None
        buffer = b""
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with reader:
                while chunk := await process.stdout.read(_CHUNK):
                    lines = (buffer + chunk).split(b"\n")
                    buffer = lines.pop()
                    for line in lines:
                        if line.strip():
                            await reader.send(_parse(line))

    async def _write_stdin(
        self, process: asyncio.subprocess.Process, writer: anyio.abc.ObjectReceiveStream[SessionMessage]
    ) -> None:
        stdin = process.stdin
        assert stdin is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with writer:
                async for message in writer:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    stdin.write(data.encode())
                    await stdin.drain()

    async def _read_stderr(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        buffer = b""
        with contextlib.suppress(OSError):
            while chunk := await process.stderr.read(_CHUNK):
                lines = (buffer + chunk).split(b"\n")
                buffer = lines.pop()
                for line in lines:
                    self._stderr(line)
        if buffer:
            self._stderr(buffer)

    def _stderr(self, line: bytes) -> None:
        text = line.decode(errors="replace").rstrip()
        if text:
            self.stderr_tail.append(text)
            logger.debug("%s: %s", self.command_line, text)

    async def wait_exit(self, seconds: float) -> bool:
        """Wait up to `seconds` for the process to exit; whether it has. Polls the exit code: waiting on
        the process would also wait for its pipes, which a child it left behind may hold open."""
        process = self._process
        if process is None:
            return True
        with anyio.move_on_after(seconds):
            while _exit_code(process) is None:  # noqa: ASYNC110 - no event tells of an exit we may not reap
                await anyio.sleep(_POLL)
            return True
        return False

    async def _stop(self, process: asyncio.subprocess.Process) -> None:
        """Close stdin, then SIGTERM the process group, then SIGKILL it after the grace period."""
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        if not await self.wait_exit(min(_STDIN_GRACE, self.grace)):
            _signal_group(process.pid, signal.SIGTERM)
            if not await self.wait_exit(self.grace):
                _signal_group(process.pid, signal.SIGKILL)
                if not await self.wait_exit(self.grace):
                    logger.error("MCP server process %d (%s) survived SIGKILL", process.pid, self.command_line)
        else:
            _signal_group(process.pid, signal.SIGKILL)  # the leader has exited: stop what it left behind
        children.release(process.pid)
        with anyio.move_on_after(self.grace), contextlib.suppress(Exception):
            await process.wait()

    async def close(self) -> None:
        return None  # nothing outlives a session

    def __repr__(self) -> str:
        return f"<OwnedStdioTransport({self.command_line!r})>"


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as error:
        logger.warning("unreadable line from an MCP server: %r", line[:200])
        return error


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _exit_code(process: asyncio.subprocess.Process) -> int | None:
    """The exit code of `process` once it has exited (negative: the signal that ended it). Peeked at without
    reaping it (`WNOWAIT`, left to asyncio), so it is known at once: asyncio's child watcher sets `returncode`
    only when it gets to run, which takes seconds on a loaded machine."""
    if process.returncode is not None or not hasattr(os, "waitid"):
        return process.returncode
    try:
        found = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return None  # reaped already: asyncio sets `returncode` next
    if found is None:
        return None
    return found.si_status if found.si_code == os.CLD_EXITED else -found.si_status
