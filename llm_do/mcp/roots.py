"""MCP roots: the directories a client offers an MCP server to work in, confined to a project directory.

A root is given relative to the project directory (or absolute) and resolved, symbolic links included:
one that resolves outside the project directory is refused unless allowed. Standard library only, so
that checking a project's declarations never imports fastmcp.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..errors import ConfigurationError

__all__ = ["RootRefused", "check_root", "confined_roots"]


class RootRefused(ConfigurationError):
    """A root that is not a directory, or that resolves outside the project directory when that is not allowed."""

    def __init__(self, path: str | Path, resolved: Path, project_root: Path, *, outside: bool, advice: str) -> None:
        self.path = str(path)
        self.resolved = resolved
        self.project_root = project_root
        self.outside = outside
        """True when the root is refused for being outside the project directory (else: not a directory)."""
        if outside:
            what = f"is {resolved}, outside the project directory {project_root}; {advice}"
        else:
            what = f"is not a directory ({resolved})"
        super().__init__(f"root {self.path!r} {what}")


def check_root(project_root: Path | str, path: str | Path, *, allow_outside: bool = False, advice: str) -> Path:
    """The directory `path` names (relative to `project_root`), resolved; raises `RootRefused`, whose message
    ends with `advice` (how to allow it) when the root is outside the project directory."""
    base = Path(project_root).resolve()
    resolved = (base / path).resolve()
    if not resolved.is_dir():
        raise RootRefused(path, resolved, base, outside=False, advice=advice)
    if not allow_outside and not resolved.is_relative_to(base):
        raise RootRefused(path, resolved, base, outside=True, advice=advice)
    return resolved


def confined_roots(project_root: Path | str, paths: Iterable[str | Path], *, allow_outside: bool = False) -> list[str]:
    """The `file://` URIs of `paths`, for `MCPToolset(roots=...)`: directories inside `project_root` (relative
    paths are relative to it), unless `allow_outside`. Raises `RootRefused` (a `ConfigurationError`) naming the
    path and what it resolves to."""
    advice = "move it into the project, or pass allow_outside=True"
    return [check_root(project_root, path, allow_outside=allow_outside, advice=advice).as_uri() for path in paths]
