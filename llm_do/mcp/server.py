"""`McpServer`: one MCP server's connection (and process) owned by one task, supervised.

A pydantic-ai `MCPToolset` is entered and exited by whichever task uses it first and last, and
fastmcp keeps stdio processes alive between sessions. Here a dedicated owner task, started in an
empty context, enters the toolset, holds it until the scope ends or the server dies, then exits it
and closes its client and transport, so the process ends with the connection. Callers in any task
only send requests. A server that died, or whose connection dropped, is started again on next use
with exponential backoff; the call that lost it gets a readable tool error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry, ToolFailed
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import InstructionPart
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool

from .._compat import handshake_timeout_off, resolves_per_run
from ..errors import ScopeError, ToolsetError, causes, shown_url, with_url_shown
from ..scopes import system_task
from .logs import route_server_logs
from .stdio import OwnedStdioTransport, ServerCommandNotFound

__all__ = ["McpOptions", "McpServer", "McpServerError", "McpServersError", "own_mcp_toolsets", "start_servers"]

logger = logging.getLogger("llm_do.mcp")

_CONNECTION_CLOSED = -32000  # JSON-RPC error code the MCP SDK uses for a closed connection
_WATCH_INTERVAL = 0.25
_EXIT_WAIT = 1.0
_SERVER = "_llm_do_server"  # on an MCPToolset: the McpServer that owns it
_OWNED = "_llm_do_owned"  # on a toolset tree: its copy whose MCP toolsets are owned


@dataclass(frozen=True, slots=True)
class McpOptions:
    """How an MCP server is started, supervised and stopped."""

    startup_timeout: float = 30.0
    """Seconds a start (process spawn and MCP handshake) may take before it counts as failed."""
    stop_grace: float = 2.0
    """Seconds a stdio server has to exit after SIGTERM before it is killed."""
    max_restarts: int = 3
    """Failed starts or crashes in a row (without a successful call between) before it backs off for `cooldown`."""
    backoff: float = 0.5
    """Seconds before a start that follows two failures in a row; doubled for each further failure. The
    first restart after a failure is immediate. While backing off, uses fail at once with the last error."""
    backoff_max: float = 10.0
    """The longest backoff between two starts (until `max_restarts` is passed)."""
    cooldown: float = 30.0
    """The backoff once `max_restarts` failures in a row have passed."""

    def __post_init__(self) -> None:
        for field in ("startup_timeout", "stop_grace", "backoff_max", "cooldown"):
            if not getattr(self, field) > 0:
                raise ValueError(f"McpOptions.{field} must be > 0, got {getattr(self, field)!r}")
        if self.max_restarts < 0 or self.backoff < 0:
            raise ValueError("McpOptions.max_restarts and McpOptions.backoff must be >= 0")


class McpServerError(ToolsetError):
    """An MCP server could not be started or kept running. Names the server, its command or URL,
    its exit code and the last lines of its stderr when known, and what to do."""

    def __init__(
        self,
        server: str,
        what: str,
        *,
        target: str | None = None,
        exit_code: int | None = None,
        stderr: tuple[str, ...] = (),
        advice: str = "",
    ) -> None:
        self.server = server
        self.what = what
        self.advice = advice
        self.target = target
        self.exit_code = exit_code
        self.stderr = stderr
        lines = [f"MCP server {server!r}" + (f" ({target})" if target else "") + f" {what}"]
        if exit_code is not None:
            lines.append(f"exit code: {exit_code}")
        if stderr:
            lines.append("last lines of its stderr:\n" + "\n".join(f"  | {line}" for line in stderr))
        if advice:
            lines.append(advice)
        super().__init__("\n".join(lines))

    @property
    def headline(self) -> str:
        """The error on one line: the server, its command or URL, what happened, its exit code, what to do."""
        line = f"MCP server {self.server!r}" + (f" ({self.target})" if self.target else "") + f" {self.what}"
        if self.exit_code is not None and "code" not in self.what:
            line += f", exit code {self.exit_code}"
        return f"{line}. {self.advice}" if self.advice else line


class McpServersError(ToolsetError):
    """Several MCP servers a call needs could not be started; `errors` has one `McpServerError` each."""

    def __init__(self, errors: Sequence[McpServerError]) -> None:
        self.errors = tuple(errors)
        names = ", ".join(repr(error.server) for error in self.errors)
        super().__init__(
            f"{len(self.errors)} MCP servers could not be started ({names}):\n"
            + "\n".join(f"- {error.headline}" for error in self.errors)
        )


class _Connection:
    """One start of the server: its owner task and what the owner reports."""

    __slots__ = ("alive", "ended", "ready", "stop", "task")

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[None] = loop.create_future()
        self.ready.add_done_callback(_retrieved)  # a start whose caller was cancelled reports to nobody
        self.stop = asyncio.Event()
        self.ended = asyncio.Event()
        self.alive = False
        self.task: asyncio.Task[None] | None = None


class McpServer(AbstractToolset[Any]):
    """Owns and supervises one `MCPToolset` for the scope that created it.

    The runtime wraps every `MCPToolset` a provider builds in one of these (keyed by the toolset
    object, so a `Singleton` keeps one server), whatever the scope and wherever it sits in the
    provider's toolset tree. Entering does not connect: a call starts its servers when it begins
    (`start_servers`), or a server starts on first use. Enters are counted; the last exit stops the
    server and waits until its process, if it has one, is gone.
    """

    def __init__(self, toolset: MCPToolset[Any], *, name: str, options: McpOptions | None = None) -> None:
        self.toolset = toolset
        self.name = name
        self.options = options or McpOptions()
        transport = toolset.client.transport
        if not isinstance(transport, OwnedStdioTransport) and _is_fastmcp_stdio(transport):
            # fastmcp keeps a stdio process alive between sessions: run the same command, owned.
            transport = OwnedStdioTransport.replacing(transport, grace=self.options.stop_grace)
            toolset.client.transport = transport
        self.transport = transport
        route_server_logs(toolset, name)  # its log notifications to `llm_do.mcp.servers.NAME`, at their level
        handshake_timeout_off(toolset.client)  # the process's start-up counts against it: `startup_timeout` rules
        self._conn: _Connection | None = None
        self._lock: asyncio.Lock | None = None
        self._failures = 0
        self._next_start = 0.0
        self._last_error: McpServerError | None = None
        self._known_tools: dict[str, ToolsetTool[Any]] | None = None
        self._closed = False
        self._entered = 0

    # -- what pydantic-ai sees -------------------------------------------------------

    @property
    def id(self) -> str | None:
        return self.toolset.id

    @property
    def label(self) -> str:
        return f"MCP server {self.name!r} ({self.target})"

    @property
    def target(self) -> str:
        """The server's command line or URL."""
        transport = self.transport
        if isinstance(transport, OwnedStdioTransport):
            return transport.command_line
        url = self._url
        return shown_url(url) if url is not None else type(transport).__name__

    @property
    def _url(self) -> str | None:
        url = getattr(self.transport, "url", None)
        return None if url is None else str(url)

    def _shown(self, error: BaseException) -> str:
        """`Type: message` of `error`, with the server's URL (which may hold a token) shown as `target` shows it."""
        text = f"{type(error).__name__}: {error}"
        url = self._url
        return text if url is None else with_url_shown(text, url)

    @property
    def tool_name_conflict_hint(self) -> str:
        return "Give one of the two servers a tool_prefix (project files), or wrap it in .prefixed('...') (Python)."

    @property
    def pid(self) -> int | None:
        """The pid of the server's process while it runs (stdio servers only)."""
        return self.transport.pid if isinstance(self.transport, OwnedStdioTransport) else None

    @property
    def tools_listed(self) -> bool:
        """Whether the server has listed its tools once (then, while it is down, they are still offered)."""
        return self._known_tools is not None

    @property
    def running(self) -> bool:
        conn = self._conn
        return conn is not None and conn.alive

    def may_ask_for_approval(self) -> bool:
        """Whether a call may need approval by the tools' annotations: False once the tools are known and
        all annotated `readOnlyHint` (then no approval machinery is attached to the agent runs)."""
        tools = self._known_tools
        if tools is None:
            return True
        return not all(
            ((tool.tool_def.metadata or {}).get("annotations") or {}).get("readOnlyHint") is True
            for tool in tools.values()
        )

    async def __aenter__(self) -> McpServer:
        self._entered += 1
        self._closed = False
        return self

    async def __aexit__(self, *args: Any) -> bool | None:
        # Counted, as pydantic-ai's own MCPToolset is: a wrapper that copies itself per agent run (a
        # CombinedToolset does) gets the copy entered and exited by the run, inside the scope's hold.
        self._entered = max(0, self._entered - 1)
        if self._entered == 0:
            await self.aclose()
        return None

    async def for_run(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        return self  # the scope owns the server; an agent run only borrows it

    async def get_instructions(
        self, ctx: RunContext[Any]
    ) -> str | InstructionPart | list[str | InstructionPart] | None:
        if not self.toolset.include_instructions:
            return None
        await self.connection()
        return await self.toolset.get_instructions(ctx)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        for attempt in (1, 2):
            conn = self._conn
            try:
                if conn is None or not conn.alive:
                    conn = await self.connection()
                tools = await self.toolset.get_tools(ctx)
            except McpServerError:
                if self._known_tools is None:
                    raise  # never started: the run cannot know what this server offers
                logger.warning("%s is down; offering the tools it had, whose calls fail until it is back", self.label)
                return dict(self._known_tools)
            except (ModelRetry, Exception) as error:
                if attempt == 2 or conn is None or not await self._lost(conn, error):
                    raise
                continue  # it died between two runs, before the watcher saw it: start it again once
            self._known_tools = tools
            return tools
        raise AssertionError("unreachable")  # pragma: no cover

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        conn = self._conn
        if conn is None or not conn.alive:
            try:
                conn = await self.connection()
            except McpServerError as error:
                raise ToolFailed(self._down_message(name, error)) from None
        try:
            result = await self.toolset.call_tool(name, tool_args, ctx, tool)
        except (ToolFailed, ApprovalRequired, CallDeferred):
            raise
        except (ModelRetry, Exception) as error:
            if await self._lost(conn, error):
                raise ToolFailed(self._lost_message(name)) from None
            raise
        self._failures = 0
        return result

    # -- lifecycle -------------------------------------------------------------------

    async def connection(self) -> _Connection:
        """Start the server unless it runs; raise `McpServerError` when it cannot be started."""
        if self._closed:
            raise ScopeError(f"{self.label} belongs to a scope that has ended; it can no longer be used")
        conn = self._conn
        if conn is not None and conn.alive:
            return conn
        lock = self._lock
        if lock is None:
            lock = self._lock = asyncio.Lock()
        async with lock:
            conn = self._conn
            if conn is not None and conn.alive:
                return conn
            if conn is not None:
                self._conn = None
                await _halt(conn)
            self._check_backoff()
            conn = self._conn = await self._start()
            if self._closed:  # the scope ended while it was starting: it must not outlive the scope
                self._conn = None
                await _halt(conn)
                raise ScopeError(f"{self.label} belongs to a scope that ended while it was starting")
            return conn

    async def aclose(self) -> None:
        """Stop the server and wait until it (and its process) is gone. Idempotent."""
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            await _halt(conn)

    def _stop_budget(self) -> float:
        return 3 * self.options.stop_grace + 2.0

    def _check_backoff(self) -> None:
        """Raise at once, without starting it, while the server is backing off after failures."""
        wait = self._next_start - time.monotonic()
        last = self._last_error
        if wait > 0 and last is not None:
            raise McpServerError(
                self.name,
                f"{last.what}; it is not started again for another {wait:.1f}s",
                target=last.target,
                exit_code=last.exit_code,
                stderr=last.stderr,
                advice=last.advice,
            )

    async def _start(self) -> _Connection:
        conn = _Connection()
        # A system task: the server outlives the call that started it, and must keep nothing of its context.
        conn.task = system_task(self._own, conn, name=f"llm-do MCP server {self.name}")
        try:
            await asyncio.shield(conn.ready)  # the owner task times its own start: no timer in this context
        except BaseException as error:
            if isinstance(error, asyncio.CancelledError | ScopeError):  # not the server's failure
                await _halt(conn)
                raise
            failure = await self._start_error(error)  # before stopping it: did it exit by itself?
            await _halt(conn)
            self._failed(failure)
            raise failure from None
        return conn

    async def _own(self, conn: _Connection) -> None:
        """The owner task: enter the toolset (within the start-up timeout), hold it until told to stop or
        the server dies, then exit it and close its client. Its timers live in its own, empty context."""
        toolset = self.toolset
        budget = self._stop_budget()
        try:
            try:
                async with contextlib.AsyncExitStack() as stack:
                    starting = asyncio.timeout(self.options.startup_timeout)
                    try:
                        async with starting:
                            await stack.enter_async_context(toolset)
                    except BaseException as error:
                        if starting.expired():
                            raise TimeoutError() from None
                        if isinstance(error, asyncio.CancelledError) and conn.stop.is_set():
                            _uncancel()  # halted while starting: the stop below runs uncancelled
                            raise ScopeError(f"{self.label} was stopped while it was starting") from None
                        raise
                    conn.alive = True
                    conn.ready.set_result(None)
                    await self._watch(conn)
                    async with asyncio.timeout(budget):
                        await stack.aclose()
            finally:
                conn.alive = False
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(budget):
                        await toolset.client.close()  # type: ignore[no-untyped-call]  # and a process kept alive
        except BaseException as error:
            if not conn.ready.done():
                conn.ready.set_exception(error)
            elif not isinstance(error, asyncio.CancelledError):
                logger.warning("%s: closing its connection failed", self.label, exc_info=error)
        finally:
            conn.alive = False
            conn.ended.set()

    async def _watch(self, conn: _Connection) -> None:
        """Return when asked to stop, or when the server's process or session has ended."""
        transport = self.transport
        client = self.toolset.client
        while not conn.stop.is_set():
            if (isinstance(transport, OwnedStdioTransport) and transport.exited) or not client.is_connected():
                if isinstance(transport, OwnedStdioTransport):
                    await transport.wait_exit(_EXIT_WAIT)  # for its exit code, when it has died
                if conn.alive:  # else a call that lost it has said so
                    conn.alive = False
                    self._failed(self._died())
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_WATCH_INTERVAL):
                    await conn.stop.wait()

    async def _lost(self, conn: _Connection, error: BaseException) -> bool:
        """Whether `error` means the connection is gone (then it is stopped, to start again on next use)."""
        if isinstance(error, ModelRetry) and not _connection_closed(error):
            return False  # the tool's own error, or the server's answer to a bad request
        transport = self.transport
        if isinstance(transport, OwnedStdioTransport):
            await transport.wait_exit(_EXIT_WAIT)  # for its exit code, when it has died
        if conn.alive:  # else the watch (or another call) has said so, after the same wait
            conn.alive = False
            self._failed(self._died(f"lost its connection ({self._shown(error)})"))
        conn.stop.set()
        logger.warning("%s", self._last_error)
        return True

    def _down_message(self, tool: str, error: McpServerError) -> str:
        """What the model reads (and so the person using it): the server is down. Its command line or URL, which
        can hold a token and server-side paths, and its stderr go to the operator's log."""
        logger.warning("%s; tool %r was not run", error.headline, tool)
        code = f" (exit code {error.exit_code})" if error.exit_code is not None else ""
        return (
            f"Tool {tool!r} was not run: MCP server {self.name!r} is down{code}. Try again later, or do without "
            "this tool."
        )

    def _lost_message(self, tool: str) -> str:
        last = self._last_error
        why = f" (exit code {last.exit_code})" if last is not None and last.exit_code is not None else ""
        return (
            f"The MCP server {self.name!r} stopped while running tool {tool!r}{why}, so the call did not "
            "complete. The server is started again on next use; call the tool again only if repeating it is safe."
        )

    def _failed(self, error: McpServerError) -> None:
        """Count a failed start or a crash; the next start waits for the backoff (none after a first one)."""
        self._failures += 1
        self._last_error = error
        options = self.options
        if self._failures > options.max_restarts:
            delay = options.cooldown
        elif self._failures > 1:
            delay = min(options.backoff * 2 ** (self._failures - 2), options.backoff_max)
        else:
            delay = 0.0
        self._next_start = time.monotonic() + delay

    def _facts(self) -> tuple[int | None, tuple[str, ...]]:
        transport = self.transport
        if isinstance(transport, OwnedStdioTransport):
            return transport.returncode, tuple(transport.stderr_tail)
        return None, ()

    def _died(self, what: str = "stopped") -> McpServerError:
        code, stderr = self._facts()
        if code is not None:
            what = f"exited with code {code}"
        return McpServerError(
            self.name,
            what,
            target=self.target,
            exit_code=code,
            stderr=stderr,
            advice="It is started again on next use.",
        )

    async def _start_error(self, error: BaseException) -> McpServerError:
        transport = self.transport
        if any(isinstance(item, ServerCommandNotFound) for item in causes(error)):
            command = transport.command if isinstance(transport, OwnedStdioTransport) else self.target
            return McpServerError(
                self.name,
                f"could not be started: command {command!r} was not found or cannot be run",
                target=self.target,
                advice="Install it, or fix the server's `command` (an absolute path, or a program on PATH).",
            )
        if isinstance(error, TimeoutError):
            code, stderr = self._facts()
            return McpServerError(
                self.name,
                f"did not finish starting within {self.options.startup_timeout}s",
                target=self.target,
                exit_code=code,
                stderr=stderr,
                advice="Check that it is an MCP server that answers the handshake, or raise its startup timeout.",
            )
        if isinstance(transport, OwnedStdioTransport):
            await transport.wait_exit(_EXIT_WAIT)
            code, stderr = self._facts()
            if code is not None:
                return McpServerError(
                    self.name,
                    "crashed during start-up",
                    target=self.target,
                    exit_code=code,
                    stderr=stderr,
                    advice="Run its command by hand to see why it stops.",
                )
        code, stderr = self._facts()
        return McpServerError(
            self.name,
            f"failed the MCP handshake ({self._shown(error)})",
            target=self.target,
            exit_code=code,
            stderr=stderr,
            advice="Check that the command starts an MCP server on stdio, or that the URL is its MCP endpoint.",
        )

    def __repr__(self) -> str:
        return f"McpServer({self.name!r}, {self.target!r})"


async def _halt(conn: _Connection) -> None:
    """Tell the owner task to stop (cancel its start, if it is starting) and wait until it has, whatever
    cancellation arrives meanwhile. The owner bounds its own shutdown; no timer is armed here, so nothing
    keeps the caller's context afterwards."""
    conn.stop.set()
    task = conn.task
    if task is None:
        return
    if not conn.ready.done():
        task.cancel()  # still starting (a handshake may take up to `startup_timeout`): stop that too
    interrupted = False
    while not task.done():
        try:
            await asyncio.wait((task,))
        except asyncio.CancelledError:
            interrupted = True  # the server must still be stopped
    if interrupted:
        raise asyncio.CancelledError


def _uncancel() -> None:
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


def _retrieved(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


async def start_servers(toolsets: Iterable[AbstractToolset[Any]]) -> None:
    """Start, all at once, the MCP servers in `toolsets` (at any depth) whose tools are not known yet,
    and wait until each has started or failed. One failure raises its `McpServerError`, several an
    `McpServersError` with each. A server that once listed its tools is left to start on use: while it
    is down, its tools are still offered and their calls fail as tool errors."""
    found: dict[int, McpServer] = {}

    def visit(leaf: AbstractToolset[Any]) -> None:
        if isinstance(leaf, McpServer) and not leaf.running and not leaf.tools_listed:
            found.setdefault(id(leaf), leaf)

    for toolset in toolsets:
        toolset.apply(visit)
    servers = list(found.values())
    if len(servers) <= 1:
        for server in servers:
            await server.connection()
        return
    outcomes = await asyncio.gather(*(server.connection() for server in servers), return_exceptions=True)
    errors = [outcome for outcome in outcomes if isinstance(outcome, McpServerError)]
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, McpServerError):
            raise outcome
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise McpServersError(errors)


def _connection_closed(error: BaseException) -> bool:
    return any(getattr(item, "code", None) == _CONNECTION_CLOSED for item in causes(error))


def _is_fastmcp_stdio(transport: object) -> bool:
    from fastmcp.client.transports import StdioTransport

    return isinstance(transport, StdioTransport)


def own_mcp_toolsets(obj: Any, name: str, options: McpOptions | None = None) -> Any:
    """`obj`, with every `MCPToolset` in it owned by an `McpServer`: itself, or any leaf of a toolset tree
    (combined, prefixed, renamed, filtered, approval-wrapped, nested at any depth), found and replaced
    through pydantic-ai's `apply` and `visit_and_replace`. The same object gives the same result, so a
    `Singleton` keeps one tree and one server per `MCPToolset`; the tree is a copy, `obj` is left as it is."""
    if isinstance(obj, MCPToolset):
        return _server_for(obj, name, options)
    if not isinstance(obj, AbstractToolset) or type(obj).visit_and_replace is AbstractToolset.visit_and_replace:
        return obj  # not a toolset, or a leaf that holds no other toolset
    known = getattr(obj, "__dict__", {}).get(_OWNED)
    if known is not None:
        return known
    leaves: list[MCPToolset[Any]] = []
    obj.apply(lambda leaf: leaves.append(leaf) if isinstance(leaf, MCPToolset) else None)
    if not leaves:
        return obj
    tree = obj.visit_and_replace(
        lambda leaf: _server_for(leaf, name, options) if isinstance(leaf, MCPToolset) else leaf
    )
    if hasattr(obj, "__dict__"):
        vars(obj)[_OWNED] = tree
    return tree


def _server_for(toolset: MCPToolset[Any], name: str, options: McpOptions | None) -> AbstractToolset[Any]:
    if resolves_per_run(toolset):  # a copy per agent run, made, entered and exited by pydantic-ai in that run
        return toolset
    server = vars(toolset).get(_SERVER)
    if not isinstance(server, McpServer):
        server = McpServer(toolset, name=name, options=options)
        vars(toolset)[_SERVER] = server
    return server
