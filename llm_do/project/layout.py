"""`ProjectLayout`: which files make a project, from its directory or its `project.toml`."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..guards import ModelLimits, SuspectOutput
from .problems import Problem, ProjectError, raise_if_any

__all__ = ["CONFIG_FILE", "ProjectLayout", "discover_project"]

CONFIG_FILE = "project.toml"
_KEYS = {
    "workers": "worker files or glob patterns, relative to the project directory (default: ['*.worker'])",
    "modules": "Python files or glob patterns (default: every *.py not starting with _ or test_)",
    "entry": "the entry to run when none is named",
    "input": "the input of the default entry when none is given: a text, or a table for an input model",
    "mcp_servers": "MCP servers by toolset name: [mcp_servers.NAME] with command/args/env/cwd or url/headers",
    "mcp_config": "JSON files of MCP servers in the mcpServers format (pydantic-ai's load_mcp_toolsets)",
    "limits": "limits on every worker's model: [limits] with max_tokens, request_timeout, run_timeout, run_requests, "
    "run_tokens (0: none)",
    "suspect_output": "a final reply that looks like an unexecuted tool call or an echoed prompt: 'flag' or 'retry'",
    "text_tool_calls": "true: run a reply that is only a JSON call to one of the worker's tools as that call",
}


@dataclass(frozen=True, slots=True)
class ProjectLayout:
    """The files of a project and its defaults, found without importing or parsing anything."""

    root: Path
    worker_files: tuple[Path, ...]
    module_files: tuple[Path, ...]
    default_entry: str | None = None
    default_input: Any = None
    config_file: Path | None = None
    mcp_servers: Any = None
    """The raw `[mcp_servers]` table of `project.toml`, checked when the project is built."""
    mcp_config: Any = None
    """The raw `mcp_config` list of `project.toml`."""
    rules: Any = None
    """What `limits`, `suspect_output` and `text_tool_calls` of `project.toml` set, by name (checked)."""

    def line_of(self, key: str) -> int | None:
        """The line of a top-level key in `project.toml`, when there is one."""
        if self.config_file is None:
            return None
        return _line_of(self.config_file.read_text(encoding="utf-8-sig"), key)


def discover_project(path: Path | str) -> ProjectLayout:
    """The layout of the project at `path`: a directory, its `project.toml`, or one `.worker` file.

    A `.worker` file stands for the project of its directory, with that worker as the default entry.
    Raises `ProjectError` with every problem found (a missing path, bad keys, globs matching nothing).
    """
    given = Path(path).resolve()
    if not given.exists():
        raise ProjectError(
            [Problem(given, None, "no such file or directory; give a project directory or a .worker file")]
        )
    worker: Path | None = None
    if given.is_file() and given.suffix == ".worker":
        root, worker = given.parent, given
    elif given.is_file() and given.name == CONFIG_FILE:
        root = given.parent
    elif given.is_dir():
        root = given
    else:
        raise ProjectError(
            [Problem(given, None, f"not a project: give a directory, its {CONFIG_FILE} or a .worker file")]
        )
    config = root / CONFIG_FILE
    layout = _from_config(root, config) if config.is_file() else _default(root)
    if worker is not None:
        files = layout.worker_files if worker in layout.worker_files else (*layout.worker_files, worker)
        return ProjectLayout(
            root,
            files,
            layout.module_files,
            worker.stem,
            layout.default_input,
            layout.config_file,
            layout.mcp_servers,
            layout.mcp_config,
            layout.rules,
        )
    return layout


def _default(root: Path) -> ProjectLayout:
    workers = tuple(sorted(root.glob("*.worker")))
    modules = tuple(path for path in sorted(root.glob("*.py")) if not path.name.startswith(("_", "test_", "conftest")))
    return ProjectLayout(root, workers, modules)


def _from_config(root: Path, config: Path) -> ProjectLayout:
    text = config.read_text(encoding="utf-8-sig")  # a byte order mark (Windows editors) is not TOML
    try:
        values = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        match = re.search(r"line (\d+)", str(error))
        line = int(match.group(1)) if match else None
        raise ProjectError([Problem(config, line, f"not valid TOML: {error}")]) from None
    problems: list[Problem] = []
    for key in values:
        if key not in _KEYS:
            known = "; ".join(f"{name}: {meaning}" for name, meaning in _KEYS.items())
            problems.append(Problem(config, _line_of(text, key), f"unknown key {key!r}; known keys are {known}"))
    workers = _files(root, config, text, "workers", values.get("workers", ["*.worker"]), problems)
    default_modules = [path.name for path in _default(root).module_files]
    modules = _files(root, config, text, "modules", values.get("modules", default_modules), problems)
    entry = values.get("entry")
    if entry is not None and not isinstance(entry, str):
        problems.append(Problem(config, _line_of(text, "entry"), f"entry must be a name, got {entry!r}"))
        entry = None
    rules = _rules(config, text, values, problems)
    raise_if_any(problems)
    return ProjectLayout(
        root,
        workers,
        modules,
        entry,
        values.get("input"),
        config,
        values.get("mcp_servers"),
        values.get("mcp_config"),
        rules,
    )


def _rules(config: Path, text: str, values: dict[str, Any], problems: list[Problem]) -> dict[str, Any]:
    """What `[limits]`, `suspect_output` and `text_tool_calls` set, each checked (a wrong one is a problem)."""
    given: dict[str, Any] = {}
    limits = values.get("limits")
    if limits is not None:
        try:
            checked = ModelLimits.model_validate(limits)
        except ValidationError as error:
            for item in error.errors():
                where = ".".join(map(str, ("limits", *item["loc"])))
                problems.append(
                    Problem(config, _line_of(text, "limits"), f"{where}: {item['msg']} (got {item['input']!r})")
                )
        else:
            given.update({name: getattr(checked, name) for name in checked.model_fields_set})
    checks: tuple[tuple[str, TypeAdapter[Any]], ...] = (
        ("suspect_output", TypeAdapter(SuspectOutput)),
        ("text_tool_calls", TypeAdapter(bool)),
    )
    for key, adapter in checks:
        if key not in values:
            continue
        try:
            given[key] = adapter.validate_python(values[key], strict=True)
        except ValidationError as error:
            problems.append(
                Problem(config, _line_of(text, key), f"{key}: {error.errors()[0]['msg']} (got {values[key]!r})")
            )
    return given


def _files(root: Path, config: Path, text: str, key: str, given: Any, problems: list[Problem]) -> tuple[Path, ...]:
    line = _line_of(text, key)
    if not isinstance(given, list) or not all(isinstance(item, str) for item in given):
        problems.append(Problem(config, line, f"{key} must be a list of paths or glob patterns, got {given!r}"))
        return ()
    found: list[Path] = []
    for pattern in given:
        if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            problems.append(Problem(config, line, f"{key}: {pattern!r} is outside the project; use a relative path"))
            continue
        matched = sorted(root.glob(pattern)) if any(c in pattern for c in "*?[") else [root / pattern]
        matched = [path for path in matched if path.is_file()]
        if not matched:
            problems.append(Problem(config, line, f"{key}: {pattern!r} matches no file under {root}; fix the pattern"))
        found.extend(path for path in matched if path not in found)
    return tuple(found)


def _line_of(text: str, key: str) -> int | None:
    name = rf"\"?{re.escape(key)}\"?"
    match = re.search(rf"^[ \t]*(?:{name}[ \t]*=|\[[ \t]*{name}[ \t]*\])", text, re.MULTILINE)
    return None if match is None else text.count("\n", 0, match.start()) + 1
