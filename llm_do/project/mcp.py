"""MCP servers declared in project files: `[mcp_servers.NAME]` tables in `project.toml`, `mcp_servers:` in a
worker's frontmatter, and `mcpServers` JSON files (pydantic-ai's `load_mcp_toolsets` format, as used by
Claude Desktop, Cursor and others). Each server is a toolset name; its scope is chosen per server.

Values of `env` and `headers` may name an environment variable (`${NAME}`, `${NAME:-default}`) or a
setting of the project's container (`${settings.NAME}`); they are kept as `SecretStr` and never printed.
fastmcp is imported only when a server is built.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from ..scopes import Scope, ToolsetSpec
from .problems import Problem

__all__ = ["McpServerDecl", "ServerProbe", "declared_servers", "mcp_toolset_specs", "probe_servers"]

_SCOPES: dict[str, Scope] = {"global": Scope.GLOBAL, "per_run": Scope.PER_RUN, "per_call": Scope.PER_CALL}
_REFERENCE = re.compile(r"\$\{([A-Za-z_][\w.]*)(:-([^}]*))?\}")
_JSON_KEYS = frozenset({"command", "args", "env", "cwd", "url", "headers", "scope", "startup_timeout"})


class McpServerDecl(BaseModel):
    """One MCP server as MCP clients commonly declare it: `command`/`args`/`env`/`cwd`, or `url`/`headers`."""

    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    """The program to run (stdio). `python`/`python3` run the interpreter llm-do runs on."""
    args: list[str] = []
    env: dict[str, SecretStr] = {}
    """Environment variables for the process, over PATH, HOME and the like."""
    cwd: str | None = None
    """The process's working directory, relative to the project (default: the project directory)."""
    url: str | None = None
    """A streamable-HTTP (or SSE, when it ends in /sse) endpoint."""
    headers: dict[str, SecretStr] = {}
    scope: Literal["global", "per_run", "per_call"] = "global"
    startup_timeout: float = Field(default=30.0, gt=0)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerDecl:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a stdio server) or url (an HTTP server), not both or neither")
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError("args, env and cwd are for a command; an HTTP server takes url and headers")
        if self.command is not None and self.headers:
            raise ValueError("headers are for an HTTP server (url); a command takes env")
        return self

    @property
    def target(self) -> str:
        return self.url if self.url is not None else " ".join([self.command or "", *self.args])


@dataclass(frozen=True, slots=True)
class Declared:
    """A server declaration and where it was written."""

    decl: McpServerDecl
    file: Path
    line: int | None


def parse_servers(
    raw: Any,
    file: Path,
    line: int | None,
    *,
    lenient: bool = False,
    line_of: Callable[[str], int | None] | None = None,
) -> tuple[dict[str, Declared], list[Problem]]:
    """Servers of one `mcp_servers` table (or `mcpServers` object); `lenient` drops keys other clients use.
    `line_of(name)` gives the line of a server's own declaration, when known."""
    if not isinstance(raw, Mapping):
        return {}, [Problem(file, line, f"mcp_servers must map server names to tables, got {raw!r}")]
    found: dict[str, Declared] = {}
    problems: list[Problem] = []
    for name, values in raw.items():
        if not isinstance(name, str) or not re.match(r"^[A-Za-z_][\w-]*$", name):
            problems.append(Problem(file, line, f"MCP server name {name!r}: use letters, digits, _ or -"))
            continue
        line = (line_of(name) if line_of is not None else None) or line
        if lenient and isinstance(values, Mapping):
            values = {key: value for key, value in values.items() if key in _JSON_KEYS}
        try:
            found[name] = Declared(McpServerDecl.model_validate(values), file, line)
        except ValidationError as error:
            for item in error.errors():
                where = ".".join(str(part) for part in item["loc"])
                message = str(item["msg"]).removeprefix("Value error, ")
                problems.append(Problem(file, line, f"MCP server {name!r}{': ' + where if where else ''}: {message}"))
    return found, problems


def declared_servers(
    root: Path, table: Any, config_files: Any, file: Path | None, line_of: Callable[[str], int | None]
) -> tuple[dict[str, Declared], list[Problem]]:
    """The servers of `project.toml`: its `[mcp_servers]` table and the `mcp_config` JSON files it names."""
    where = file or root
    servers: dict[str, Declared] = {}
    problems: list[Problem] = []
    if table is not None:
        text = file.read_text(encoding="utf-8") if file is not None else ""
        found, problems = parse_servers(
            table, where, line_of("mcp_servers"), line_of=lambda name: _table_line(text, name)
        )
        servers.update(found)
    if config_files is None:
        return servers, problems
    if not isinstance(config_files, list) or not all(isinstance(item, str) for item in config_files):
        problems.append(
            Problem(where, line_of("mcp_config"), f"mcp_config must be a list of JSON files, got {config_files!r}")
        )
        return servers, problems
    for name in config_files:
        path = root / name
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            problems.append(Problem(path, None, f"cannot read this MCP config: {error}"))
            continue
        if not isinstance(data, Mapping) or "mcpServers" not in data:
            problems.append(Problem(path, None, 'an MCP config is a JSON object with "mcpServers": {NAME: {...}}'))
            continue
        found, more = parse_servers(data["mcpServers"], path, None, lenient=True)
        problems.extend(more)
        for server, declared in found.items():
            if server in servers:
                problems.append(Problem(path, None, f"MCP server {server!r} is declared twice; rename one"))
            servers[server] = declared
    return servers, problems


def _table_line(text: str, name: str) -> int | None:
    """The line of `[mcp_servers.NAME]` (or of `NAME = {...}` under `[mcp_servers]`) in a TOML text."""
    quoted = rf"""["']?{re.escape(name)}["']?"""
    for pattern in (rf"^[ \t]*\[\s*mcp_servers\s*\.\s*{quoted}\s*\]", rf"^[ \t]*{quoted}\s*=\s*\{{"):
        match = re.search(pattern, text, re.MULTILINE)
        if match is not None:
            return text.count("\n", 0, match.start()) + 1
    return None


def mcp_toolset_specs(
    servers: Mapping[str, Declared], root: Path, settings: Mapping[str, Any]
) -> tuple[dict[str, ToolsetSpec], list[Problem]]:
    """A toolset spec per server (with the server's scope), its `${...}` values resolved now."""
    specs: dict[str, ToolsetSpec] = {}
    problems: list[Problem] = []
    for name, declared in servers.items():
        decl = declared.decl
        try:
            env = {key: _resolve(value, settings) for key, value in decl.env.items()}
            headers = {key: _resolve(value, settings) for key, value in decl.headers.items()}
        except LookupError as error:
            problems.append(Problem(declared.file, declared.line, f"MCP server {name!r}: {error}"))
            continue
        if decl.cwd is not None and not (root / decl.cwd).is_dir():
            problems.append(
                Problem(
                    declared.file,
                    declared.line,
                    f"MCP server {name!r}: cwd {decl.cwd!r} is not a directory of the project",
                )
            )
            continue
        build = _builder(name, decl, env, headers, root)
        scope = _SCOPES[decl.scope]
        specs[name] = ToolsetSpec(_once(build) if scope is Scope.GLOBAL else build, scope)
    return specs, problems


def _builder(
    name: str, decl: McpServerDecl, env: dict[str, SecretStr], headers: dict[str, SecretStr], root: Path
) -> Callable[[], Any]:
    def build() -> Any:
        from pydantic_ai.mcp import MCPToolset

        from ..mcp import McpOptions, McpServer, OwnedStdioTransport

        options = McpOptions(startup_timeout=decl.startup_timeout)
        if decl.command is not None:
            command = sys.executable if decl.command in ("python", "python3") else decl.command
            transport = OwnedStdioTransport(
                command,
                decl.args,
                env={key: value.get_secret_value() for key, value in env.items()} or None,
                cwd=str(root / decl.cwd) if decl.cwd else str(root),
                grace=options.stop_grace,
            )
            toolset: MCPToolset[Any] = MCPToolset(transport, id=name)
        else:
            assert decl.url is not None
            shown = {key: value.get_secret_value() for key, value in headers.items()} or None
            toolset = MCPToolset(decl.url, id=name, headers=shown)
        return McpServer(toolset, name=name, options=options)

    return build


def _once(build: Callable[[], Any]) -> Callable[[], Any]:
    made: list[Any] = []

    def once() -> Any:
        if not made:
            made.append(build())
        return made[0]

    return once


def _resolve(value: SecretStr, settings: Mapping[str, Any]) -> SecretStr:
    import os

    def replace(match: re.Match[str]) -> str:
        key, default = match.group(1), match.group(3)
        if key.startswith("settings."):
            field = key.removeprefix("settings.")
            if field not in settings or settings[field] is None:
                raise LookupError(f"${{{key}}} names a setting the project's container does not have (or has unset)")
            found = settings[field]
            return found.get_secret_value() if isinstance(found, SecretStr) else str(found)
        if key in os.environ:
            return os.environ[key]
        if match.group(2) is not None:
            return default or ""
        raise LookupError(
            f"${{{key}}} names an environment variable that is not set; set it or give ${{{key}:-default}}"
        )

    return SecretStr(_REFERENCE.sub(replace, value.get_secret_value()))


@dataclass(frozen=True, slots=True)
class ServerProbe:
    """What starting a declared server once found: its tools (name, read-only) or the error."""

    name: str
    scope: str
    target: str
    tools: tuple[tuple[str, bool], ...] = ()
    error: str | None = None


async def probe_servers(specs: Mapping[str, ToolsetSpec], servers: Mapping[str, Declared]) -> list[ServerProbe]:
    """Start each declared server once (one after another), list its tools, and stop it."""
    if not servers:
        return []  # without MCP servers, fastmcp is never imported (about a second of start-up)
    from ..mcp import McpServer, McpServerError

    probes: list[ServerProbe] = []
    for name, declared in servers.items():
        spec = specs.get(name)
        if spec is None:
            continue
        server = spec.factory()
        assert isinstance(server, McpServer)
        decl = declared.decl
        try:
            async with server:
                await server.connection()
                tools = await server.toolset.list_tools()
        except McpServerError as error:
            probes.append(ServerProbe(name, decl.scope, decl.target, error=str(error)))
            continue
        marks = tuple(
            (tool.name, bool(tool.annotations is not None and tool.annotations.read_only_hint is True))
            for tool in tools
        )
        probes.append(ServerProbe(name, decl.scope, decl.target, marks))
    return probes


def _read_only(tool: Any) -> bool:
    annotations = getattr(tool, "annotations", None)
    return annotations is not None and getattr(annotations, "read_only_hint", None) is True
