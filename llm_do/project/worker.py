"""`WorkerSpec`: a `.worker` file (YAML frontmatter between `---` lines, then Markdown instructions) parsed
and checked on its own, with the file line of every problem. References are resolved later, by the build."""

from __future__ import annotations

import contextlib
import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from .. import ModelLimits, PolicySettings
from ..errors import listing
from ..guards import SuspectOutput
from .earlier import earlier_key_message
from .model_settings import checked_setting
from .native import NativeOptions, parse_native_tools
from .problems import Problem, ProjectError

__all__ = ["FIELDS", "WorkerSpec", "check_worker", "check_worker_file", "given_rules", "parse_worker", "read_worker"]

Loc = tuple[str | int, ...]

_NAME = re.compile(r"^[A-Za-z_][\w-]*$")
_MODEL = re.compile(r"^(test|[\w./-]+:\S+)$")
_REFERENCE = re.compile(r"^[^:\s]+:[A-Za-z_]\w*$")

FIELDS: dict[str, str] = {
    "name": "the worker's name, used as entry and toolset name (default: the file name without .worker)",
    "description": "what the worker does: the tool description another worker sees",
    "model": "a pydantic-ai model name, like openai:gpt-5.2 (excludes compatible_models)",
    "compatible_models": "glob patterns the model given at run time must match, like ['openai:*']",
    "toolsets": "names of toolsets: built-ins, container providers, project toolsets, other workers",
    "input": "a pydantic model the input must match: module:Class or path.py:Class",
    "output": "a pydantic model the answer must match: module:Class or path.py:Class",
    "model_settings": "pydantic-ai model settings, like {temperature: 0.2}",
    "approvals": "approval overrides per toolset, like {shell: {default: ask}, sql: {tools: {commit: allow}}}",
    "mcp_servers": "MCP servers this worker uses, by toolset name: {NAME: {command: ..., args: [...]}} or {url: ...}",
    "native_tools": "the model provider's own tools: [web_search, web_fetch, code_execution, image_generation], "
    "or a mapping of them to options",
    "limits": "limits on its model: {max_tokens, request_timeout, run_timeout, run_requests, run_tokens, "
    "repeated_calls} (0: none)",
    "suspect_output": "a final reply that looks like an unexecuted tool call or an echoed prompt: flag or retry",
    "text_tool_calls": "true: run a reply that is only a JSON call to one of its tools as that call",
    "takes_attachments": "true: agents calling it as a tool are always offered its attachments parameter",
}
"""Every frontmatter key a worker file may use, and what it is for."""

_HINTS: dict[str, str] = {
    "name": "use letters, digits, _ or -, starting with a letter or _",
    "description": "write one line of text",
    "model": "write provider:model-name, like model: openai:gpt-5.2",
    "compatible_models": "write a list of glob patterns, like compatible_models: ['openai:*', 'anthropic:*']",
    "toolsets": "write a list of names, like toolsets: [filesystem, shell]",
    "input": "write module:Class or path.py:Class, like input: schemas:Question",
    "output": "write module:Class or path.py:Class, like output: schemas.py:Answer",
    "model_settings": "write a mapping, like model_settings: {temperature: 0.2}",
    "approvals": "write approvals: {TOOLSET: {default: allow|ask|deny, tools: {TOOL: allow|ask|deny}}}",
    "mcp_servers": "write mcp_servers: {NAME: {command: python, args: [server.py], scope: per_call}}",
    "limits": "write limits: {max_tokens: 2048, request_timeout: 300, run_requests: 20}",
    "suspect_output": "write suspect_output: flag, or suspect_output: retry",
    "text_tool_calls": "write text_tool_calls: true, or false",
    "takes_attachments": "write takes_attachments: true, or false",
}


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """A parsed `.worker` file. `lines` maps a frontmatter key path, like `("toolsets", 1)`, to its file line."""

    name: str
    file: Path
    instructions: str
    description: str | None = None
    model: str | None = None
    compatible_models: tuple[str, ...] = ()
    toolsets: tuple[str, ...] = ()
    input: str | None = None
    output: str | None = None
    model_settings: Mapping[str, Any] = field(default_factory=dict, hash=False)
    approvals: Mapping[str, PolicySettings] = field(default_factory=dict, hash=False)
    mcp_servers: Mapping[str, Any] = field(default_factory=dict, hash=False)
    """MCP server declarations by toolset name, as written (checked when the project is built)."""
    native_tools: Mapping[str, NativeOptions] = field(default_factory=dict, hash=False)
    """The provider's own tools this worker's agent sends, by name, with their options (see `project.native`)."""
    rules: Mapping[str, Any] = field(default_factory=dict, hash=False)
    """What `limits`, `suspect_output` and `text_tool_calls` set, by name (`max_tokens`, ..., `suspect_output`)."""
    takes_attachments: bool = False
    lines: Mapping[Loc, int] = field(default_factory=dict, hash=False, repr=False)
    invalid: frozenset[str] = frozenset()
    """Keys whose values were wrong (each reported as a problem), left at their defaults here."""

    def line_of(self, *loc: str | int) -> int:
        """The file line of a key (or list item) of the frontmatter, or of its nearest enclosing key; else 1."""
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return 1

    def problem(self, message: str, *loc: str | int) -> Problem:
        """A problem at the line of `loc` in this worker's file."""
        return Problem(self.file, self.line_of(*loc), message)


class _Frontmatter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    description: str | None = None
    model: str | None = None
    compatible_models: list[str] | None = None
    toolsets: list[str] = []
    input: str | None = None
    output: str | None = None
    model_settings: dict[str, Any] = {}
    approvals: dict[str, PolicySettings] = {}
    mcp_servers: dict[str, Any] = {}
    native_tools: Any = None  # checked by parse_native_tools, with the line of each name and option
    limits: ModelLimits | None = None
    suspect_output: SuspectOutput | None = None
    text_tool_calls: bool | None = None
    takes_attachments: bool = False

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r} is not a valid name")
        return value

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        if not _MODEL.match(value):
            raise ValueError(f"{value!r} is not a provider:model name")
        return value

    @field_validator("compatible_models", mode="before")
    @classmethod
    def _patterns(cls, value: Any) -> Any:
        value = [value] if isinstance(value, str) else value
        if isinstance(value, list) and (not value or not all(value)):
            raise ValueError("the list of patterns is empty")
        return value

    @field_validator("toolsets")
    @classmethod
    def _toolsets(cls, value: list[str]) -> list[str]:
        seen = [name for index, name in enumerate(value) if name in value[:index]]
        if seen:
            raise ValueError(f"{seen[0]!r} is listed twice")
        return value

    @field_validator("input", "output")
    @classmethod
    def _reference(cls, value: str) -> str:
        if not _REFERENCE.match(value):
            raise ValueError(f"{value!r} is not a reference to a class")
        return value

    @field_validator("limits", mode="before")
    @classmethod
    def _limits(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for key in value:
                if key not in ModelLimits.model_fields:
                    close = difflib.get_close_matches(str(key), ModelLimits.model_fields, n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    raise ValueError(
                        f"unknown limit {key!r}{hint}; known: {listing(ModelLimits.model_fields, ordered=False)}"
                    )
        return value


def read_worker(path: Path) -> WorkerSpec:
    """Parse the worker file at `path`; raise `ProjectError` listing all its problems."""
    spec, problems = check_worker_file(path)
    if problems:
        raise ProjectError(sorted(problems, key=lambda problem: problem.line or 0))
    assert spec is not None
    return spec


def check_worker_file(path: Path) -> tuple[WorkerSpec | None, list[Problem]]:
    """`check_worker` on the file at `path` (a file that cannot be read is a problem)."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte order mark (Windows editors) is not the text
    except IsADirectoryError:
        message = "a directory, not a worker file: rename it, or move it out of the project directory"
        return None, [Problem(path, None, message)]
    except UnicodeDecodeError as error:
        return None, [Problem(path, None, f"not UTF-8 text: {error}; save it as UTF-8")]
    except OSError as error:
        return None, [Problem(path, None, f"cannot read the worker file: {error.strerror or error}; check its access")]
    return check_worker(text, file=path)


def parse_worker(text: str, *, file: Path) -> WorkerSpec:
    """Parse the text of a worker file; raise `ProjectError` listing all its problems (with lines).

    A file without a `---` first line is all instructions, with every field at its default.
    """
    spec, problems = check_worker(text, file=file)
    if problems:
        raise ProjectError(sorted(problems, key=lambda problem: problem.line or 0))
    assert spec is not None
    return spec


def check_worker(text: str, *, file: Path) -> tuple[WorkerSpec | None, list[Problem]]:
    """Parse the text of a worker file and list its problems (with lines), without raising.

    The spec holds every key that is right, so that a project can check its references (toolsets,
    models) and report those problems too; it is None when the frontmatter cannot be read at all.
    """
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return WorkerSpec(name=file.stem, file=file, instructions=text.strip()), []
    closing = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if closing is None:
        return None, [Problem(file, 1, "the frontmatter opened by '---' is never closed; add a '---' line")]
    front = "\n".join(lines[1:closing]) + "\n"
    body = "\n".join(lines[closing + 1 :]).strip()
    try:
        node = yaml.compose(front, Loader=yaml.SafeLoader)
        values = yaml.safe_load(front)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 2 if mark is not None else 1
        return None, [Problem(file, line, f"the frontmatter is not valid YAML: {error.problem}")]
    if values is None:
        values, node = {}, None
    if not isinstance(values, dict) or not isinstance(node, yaml.MappingNode | None):
        return None, [Problem(file, 2, "the frontmatter must be a mapping of keys, like 'model: test'")]
    where: dict[Loc, int] = {}
    problems = _walk(node, (), where, file)
    front_matter: _Frontmatter | None = None
    wrong_keys: set[str] = set()
    try:
        front_matter = _Frontmatter.model_validate(values)
    except ValidationError as error:
        problems.extend(_problem(item, where, file) for item in error.errors())
        # Check what remains without the keys in error, so that their problems are reported too.
        wrong_keys = {str(item["loc"][0]) for item in error.errors() if item["loc"]}
        with contextlib.suppress(ValidationError):
            front_matter = _Frontmatter.model_validate({k: v for k, v in values.items() if k not in wrong_keys})
    if front_matter is not None and front_matter.model is not None and front_matter.compatible_models is not None:
        problems.append(
            Problem(
                file,
                where[("compatible_models",)],
                "model and compatible_models exclude each other: name one model, or list the patterns "
                "a model given at run time must match",
            )
        )
    native_tools, native_problems = parse_native_tools(values.get("native_tools"), file, where)
    problems.extend(native_problems)
    settings, settings_problems = _checked_settings(front_matter, where, file)
    problems.extend(settings_problems)
    wrong = {str(problem_key) for problem_key in values if problem_key not in FIELDS} | set(wrong_keys)
    wrong |= {"native_tools"} if native_problems else set()
    wrong |= {"model_settings"} if settings_problems else set()
    if front_matter is None:
        return None, problems
    return WorkerSpec(
        name=front_matter.name or file.stem,
        file=file,
        instructions=body,
        description=front_matter.description,
        model=front_matter.model,
        compatible_models=tuple(front_matter.compatible_models or ()),
        toolsets=tuple(front_matter.toolsets),
        input=front_matter.input,
        output=front_matter.output,
        model_settings=settings,
        approvals=dict(front_matter.approvals),
        mcp_servers=dict(front_matter.mcp_servers),
        native_tools=native_tools,
        rules=given_rules(front_matter.limits, front_matter.suspect_output, front_matter.text_tool_calls),
        takes_attachments=front_matter.takes_attachments,
        lines=where,
        invalid=frozenset(wrong),
    ), problems


def _checked_settings(
    front_matter: _Frontmatter | None, where: Mapping[Loc, int], file: Path
) -> tuple[dict[str, Any], list[Problem]]:
    """The worker's model settings as pydantic-ai takes them, and a problem at the line of each wrong one."""
    settings: dict[str, Any] = {}
    problems: list[Problem] = []
    for key, value in (front_matter.model_settings if front_matter is not None else {}).items():
        try:
            settings[key] = checked_setting(key, value)
        except ValueError as error:
            line = where.get(("model_settings", key), where.get(("model_settings",), 2))
            problems.append(Problem(file, line, f"model_settings.{key}: {error}"))
    return settings, problems


def given_rules(
    limits: ModelLimits | None, suspect_output: SuspectOutput | None, text_tool_calls: bool | None
) -> dict[str, Any]:
    """The model rules a file sets (the limits it names, and the two checks when given), by name."""
    given: dict[str, Any] = {name: getattr(limits, name) for name in limits.model_fields_set} if limits else {}
    if suspect_output is not None:
        given["suspect_output"] = suspect_output
    if text_tool_calls is not None:
        given["text_tool_calls"] = text_tool_calls
    return given


def _walk(node: yaml.Node | None, loc: Loc, where: dict[Loc, int], file: Path) -> list[Problem]:
    """Record the file line of every key and list item below `node`; report duplicate keys."""
    problems: list[Problem] = []
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            path = (*loc, key.value)
            line = key.start_mark.line + 2
            if path in where:
                shown = ".".join(map(str, path))
                problems.append(
                    Problem(file, line, f"{shown!r} is given twice (first on line {where[path]}); keep one")
                )
                continue
            where[path] = line
            problems.extend(_walk(value, path, where, file))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            where[(*loc, index)] = item.start_mark.line + 2
            problems.extend(_walk(item, (*loc, index), where, file))
    return problems


def _problem(item: Any, where: Mapping[Loc, int], file: Path) -> Problem:
    loc: Loc = tuple(item["loc"])
    line = next((where[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in where), 2)
    key = str(loc[0]) if loc else ""
    if item["type"] == "extra_forbidden" and len(loc) == 1:
        earlier = earlier_key_message(key)
        if earlier is not None:
            return Problem(file, line, earlier)
        close = difflib.get_close_matches(key, FIELDS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return Problem(file, line, f"unknown key {key!r}: {hint}known keys are {', '.join(FIELDS)}")
    shown = ".".join(map(str, loc)) or "frontmatter"
    message = str(item["msg"]).removeprefix("Value error, ")
    if item["type"] not in ("value_error", "assertion_error"):
        message = f"{message} (got {item['input']!r})"
    hint = _HINTS.get(key, "")
    return Problem(file, line, f"{shown}: {message}" + (f"; {hint}" if hint else ""))
