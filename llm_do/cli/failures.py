"""What a failure means for the command: its exit code, its kind, and the lines that say what to do.

`classify` looks through an exception (its causes, contexts and exception groups) for the errors the
command knows; everything else is a failed run (exit 1). Error types are looked up only in modules
already imported: an error raised before pydantic-ai was loaded cannot be one of pydantic-ai's.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import traceback
from dataclasses import dataclass
from typing import Any

from ..errors import causes

__all__ = [
    "ERROR",
    "INTERRUPTED",
    "OK",
    "USAGE",
    "BadInput",
    "Failure",
    "Terminated",
    "UsageError",
    "classify",
    "find",
    "problems_json",
    "report",
]

OK, ERROR, USAGE, INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """A command line (or input, or environment) that cannot work: exit code 2."""


@dataclass(frozen=True, slots=True)
class Failure:
    """A failure as the command reports it. `kind` is one of usage, input, attachment, project, approval,
    api_key, mcp, interrupted, error; `problems` are a project's problems, one line each
    (`file:line: message`), or for `mcp` the lines that say which MCP servers could not be started and why."""

    code: int
    kind: str
    message: str
    problems: tuple[str, ...] = ()

    @property
    def lines(self) -> tuple[str, ...]:
        """What stderr shows: the problems, then one line (for MCP servers: the lines of each server)."""
        if self.kind == "interrupted":
            return (self.message,)
        if self.kind == "mcp":
            return self.problems
        return (*self.problems, self.message if self.kind == "project" else f"llm-do: error: {self.message}")


class Terminated(KeyboardInterrupt):
    """The command was ended by SIGTERM or SIGHUP (`signum`), after tearing down as after Ctrl-C."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"terminated by {signal.Signals(signum).name}")


class BadInput(UsageError):
    """The input does not fit the entry (exit code 2)."""


def classify(error: BaseException) -> Failure:
    """The failure `error` stands for."""
    if isinstance(error, Terminated):
        name = signal.Signals(error.signum).name
        return Failure(128 + error.signum, "interrupted", f"interrupted by {name}: the run was cancelled and torn down")
    if isinstance(error, KeyboardInterrupt):
        return Failure(INTERRUPTED, "interrupted", "interrupted: the run was cancelled and torn down")
    if isinstance(error, BadInput):
        return Failure(USAGE, "input", str(error))
    if isinstance(error, UsageError):
        return Failure(USAGE, "usage", str(error))
    project_error = _loaded("llm_do.project.problems", "ProjectError")
    if project_error is not None and isinstance(error, project_error):
        problems = tuple(str(problem) for problem in error.problems)
        count = len(problems)
        return Failure(ERROR, "project", f"llm-do: {count} problem{'s' if count != 1 else ''} found", problems)
    unavailable = find(error, _public("llm_do.approvals", "ApprovalUnavailable"))
    if unavailable is not None:
        request = unavailable.request
        return Failure(
            USAGE,
            "approval",
            f"entry {request.entry!r} wants to call {request.toolset}.{request.tool}, which needs approval "
            f"({request.reason}), and there is no terminal to ask on; pass --approve-all or --reject-all",
        )
    attachment = find(error, _public("llm_do.files", "AttachmentError"))
    if attachment is not None:
        return Failure(USAGE, "attachment", " ".join(str(attachment).split()))
    missing_key = find(error, _loaded("llm_do.project.models", "MissingApiKey"))
    if missing_key is not None:
        return Failure(USAGE, "api_key", str(missing_key))
    servers = _server_errors(error)
    if servers:
        lines = tuple(line for server in servers for line in _server_lines(server))
        return Failure(ERROR, "mcp", "; ".join(server.headline for server in servers), lines)
    return Failure(ERROR, "error", one_line(error))


def _server_errors(error: BaseException) -> list[Any]:
    """The MCP servers that could not be started (`McpServerError`s, or those of an `McpServersError`)."""
    several = find(error, _loaded("llm_do.mcp.server", "McpServersError"))
    if several is not None:
        return list(several.errors)
    one = find(error, _loaded("llm_do.mcp.server", "McpServerError"))
    return [] if one is None else [one]


def _server_lines(server: Any) -> tuple[str, ...]:
    """One line for a server that failed (command, exit code, what to do), then the tail of its stderr."""
    return (f"llm-do: error: {server.headline}", *(f"  | {line}" for line in server.stderr))


def report(error: BaseException, *, debug: bool = False) -> int:
    """Print what `error` means on stderr (and its traceback when `debug`); return the exit code."""
    failure = classify(error)
    if debug and failure.kind not in ("usage", "input", "interrupted"):
        traceback.print_exception(error)
    from rich.console import Console
    from rich.markup import escape

    from .printable import printable

    err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
    with contextlib.suppress(OSError):  # a terminal that hung up (SIGHUP): the exit code still says it
        for line in map(printable, failure.lines):
            err.print(f"[yellow]interrupted[/]{escape(line[11:])}" if failure.kind == "interrupted" else escape(line))
    return failure.code


def problems_json(error: BaseException) -> list[dict[str, Any]]:
    """A project's problems as JSON objects (`file`, `line`, `message`); empty for any other error."""
    project_error = _loaded("llm_do.project.problems", "ProjectError")
    if project_error is None or not isinstance(error, project_error):
        return []
    return [
        {"file": None if p.file is None else str(p.file), "line": p.line, "message": p.message} for p in error.problems
    ]


def find(error: BaseException, kind: type[Any] | None) -> Any:
    """The first exception of type `kind` in `error`, its causes, contexts and groups; else None."""
    if kind is None:
        return None
    return next((found for found in causes(error) if isinstance(found, kind)), None)


def _public(room: str, name: str) -> type[Any] | None:
    """The public class `name` (of `llm_do`) if its room `room` was imported (a run that never loaded it cannot have
    raised it)."""
    return _loaded("llm_do", name) if room in sys.modules else None


def _loaded(module: str, name: str) -> type[Any] | None:
    """The class `name` of the public module `module` if that module was imported (a run that never loaded it
    cannot have raised it): the command's failures are told apart without importing what a run did not."""
    found = sys.modules.get(module)
    value = getattr(found, name, None) if found is not None else None
    return value if isinstance(value, type) else None


def one_line(error: BaseException) -> str:
    """The exception's type and message on one line."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
