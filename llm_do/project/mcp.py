"""MCP servers declared in project files: `[mcp_servers.NAME]` tables in `project.toml`, `mcp_servers:` in a
worker's frontmatter, and `mcpServers` JSON files (pydantic-ai's `load_mcp_toolsets` format, as used by
Claude Desktop, Cursor and others). Each server is a toolset name; its scope is chosen per server.

Values of `env` and `headers` may name an environment variable (`${NAME}`, `${NAME:-default}`) or a
setting of the project's container (`${settings.NAME}`); they are kept as `SecretStr` and never printed.
`tool_prefix` renames a server's tools for the model (and for policies); `roots` are the directories the
server is offered (MCP roots), inside the project unless `allow_roots_outside_project`.
fastmcp is imported only when a server is built.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic_ai.toolsets import WrapperToolset

from .. import Scope, ToolsetSpec
from ..errors import shown_url
from .problems import Problem

__all__ = ["McpServerDecl", "ProbedTool", "ServerProbe", "declared_servers", "mcp_toolset_specs", "probe_servers"]

_SCOPES: dict[str, Scope] = {
    "global": Scope.GLOBAL,
    "per_session": Scope.PER_SESSION,
    "per_run": Scope.PER_RUN,
    "per_call": Scope.PER_CALL,
}
_REFERENCE = re.compile(r"\$\{([A-Za-z_][\w.]*)(:-([^}]*))?\}")
_ROOTS_ADVICE = "move it into the project, or set allow_roots_outside_project = true"


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
    scope: Literal["global", "per_session", "per_run", "per_call"] = "global"
    startup_timeout: float = Field(default=30.0, gt=0)
    tool_prefix: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]+$")
    """The model sees tool `T` as `PREFIX_T`, and so do policies, approvals and `llm-do list`."""
    roots: list[str] = []
    """Directories the server may work in (MCP roots), relative to the project directory."""
    allow_roots_outside_project: bool = False
    """Whether a root may resolve outside the project directory."""

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
        return shown_url(self.url) if self.url is not None else " ".join([self.command or "", *self.args])


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
) -> tuple[dict[str, Declared | None], list[Problem]]:
    """Servers of one `mcp_servers` table (or `mcpServers` object); `lenient` drops keys other clients use.
    `line_of(name)` gives the line of a server's own declaration, when known. A server declared wrong is
    None, its problems reported: its name is still taken."""
    if not isinstance(raw, Mapping):
        return {}, [Problem(file, line, f"mcp_servers must map server names to tables, got {raw!r}")]
    found: dict[str, Declared | None] = {}
    problems: list[Problem] = []
    for name, values in raw.items():
        if not isinstance(name, str) or not re.match(r"^[A-Za-z_][\w-]*$", name):
            problems.append(Problem(file, line, f"MCP server name {name!r}: use letters, digits, _ or -"))
            continue
        line = (line_of(name) if line_of is not None else None) or line
        if lenient and isinstance(values, Mapping):
            values = {key: value for key, value in values.items() if key in McpServerDecl.model_fields}
        try:
            found[name] = Declared(McpServerDecl.model_validate(values), file, line)
        except ValidationError as error:
            problems.extend(Problem(file, line, f"MCP server {name!r}: {_explained(item)}") for item in error.errors())
            found[name] = None
    return found, problems


def _explained(item: Any) -> str:
    """One validation error of a server declaration; an unknown key is named with the keys there are."""
    where = ".".join(str(part) for part in item["loc"])
    if item["type"] == "extra_forbidden" and len(item["loc"]) == 1:
        keys = list(McpServerDecl.model_fields)
        close = difflib.get_close_matches(where, keys, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown key {where!r}{hint}; the keys are {', '.join(keys)}"
    message = str(item["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def declared_servers(
    root: Path, table: Any, config_files: Any, file: Path | None, line_of: Callable[[str], int | None]
) -> tuple[dict[str, Declared | None], list[Problem]]:
    """The servers of `project.toml`: its `[mcp_servers]` table and the `mcp_config` JSON files it names
    (None for a server declared wrong)."""
    where = file or root
    servers: dict[str, Declared | None] = {}
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
        if not path.is_file():
            message = f"mcp_config: {name!r} is not a file under {root}; fix the path"
            problems.append(Problem(where, line_of("mcp_config"), message))
            continue
        try:
            text = path.read_text(encoding="utf-8")
            data = json.loads(text)
        except json.JSONDecodeError as error:
            message = f"not valid JSON: {error.msg} (column {error.colno}); fix the file"
            problems.append(Problem(path, error.lineno, message))
            continue
        except (OSError, ValueError) as error:
            problems.append(Problem(path, None, f"cannot read this MCP config: {error}; save it as UTF-8 JSON"))
            continue
        if not isinstance(data, Mapping) or "mcpServers" not in data:
            problems.append(Problem(path, None, 'an MCP config is a JSON object with "mcpServers": {NAME: {...}}'))
            continue
        found, more = parse_servers(
            data["mcpServers"], path, None, lenient=True, line_of=functools.partial(_json_line, text)
        )
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


def _json_line(text: str, name: str) -> int | None:
    """The line of the key `"NAME":` in a JSON text."""
    match = re.search(rf'"{re.escape(name)}"\s*:', text)
    return None if match is None else text.count("\n", 0, match.start()) + 1


def _line_after(file: Path, line: int | None, needle: str) -> int | None:
    """The line where `needle` first occurs in `file` from line `line` on (else `line`)."""
    try:
        lines = file.read_text(encoding="utf-8").splitlines(keepends=True)
    except OSError:
        return line
    first = (line or 1) - 1
    for number, text in enumerate(lines[first:], start=first + 1):
        if needle in text:
            return number
    return line


def mcp_toolset_specs(
    servers: Mapping[str, Declared], root: Path, settings: Mapping[str, Any]
) -> tuple[dict[str, ToolsetSpec], list[Problem]]:
    """A toolset spec per server (with the server's scope), its `${...}` values resolved and its roots
    checked now: every unset variable and every refused root is a problem at its own line."""
    specs: dict[str, ToolsetSpec] = {}
    problems: list[Problem] = []
    for name, declared in servers.items():
        spec, found = _server_spec(name, declared, root, settings)
        problems.extend(found)
        if spec is not None:
            specs[name] = spec
    return specs, problems


def _server_spec(
    name: str, declared: Declared, root: Path, settings: Mapping[str, Any]
) -> tuple[ToolsetSpec | None, list[Problem]]:
    decl = declared.decl
    problems: list[Problem] = []

    def problem(message: str, needle: str) -> None:
        line = _line_after(declared.file, declared.line, needle)
        problems.append(Problem(declared.file, line, f"MCP server {name!r}: {message}"))

    env = {key: _resolve(value, settings, problem) for key, value in decl.env.items()}
    headers = {key: _resolve(value, settings, problem) for key, value in decl.headers.items()}
    if decl.cwd is not None and not (root / decl.cwd).is_dir():
        problem(f"cwd {decl.cwd!r} is not a directory of the project", decl.cwd)
    roots: list[str] = []
    from ..mcp.roots import RootRefused, check_root

    for path in decl.roots:
        try:
            found = check_root(root, path, allow_outside=decl.allow_roots_outside_project, advice=_ROOTS_ADVICE)
        except RootRefused as error:
            problem(str(error), path)
        else:
            roots.append(found.as_uri())
    if problems:
        return None, problems
    build = _builder(name, decl, env, headers, root, roots)
    scope = _SCOPES[decl.scope]
    return ToolsetSpec(_once(build) if scope is Scope.GLOBAL else build, scope), []


def _builder(
    name: str,
    decl: McpServerDecl,
    env: dict[str, SecretStr],
    headers: dict[str, SecretStr],
    root: Path,
    roots: list[str],
) -> Callable[[], Any]:
    def build() -> Any:
        from pydantic_ai.mcp import MCPToolset

        from ..mcp import McpOptions, McpServer, OwnedStdioTransport
        from ..mcp.logs import server_log_handler

        options = McpOptions(startup_timeout=decl.startup_timeout)
        logs = server_log_handler(name)
        if decl.command is not None:
            command = sys.executable if decl.command in ("python", "python3") else decl.command
            transport = OwnedStdioTransport(
                command,
                decl.args,
                env={key: value.get_secret_value() for key, value in env.items()} or None,
                cwd=str(root / decl.cwd) if decl.cwd else str(root),
                grace=options.stop_grace,
            )
            toolset: MCPToolset[Any] = MCPToolset(transport, id=name, roots=roots or None, log_handler=logs)
        else:
            assert decl.url is not None
            shown = {key: value.get_secret_value() for key, value in headers.items()} or None
            toolset = MCPToolset(decl.url, id=name, headers=shown, roots=roots or None, log_handler=logs)
        server = McpServer(toolset, name=name, options=options)
        return server.prefixed(decl.tool_prefix) if decl.tool_prefix else server  # pydantic-ai's PrefixedToolset

    return build


def _once(build: Callable[[], Any]) -> Callable[[], Any]:
    made: list[Any] = []

    def once() -> Any:
        if not made:
            made.append(build())
        return made[0]

    return once


def _resolve(value: SecretStr, settings: Mapping[str, Any], problem: Callable[[str, str], None]) -> SecretStr:
    """`value` with its `${...}` references replaced; each that cannot be is reported to `problem`."""
    import os

    def replace(match: re.Match[str]) -> str:
        key, default = match.group(1), match.group(3)
        if key.startswith("settings."):
            field = key.removeprefix("settings.")
            if field not in settings or settings[field] is None:
                problem(f"${{{key}}} names a setting the project's container does not have (or has unset)", match[0])
                return ""
            found = settings[field]
            return found.get_secret_value() if isinstance(found, SecretStr) else str(found)
        if key in os.environ:
            return os.environ[key]
        if match.group(2) is not None:
            return default or ""
        problem(
            f"${{{key}}} names an environment variable that is not set; set it or give ${{{key}:-default}}", match[0]
        )
        return ""

    return SecretStr(_REFERENCE.sub(replace, value.get_secret_value()))


@dataclass(frozen=True, slots=True)
class ProbedTool:
    """One tool of a started server, named as the model sees it (with the server's `tool_prefix`)."""

    name: str
    read_only: bool
    """Annotated `readOnlyHint`."""
    annotations: Mapping[str, Any]
    """Its MCP annotations (`readOnlyHint`, `destructiveHint`, ...), those it sets only."""


@dataclass(frozen=True, slots=True)
class ServerProbe:
    """What starting a declared server once found: its tools or the error."""

    name: str
    scope: str
    target: str
    tools: tuple[ProbedTool, ...] = ()
    error: str | None = None
    tool_prefix: str | None = None


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
        made = spec.factory()
        server = made.wrapped if isinstance(made, WrapperToolset) else made  # a prefix's PrefixedToolset
        assert isinstance(server, McpServer)
        decl = declared.decl
        prefix = decl.tool_prefix
        try:
            async with server:
                await server.connection()
                tools = await server.toolset.list_tools()
        except McpServerError as error:
            probes.append(ServerProbe(name, decl.scope, decl.target, error=str(error), tool_prefix=prefix))
            continue
        found = []
        for tool in tools:
            annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}
            shown = f"{prefix}_{tool.name}" if prefix else tool.name  # as pydantic-ai's PrefixedToolset names it
            found.append(ProbedTool(shown, annotations.get("readOnlyHint") is True, annotations))
        probes.append(ServerProbe(name, decl.scope, decl.target, tuple(found), tool_prefix=prefix))
    return probes
