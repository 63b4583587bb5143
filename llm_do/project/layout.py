"""`ProjectLayout`: which files make a project, from its directory or its `project.toml`."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from .. import ModelLimits, PolicySettings
from ..guards import SuspectOutput
from .manifest import APPROVAL_MODES, attachment_paths, json_line_of, read_manifest
from .model_settings import checked_setting
from .models import ModelServer
from .problems import Problem, ProjectError, raise_if_any

__all__ = ["CONFIG_FILE", "EARLIER_CONFIG_FILE", "ProjectLayout", "discover_project", "survey_project"]

CONFIG_FILE = "project.toml"
EARLIER_CONFIG_FILE = "project.json"
"""The earlier llm-do's project file, read by `project.manifest` (docs/migrating.md)."""
WORKER_SUFFIXES = (".worker", ".agent")
"""Agent files: `.worker`, and `.agent` as the earlier llm-do named them (the same format)."""
_KEYS = {
    "workers": "worker files or glob patterns, relative to the project directory (default: ['*.worker'])",
    "modules": "Python files or glob patterns (default: every *.py not starting with _ or test_)",
    "entry": "the entry to run when none is named",
    "input": "the input of the default entry when none is given: a text, or a table for an input model",
    "mcp_servers": "MCP servers by toolset name: [mcp_servers.NAME] with command/args/env/cwd or url/headers",
    "mcp_config": "JSON files of MCP servers in the mcpServers format (pydantic-ai's load_mcp_toolsets)",
    "limits": "limits on every worker's model: [limits] with max_tokens, request_timeout, run_timeout, run_requests, "
    "run_tokens, repeated_calls (0: none)",
    "suspect_output": "a final reply that looks like an unexecuted tool call or an echoed prompt: 'flag' or 'retry'",
    "text_tool_calls": "true: run a reply that is only a JSON call to one of the worker's tools as that call",
    "approval_mode": "what a call that asks gets when nobody is asked: 'prompt', 'approve_all' or 'reject_all' "
    "(--approve-all, --reject-all and LLM_DO_APPROVAL_MODE win)",
    "approval_default": "what a call to a tool nobody declared safe gets: 'ask' (the default), 'allow' or 'deny' "
    "(LLM_DO_APPROVAL_DEFAULT wins)",
    "max_depth": "the deepest nesting of calls (--max-depth and LLM_DO_MAX_DEPTH win)",
    "model": "the model of workers that name none, provider:name (--model and LLM_DO_MODEL win)",
    "providers": "OpenAI-compatible servers by name: [providers.NAME] with base_url and, if it needs a key, "
    "api_key_env; a model NAME:model is that model on that server",
    "model_settings": "pydantic-ai model settings of every worker, [model_settings] with temperature, max_tokens, ...; "
    "a worker's own model_settings win, key by key",
    "attachments": "files handed to a run of the default entry that is given none (--attach wins): paths relative to "
    "the project directory",
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
    approval_mode: str | None = None
    """The project file's approval mode (checked); the settings win when they set one."""
    max_depth: int | None = None
    """The project file's max depth (checked); the settings win when they set one."""
    approval_default: str | None = None
    """The project file's decision for tools nobody declared safe (checked); the settings win when they set one."""
    default_model: str | None = None
    """The project file's model for workers that name none; `--model` and `LLM_DO_MODEL` win."""
    model_servers: Mapping[str, ModelServer] = field(default_factory=dict, hash=False)
    """The project's OpenAI-compatible servers by name: a model `NAME:model` is served by `NAME`'s."""
    model_settings: Mapping[str, Any] = field(default_factory=dict, hash=False)
    """The project file's model settings (checked), laid under each worker's own `model_settings`."""
    default_attachments: tuple[str, ...] = ()
    """Files (paths relative to the project directory, checked) handed to a run of the default entry given none."""
    agent_approvals: Mapping[str, PolicySettings] = field(default_factory=dict, hash=False)
    """Approvals of calls to agents, by agent name, from the earlier `project.json` ("*": every agent): laid
    under the `approvals` of each worker that calls the agent."""
    earlier_whole: bool = True
    """False when the earlier `project.json` gives a value that could not be taken over (its problems say which):
    `llm-do migrate` leaves such a file as it is."""

    @property
    def config_name(self) -> str:
        """The name of the project's file (`project.toml`, or the earlier `project.json`); `project.toml` when it
        has none."""
        return self.config_file.name if self.config_file is not None else "project.toml"

    def line_of(self, key: str) -> int | None:
        """The line of a top-level key in `project.toml`, when there is one."""
        if self.config_file is None:
            return None
        text = self.config_file.read_text(encoding="utf-8-sig")
        return json_line_of(text, key) if self.config_file.suffix == ".json" else _line_of(text, key)


def discover_project(path: Path | str) -> ProjectLayout:
    """The layout of the project at `path`: a directory, its `project.toml`, or one `.worker` file.

    A `.worker` file stands for the project of its directory, with that worker as the default entry.
    Raises `ProjectError` with every problem found (a missing path, bad keys, globs matching nothing).
    """
    layout, problems = survey_project(path)
    raise_if_any(problems)
    return layout


def survey_project(path: Path | str) -> tuple[ProjectLayout, list[Problem]]:
    """The layout of the project at `path` and the problems of its project file, without raising: a
    project file that cannot be read leaves the layout of the directory alone, so that the problems
    of its workers and modules can still be found. Raises `ProjectError` when `path` is no project."""
    given = Path(path).resolve()
    if not given.exists():
        raise ProjectError(
            [Problem(given, None, "no such file or directory; give a project directory or a .worker file")]
        )
    worker: Path | None = None
    if given.is_file() and given.suffix in WORKER_SUFFIXES:
        root, worker = given.parent, given
    elif given.is_file() and given.name in (CONFIG_FILE, EARLIER_CONFIG_FILE):
        root = given.parent
    elif given.is_dir():
        root = given
    else:
        raise ProjectError(
            [Problem(given, None, f"not a project: give a directory, its {CONFIG_FILE} or a .worker file")]
        )
    config, earlier = root / CONFIG_FILE, root / EARLIER_CONFIG_FILE
    problems: list[Problem] = []
    if config.is_file() and earlier.is_file():
        problems.append(
            Problem(
                earlier,
                None,
                f"both {config} and {earlier} are project files; keep one: {CONFIG_FILE} is today's "
                f"(llm-do migrate turns {EARLIER_CONFIG_FILE} into it), so remove {EARLIER_CONFIG_FILE}",
            )
        )
    if config.is_file():
        layout = _from_config(root, config, problems)
    elif earlier.is_file():
        manifest = read_manifest(root, earlier, problems)
        layout = ProjectLayout(
            root,
            manifest.worker_files,
            manifest.module_files,
            manifest.default_entry,
            manifest.default_input,
            earlier,
            approval_mode=manifest.approval_mode,
            max_depth=manifest.max_depth,
            default_attachments=manifest.attachments,
            agent_approvals=manifest.agent_approvals,
            earlier_whole=manifest.whole,
        )
        if not manifest.read:  # as for a project.toml that is not TOML: the directory's files meanwhile
            layout = replace(_default(root), config_file=earlier, earlier_whole=False)
    else:
        layout = _default(root)
    if worker is not None:
        files = layout.worker_files if worker in layout.worker_files else (*layout.worker_files, worker)
        layout = replace(layout, worker_files=files, default_entry=worker.stem)
    return layout, problems


def _default(root: Path) -> ProjectLayout:
    workers = _default_workers(root)
    modules = tuple(path for path in sorted(root.glob("*.py")) if not path.name.startswith(("_", "test_", "conftest")))
    return ProjectLayout(root, workers, modules)


def _default_workers(root: Path) -> tuple[Path, ...]:
    return tuple(sorted(path for suffix in WORKER_SUFFIXES for path in root.glob(f"*{suffix}")))


def _from_config(root: Path, config: Path, problems: list[Problem]) -> ProjectLayout:
    text = config.read_text(encoding="utf-8-sig")  # a byte order mark (Windows editors) is not TOML
    try:
        values = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        match = re.search(r"line (\d+)", str(error))
        line = int(match.group(1)) if match else None
        problems.append(Problem(config, line, f"not valid TOML: {error}"))
        return replace(_default(root), config_file=config)
    for key in values:
        if key not in _KEYS:
            known = "; ".join(f"{name}: {meaning}" for name, meaning in _KEYS.items())
            problems.append(Problem(config, _line_of(text, key), f"unknown key {key!r}; known keys are {known}"))
    if "workers" in values:
        workers = _files(root, config, text, "workers", values["workers"], problems)
    else:
        workers = _default_workers(root)
    default_modules = [path.name for path in _default(root).module_files]
    modules = _files(root, config, text, "modules", values.get("modules", default_modules), problems)
    entry = values.get("entry")
    if entry is not None and not isinstance(entry, str):
        problems.append(Problem(config, _line_of(text, "entry"), f"entry must be a name, got {entry!r}"))
        entry = None
    rules = _rules(config, text, values, problems)
    mode = values.get("approval_mode")
    if mode is not None and mode not in APPROVAL_MODES:
        message = f"approval_mode must be one of {', '.join(APPROVAL_MODES)}, got {mode!r}"
        problems.append(Problem(config, _line_of(text, "approval_mode"), message))
        mode = None
    undeclared = values.get("approval_default")
    if undeclared is not None and undeclared not in _DECISIONS:
        message = f"approval_default must be one of {', '.join(_DECISIONS)}, got {undeclared!r}"
        problems.append(Problem(config, _line_of(text, "approval_default"), message))
        undeclared = None
    depth = values.get("max_depth")
    if depth is not None and (not isinstance(depth, int) or isinstance(depth, bool) or depth < 0):
        problems.append(Problem(config, _line_of(text, "max_depth"), f"max_depth must be 0 or more, got {depth!r}"))
        depth = None
    model = values.get("model")
    if model is not None and not isinstance(model, str):
        problems.append(Problem(config, _line_of(text, "model"), f"model must be provider:name, got {model!r}"))
        model = None
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
        approval_mode=mode,
        max_depth=depth,
        approval_default=undeclared,
        default_model=model,
        model_servers=_servers(config, text, values.get("providers"), problems),
        model_settings=_model_settings(config, text, values.get("model_settings"), problems),
        default_attachments=_attachments(root, config, text, values.get("attachments"), problems),
    )


def _header_line(text: str, table: str) -> int | None:
    """The line of a `[table]` header in `text`, if it has one."""
    header = re.compile(rf"^[ \t]*\[[ \t]*{re.escape(table)}[ \t]*\]", re.MULTILINE)
    found = header.search(text)
    return None if found is None else text.count("\n", 0, found.start()) + 1


_DECISIONS = ("ask", "allow", "deny")

_SERVER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
_SERVER_KEYS = {"base_url", "api_key_env"}
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _servers(config: Path, text: str, table: Any, problems: list[Problem]) -> dict[str, ModelServer]:
    """`[providers.NAME]`: each with a `base_url` (http or https) and maybe an `api_key_env`, checked."""
    if table is None:
        return {}
    line = _line_of(text, "providers")
    if not isinstance(table, dict):
        problems.append(Problem(config, line, "providers must be a table of [providers.NAME] tables"))
        return {}
    servers: dict[str, ModelServer] = {}
    for name, server in table.items():
        where = f"providers.{name}"
        line = _header_line(text, where) or line
        if not _SERVER_NAME.fullmatch(name) or name in ("test", "replay"):
            problems.append(Problem(config, line, f"{where}: a provider's name is letters, digits, '_', '.', '-'"))
            continue
        keys = set(server) if isinstance(server, dict) else set()
        url = server.get("base_url") if isinstance(server, dict) else None
        key_env = server.get("api_key_env") if isinstance(server, dict) else None
        if not isinstance(url, str) or not re.match(r"https?://", url):
            problems.append(Problem(config, line, f"{where}: base_url must be the server's http(s) URL, got {url!r}"))
        elif keys - {"base_url", "api_key_env"}:
            unknown = ", ".join(sorted(keys - {"base_url", "api_key_env"}))
            problems.append(
                Problem(config, line, f"{where}: unknown key {unknown}; the keys are base_url, api_key_env")
            )
        elif key_env is not None and not (
            isinstance(key_env, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key_env)
        ):
            problems.append(Problem(config, line, f"{where}: api_key_env must name an environment variable"))
        else:
            servers[name] = ModelServer(url, key_env)
    return servers


def _model_settings(config: Path, text: str, table: Any, problems: list[Problem]) -> dict[str, Any]:
    """`[model_settings]`: pydantic-ai's model settings, each key known and each value of its type (checked)."""
    if table is None:
        return {}
    if not isinstance(table, dict):
        problems.append(
            Problem(config, _line_of(text, "model_settings"), f"model_settings must be a table, got {table!r}")
        )
        return {}
    found: dict[str, Any] = {}
    for key, value in table.items():
        try:
            found[key] = checked_setting(key, value)
        except ValueError as error:
            line = _table_key_line(text, "model_settings", key)
            problems.append(Problem(config, line, f"model_settings.{key}: {error}"))
    return found


def _attachments(root: Path, config: Path, text: str, given: Any, problems: list[Problem]) -> tuple[str, ...]:
    """`attachments`: files under the project directory, by paths relative to it (checked: each a file)."""
    if given is None:
        return ()
    line = _line_of(text, "attachments")
    if not isinstance(given, list) or not all(isinstance(item, str) and item.strip() for item in given):
        problems.append(Problem(config, line, f"attachments must be a list of file paths, got {given!r}"))
        return ()
    return attachment_paths(root, config, line, "attachments", given, problems)


def _table_key_line(text: str, table: str, key: str) -> int | None:
    """The line of `key = ...` under the `[table]` header, else the line of the table (an inline table)."""
    header = _header_line(text, table)
    if header is not None:
        lines = text.splitlines()
        pattern = re.compile(rf"^[ \t]*\"?{re.escape(key)}\"?[ \t]*=")
        for number in range(header, len(lines)):
            if lines[number].lstrip().startswith("["):
                break
            if pattern.match(lines[number]):
                return number + 1
        return header
    return _line_of(text, table)


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
                line = _table_key_line(text, "limits", str(item["loc"][0])) if item["loc"] else None
                problems.append(
                    Problem(config, line or _line_of(text, "limits"), f"{where}: {item['msg']} (got {item['input']!r})")
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
