"""`project.json`, the earlier llm-do's project file, read into today's `ProjectLayout` (docs/migrating.md).

Each key whose meaning is ours becomes today's equivalent; each other key is a problem, with its line,
that names what replaces it (or says there is nothing).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from .. import PolicySettings
from ..approvals import ApprovalMode
from .problems import Problem

__all__ = ["APPROVAL_MODES", "EARLIER_PROJECT_KEYS", "Manifest", "attachment_paths", "json_line_of", "read_manifest"]

APPROVAL_MODES: tuple[str, ...] = get_args(ApprovalMode)
CONFIG_FILE = "project.toml"


@dataclass(frozen=True, slots=True)
class Manifest:
    """What an earlier `project.json` says, in today's terms (`project.layout` makes it a `ProjectLayout`)."""

    worker_files: tuple[Path, ...] = ()
    module_files: tuple[Path, ...] = ()
    default_entry: str | None = None
    default_input: Any = None
    approval_mode: str | None = None
    max_depth: int | None = None
    attachments: tuple[str, ...] = ()
    agent_approvals: Mapping[str, PolicySettings] = field(default_factory=dict, hash=False)
    read: bool = True
    """False when the file could not be read as a JSON object: nothing of it is taken over."""
    whole: bool = True
    """False when some value the file gives could not be taken over (a problem says which): `llm-do migrate`
    then leaves the file as it is, since it would be removed with that value."""


EARLIER_PROJECT_KEYS: dict[str, str] = {
    "version": "dropped (1 is the only version there was)",
    "runtime.approval_mode": "approval_mode",
    "runtime.max_depth": "max_depth, one less: the earlier llm-do ran the entry agent at depth 1, today at 0",
    "runtime.return_permission_errors": "dropped: a denied call is always returned to the model as its result",
    "runtime.auth_mode": "'oauth_off' is dropped; llm-do has no OAuth: set the provider's API key",
    "runtime.agent_calls_require_approval": "approvals: {AGENT: {default: ask}} in each worker that calls an agent",
    "runtime.agent_attachments_require_approval": "approvals: {AGENT: {attachments: ask}} in each calling worker",
    "runtime.agent_approval_overrides": "approvals: {AGENT: ...} in each worker that calls AGENT",
    "allow_cli_input": "true is dropped (the command line's input is always taken); false has no equivalent",
    "entry.agent": "entry",
    "entry.function": "entry, naming an @entry function of a project module",
    "entry.args.attachments": "attachments (files handed to a run of the default entry that is given none)",
    "entry.args": "input (a text when args is only {input: TEXT}, else a table for the entry's input model)",
    "entry.input": "input",
    "agent_files": "workers (the files renamed from .agent to .worker by llm-do migrate)",
    "worker_files": "workers",
    "python_files": "modules",
    "generated_agents_dir": "dropped: an agent made at run time (the dynamic_agents toolset) lives in its run and is "
    "never written as a file",
}
"""Every key of the earlier `project.json` and what replaces it in `project.toml`."""

_DESIGN_ERA = {"worker_calls_require_approval", "worker_attachments_require_approval", "worker_approval_overrides"}
_RUNTIME = {
    "approval_mode",
    "max_depth",
    "return_permission_errors",
    "auth_mode",
    "agent_calls_require_approval",
    "agent_attachments_require_approval",
    "agent_approval_overrides",
    *_DESIGN_ERA,
}
_TOP = {"version", "runtime", "allow_cli_input", "entry", "generated_agents_dir", "agent_files", "worker_files"}


def json_line_of(text: str, key: str, after: int = 0) -> int | None:
    """The line of the first `"key":` in a JSON text at or after line `after` (1-based), when there is one."""
    start = 0
    for _ in range(max(after - 1, 0)):
        start = text.find("\n", start) + 1
        if start == 0:
            return None
    match = re.compile(rf'"{re.escape(key)}"\s*:').search(text, start)
    return None if match is None else text.count("\n", 0, match.start()) + 1


def attachment_paths(
    root: Path, config: Path, line: int | None, key: str, given: list[str], problems: list[Problem]
) -> tuple[str, ...]:
    """The default attachments `given` (paths relative to `root`), each a file under it, named once."""
    found: list[str] = []
    for name in given:
        path = (root / name).resolve()
        if Path(name).is_absolute() or not path.is_relative_to(root.resolve()):
            problems.append(Problem(config, line, f"{key}: {name!r} is outside the project; give a relative path"))
        elif not path.is_file():
            problems.append(Problem(config, line, f"{key}: {name!r} is not a file under {root}; fix the path"))
        elif name in found:
            problems.append(Problem(config, line, f"{key}: {name!r} is named twice; name each file once"))
        else:
            found.append(name)
    return tuple(found)


def read_manifest(root: Path, path: Path, problems: list[Problem]) -> Manifest:
    """The layout `project.json` at `path` describes; what cannot be taken over goes to `problems`."""
    reader = _Reader(root, path, problems)
    return reader.layout()


class _Reader:
    def __init__(self, root: Path, path: Path, problems: list[Problem]) -> None:
        self.root = root
        self.path = path
        self.problems = problems
        self.text = ""
        self.whole = True

    def problem(self, message: str, *keys: str) -> None:
        self.problems.append(Problem(self.path, self.line(*keys), message))

    def lost(self, message: str, *keys: str) -> None:
        """A problem with a value that cannot be taken over: the file is not whole."""
        self.whole = False
        self.problem(message, *keys)

    def line(self, *keys: str) -> int | None:
        line: int | None = None
        for key in keys:  # a nested key is looked for after its parent's line
            line = json_line_of(self.text, key, line or 0) or line
        return line

    def layout(self) -> Manifest:
        empty = Manifest(read=False, whole=False)
        try:
            self.text = self.path.read_text(encoding="utf-8-sig")
            values = json.loads(self.text)
        except (OSError, UnicodeDecodeError) as error:
            self.lost(f"cannot read the project file: {error}")
            return empty
        except json.JSONDecodeError as error:
            message = f"not valid JSON: {error.msg} (column {error.colno})"
            self.problems.append(Problem(self.path, error.lineno, message))
            return empty
        if not isinstance(values, dict):
            self.lost("project.json must be a JSON object of keys")
            return empty
        for key in values:
            if key not in _TOP | {"python_files"}:
                self.problem(
                    f"unknown key {key!r} of the earlier project.json; its keys were {', '.join(sorted(_TOP))}, "
                    f"python_files. Today's project file is {CONFIG_FILE} (docs/projects.md)",
                    key,
                )
        if values.get("version", 1) != 1:
            self.problem(f"version {values.get('version')!r}: the earlier project.json had version 1 only", "version")
        mode, depth, approvals = self.runtime(values.get("runtime", {}))
        if values.get("allow_cli_input", True) is not True:
            self.problem(
                "allow_cli_input: false has no equivalent: llm-do always takes the input given on the command line; "
                "remove the key",
                "allow_cli_input",
            )
        entry, given_input, attachments = self.entry(values.get("entry", {}))
        workers = self.files("agent_files" if "agent_files" in values else "worker_files", values)
        modules = self.files("python_files", values)
        return Manifest(
            workers,
            modules,
            entry,
            given_input,
            approval_mode=mode,
            max_depth=depth,
            attachments=attachments,
            agent_approvals=approvals,
            whole=self.whole,
        )

    def runtime(self, runtime: Any) -> tuple[str | None, int | None, dict[str, PolicySettings]]:
        if not isinstance(runtime, dict):
            self.lost(f"runtime must be an object, got {runtime!r}", "runtime")
            return None, None, {}
        for key in runtime:
            if key not in _RUNTIME:
                self.problem(f"unknown key runtime.{key}; its keys were {', '.join(sorted(_RUNTIME))}", "runtime", key)
        mode = runtime.get("approval_mode")
        if mode is not None and mode not in APPROVAL_MODES:
            self.lost(
                f"approval_mode must be one of {', '.join(APPROVAL_MODES)}, got {mode!r}", "runtime", "approval_mode"
            )
            mode = None
        depth = runtime.get("max_depth")
        if depth is not None and (not isinstance(depth, int) or isinstance(depth, bool) or depth < 1):
            self.lost(f"max_depth must be 1 or more, got {depth!r}", "runtime", "max_depth")
            depth = None
        elif depth is not None:
            depth -= 1  # the earlier llm-do ran the entry agent at depth 1, today at 0: the same nesting
        auth = runtime.get("auth_mode", "oauth_off")
        if auth != "oauth_off":
            self.problem(
                f"auth_mode {auth!r}: llm-do has no OAuth login; set the provider's API key "
                "(ANTHROPIC_API_KEY, OPENAI_API_KEY, ...) and remove the key",
                "runtime",
                "auth_mode",
            )
        return mode, depth, self.agent_approvals(runtime)

    def agent_approvals(self, runtime: dict[str, Any]) -> dict[str, PolicySettings]:
        """Per agent name ("*": every agent), the decisions its callers' `approvals` get."""
        prefix = "worker" if any(key in runtime for key in _DESIGN_ERA) else "agent"
        every = self.policy(
            runtime.get(f"{prefix}_calls_require_approval"), runtime.get(f"{prefix}_attachments_require_approval")
        )
        found: dict[str, PolicySettings] = {"*": every}
        overrides = runtime.get(f"{prefix}_approval_overrides", {})
        if not isinstance(overrides, dict):
            self.lost(f"{prefix}_approval_overrides must be an object", "runtime", f"{prefix}_approval_overrides")
            return found
        for name, override in overrides.items():
            known = {"calls_require_approval", "attachments_require_approval"}
            if not isinstance(override, dict) or not set(override) <= known:
                self.lost(
                    f"{prefix}_approval_overrides.{name}: give calls_require_approval and/or "
                    "attachments_require_approval, true or false",
                    "runtime",
                    name,
                )
                continue
            calls = override.get("calls_require_approval", runtime.get(f"{prefix}_calls_require_approval"))
            files = override.get("attachments_require_approval", runtime.get(f"{prefix}_attachments_require_approval"))
            found[name] = self.policy(calls, files)
        return found

    @staticmethod
    def policy(calls: Any, attachments: Any) -> PolicySettings:
        return PolicySettings(default="ask" if calls else None, attachments="ask" if attachments else None)

    def entry(self, entry: Any) -> tuple[str | None, Any, tuple[str, ...]]:
        if not isinstance(entry, dict):
            self.lost(f"entry must be an object, got {entry!r}", "entry")
            return None, None, ()
        for key in entry:
            if key not in ("agent", "function", "args", "input"):
                self.problem(f"unknown key entry.{key}; its keys were agent, function, args (or input)", "entry", key)
        name: str | None = entry.get("agent") if isinstance(entry.get("agent"), str) else None
        function = entry.get("function")
        if function is not None:
            self.problem(
                f"entry.function {function!r} names a plain Python function of the earlier API; today an entry "
                "function is an async function decorated with llm_do.entry, taking (scope, input): decorate it, then "
                'name it with entry = "NAME" in project.toml; it ran at depth 0 as it does today, so give max_depth '
                "its earlier number (it is read one less, for an entry agent)",
                "entry",
                "function",
            )
        args = entry.get("args", entry.get("input"))
        if args is None:
            return name, None, ()
        if not isinstance(args, dict):
            self.lost(f"entry.args must be an object, got {args!r}", "entry", "args")
            return name, None, ()
        attachments: tuple[str, ...] = ()
        if "attachments" in args:
            given = args["attachments"]
            line = self.line("entry", "attachments")
            known = len(self.problems)
            if not isinstance(given, list) or not all(isinstance(item, str) and item.strip() for item in given):
                self.problems.append(
                    Problem(self.path, line, f"entry.args.attachments must be a list of file paths, got {given!r}")
                )
            else:
                attachments = attachment_paths(
                    self.root, self.path, line, "entry.args.attachments", given, self.problems
                )
            self.whole = self.whole and len(self.problems) == known
        rest = {key: value for key, value in args.items() if key != "attachments"}
        if set(rest) == {"input"} and isinstance(rest["input"], str):
            return name, rest["input"], attachments
        return name, rest or None, attachments

    def files(self, key: str, values: dict[str, Any]) -> tuple[Path, ...]:
        given = values.get(key, [])
        if not isinstance(given, list) or not all(isinstance(item, str) and item.strip() for item in given):
            self.lost(f"{key} must be a list of file paths, got {given!r}", key)
            return ()
        found: list[Path] = []
        for name in given:
            path = (self.root / name).resolve()
            if not path.is_relative_to(self.root.resolve()):
                self.lost(f"{key}: {name!r} is outside the project; move it in and give a relative path", key)
            elif not path.is_file():
                self.lost(f"{key}: {name!r} is not a file under {self.root}; fix the path", key)
            elif path not in found:
                found.append(path)
        return tuple(found)
