"""`plan_migration`: a project in the earlier llm-do's formats, rewritten into today's (docs/migrating.md).

The plan is a list of whole-file changes (`project.json` becomes `project.toml`, `.agent` files become
`.worker` files, earlier frontmatter keys become today's, Python modules are rewritten on their syntax tree)
and the list of what it could not translate, each with file, line and what to do by hand. A `project.json`
with a value that cannot be taken over plans no change. `apply_migration` writes a plan.
"""

from __future__ import annotations

import contextlib
import difflib
import glob
import json
import os
import re
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .. import PolicySettings
from .earlier import EARLIER_TOOLSETS, agent_call_approvals, earlier_toolset_message
from .earlier_api import earlier_api_problems
from .layout import CONFIG_FILE, EARLIER_CONFIG_FILE, WORKER_SUFFIXES, ProjectLayout, survey_project
from .native import NATIVE_TOOLS
from .problems import Problem, ProjectError

__all__ = ["Change", "Migration", "apply_migration", "plan_migration"]


@dataclass(frozen=True, slots=True)
class Change:
    """One file's change: `old` is None for a new file, `new` is None for a file removed; a file moved from
    `moved_from` (`old` is its text) to `path`."""

    path: Path
    old: str | None
    new: str | None
    moved_from: Path | None = None

    def diff(self, root: Path) -> str:
        """The change as git writes it (`git apply` applies it): a unified diff under git's header, with its lines
        for a new file, a removed one and a move, and paths relative to `root`."""
        name = self.path.relative_to(root).as_posix()
        before = self.moved_from.relative_to(root).as_posix() if self.moved_from is not None else name
        header = f"diff --git a/{before} b/{name}\n"
        if self.old is None:
            header += "new file mode 100644\n"
        elif self.new is None:
            header += f"deleted file mode {_git_mode(self.path)}\n"
        elif before != name:
            header += f"rename from {before}\nrename to {name}\n"
        lines = difflib.unified_diff(
            (self.old or "").splitlines(keepends=True),
            (self.new or "").splitlines(keepends=True),
            "/dev/null" if self.old is None else f"a/{before}",
            "/dev/null" if self.new is None else f"b/{name}",
        )
        return header + "".join(
            line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n" for line in lines
        )


def _read(path: Path) -> str:
    """The text of a file with its line endings as they are (CRLF stays CRLF), without a byte order mark."""
    return path.read_bytes().decode("utf-8-sig")


def _mode_for(change: Change) -> int:
    """The mode of the file `change` writes: the one of the file it replaces or moves, else a new file's."""
    source = change.moved_from or (change.path if change.old is not None else None)
    if source is not None:
        with contextlib.suppress(OSError):
            return source.stat().st_mode & 0o7777
    umask = os.umask(0o022)  # read it: os.umask sets it as it returns it
    os.umask(umask)
    return 0o666 & ~umask


def _git_mode(path: Path) -> str:
    """The mode git gives the file at `path`: 100755 when it is executable, else 100644."""
    try:
        executable = path.stat().st_mode & 0o100
    except OSError:
        executable = 0
    return "100755" if executable else "100644"


@dataclass
class Migration:
    """What `llm-do migrate` would do to the project at `root`, and what it cannot do."""

    root: Path
    changes: list[Change] = field(default_factory=list)
    untranslated: list[Problem] = field(default_factory=list)

    def diff(self) -> str:
        """Every change, as one unified diff."""
        return "".join(change.diff(self.root) for change in self.changes)


def plan_migration(path: Path | str) -> Migration:
    """The migration of the project at `path` (a directory or its `project.json`). Reads, never writes."""
    given = Path(path).resolve()
    root = given.parent if given.is_file() else given
    if not root.is_dir():
        raise ProjectError([Problem(given, None, "no such project directory; give the directory of project.json")])
    migration = Migration(root)
    earlier, config = root / EARLIER_CONFIG_FILE, root / CONFIG_FILE
    layout: ProjectLayout | None = None
    if earlier.is_file() and config.is_file():
        migration.untranslated.append(
            Problem(
                earlier,
                None,
                f"both {CONFIG_FILE} and {EARLIER_CONFIG_FILE} exist: merge {EARLIER_CONFIG_FILE} "
                f"into {CONFIG_FILE} by hand (docs/migrating.md has each key), then remove it",
            )
        )
    elif earlier.is_file():
        layout, manifest_problems = survey_project(earlier)
        migration.untranslated.extend(problem for problem in manifest_problems if not _entry_function(problem))
        if not layout.earlier_whole:  # removed with what it could not translate: nothing is migrated
            migration.untranslated.append(
                Problem(
                    earlier,
                    None,
                    f"{EARLIER_CONFIG_FILE} gives values that cannot be taken over (above), and would be removed "
                    "with them: nothing is migrated; fix them, then migrate again",
                )
            )
            return migration
    worker_files = list(layout.worker_files) if layout is not None else _worker_files(root)
    module_files = list(layout.module_files) if layout is not None else _module_files(root)
    if layout is not None:
        _siblings(root, worker_files, module_files, migration)
    agent_approvals = layout.agent_approvals if layout is not None else {}
    names = {_worker_name(file): file for file in worker_files}
    function = _earlier_entry_function(earlier, set(names)) if layout is not None else None
    entries: list[str] = []
    renamed: dict[Path, Path] = {}
    for file in worker_files:
        target = file.with_suffix(".worker")
        if file.suffix == ".agent":
            if target.exists():  # a worker file of the project or not, the rename would replace it
                migration.untranslated.append(
                    Problem(file, None, f"{target.name} exists already: rename one of them, then migrate again")
                )
                target = file
            renamed[file] = target
        text = _read(file)
        new, is_entry, problems = _worker_text(file, text, set(names), agent_approvals)
        migration.untranslated.extend(problems)
        if is_entry:
            entries.append(_worker_name(file))
        if target != file:
            migration.changes.append(Change(target, text, new, moved_from=file))
        elif new != text:
            migration.changes.append(Change(file, text, new))
    migration.changes.extend(_python(root, module_files, worker_files, function, migration))
    if function is not None:
        entries.insert(0, function[2])
    if layout is not None:
        toml = _project_toml(root, layout, entries, renamed, worker_files, module_files, migration, function)
        migration.changes.append(Change(config, None, toml))
        migration.changes.append(Change(earlier, _read(earlier), None))
    elif config.is_file() and renamed:
        _rename_in_config(root, config, renamed, migration)
    if layout is None and entries:
        migration.untranslated.append(
            Problem(root / CONFIG_FILE, None, f'name the default entry in {CONFIG_FILE}: entry = "{entries[0]}"')
        )
    return migration


def _rename_in_config(root: Path, config: Path, renamed: Mapping[Path, Path], migration: Migration) -> None:
    """`project.toml`'s `workers` with each .agent file it names that is renamed named as the .worker file it
    becomes, the rest of the file as it was; a pattern that matches renamed files is left to do by hand."""
    text = _read(config)
    try:
        workers = tomllib.loads(text).get("workers")
    except tomllib.TOMLDecodeError:
        return  # the check after it says so
    if not isinstance(workers, list):
        return
    key = re.search(r"^[ \t]*\"?workers\"?[ \t]*=", text, re.MULTILINE)
    new, patterns = text, []
    moved = {path for path, target in renamed.items() if target != path}
    for item in workers:
        if not isinstance(item, str) or ".agent" not in item:
            continue
        if glob.has_magic(item):  # a pattern matching files that are renamed: it would match them no more
            if moved & {path.resolve() for path in root.glob(item)}:
                patterns.append(item)
            continue
        if (root / item).resolve() not in moved or key is None:
            continue  # not renamed: it still loads as it is
        for quote in ('"', "'"):
            at = new.find(f"{quote}{item}{quote}", key.start())
            if at >= 0:
                written = f"{quote}{item.removesuffix('.agent')}.worker{quote}"
                new = new[:at] + written + new[at + len(item) + 2 :]
                break
        else:  # written otherwise (escapes): it would name a file that is no more
            patterns.append(item)
    if new != text:
        migration.changes.append(Change(config, text, new))
    if patterns:
        named = ", ".join(map(repr, patterns))
        migration.untranslated.append(
            Problem(
                config,
                None,
                f"{CONFIG_FILE} names .agent files that are renamed to .worker, by a pattern or a string migrate "
                f"does not rewrite ({named}): write it for the .worker files",
            )
        )


def apply_migration(migration: Migration) -> None:
    """Write a migration: every new or changed file is written beside its place first, then each is moved into
    place (a whole file, never half of one), then the files it replaces are removed. A failure while writing
    leaves the project as it was. A file keeps the mode of the one it replaces (or moves); a new one gets the
    umask's, as any new file."""
    staged: list[tuple[str, Path]] = []
    try:
        for change in migration.changes:
            if change.new is None:
                continue
            handle, temporary = tempfile.mkstemp(dir=change.path.parent, prefix=f".{change.path.name}.", suffix=".tmp")
            staged.append((temporary, change.path))
            try:
                out = os.fdopen(handle, "w", encoding="utf-8", newline="")  # its line endings as they are
            except BaseException:
                os.close(handle)
                raise
            with out:
                out.write(change.new)
            os.chmod(temporary, _mode_for(change))
    except BaseException:
        for temporary, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        raise
    for temporary, target in staged:
        os.replace(temporary, target)
    for change in migration.changes:
        if change.new is None:
            change.path.unlink()
        elif change.moved_from is not None:
            change.moved_from.unlink()


# -- worker files ---------------------------------------------------------------------------------------


def _worker_files(root: Path) -> list[Path]:
    return sorted(path for suffix in WORKER_SUFFIXES for path in root.glob(f"*{suffix}"))


def _worker_name(file: Path) -> str:
    try:
        front = _split(file.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError):
        return file.stem
    values = yaml.safe_load(front[0]) if front is not None else None
    name = values.get("name") if isinstance(values, dict) else None
    return name if isinstance(name, str) else file.stem


def _split(text: str) -> tuple[str, int] | None:
    """The frontmatter's text and the line index of its closing `---`, or None without frontmatter."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None
    closing = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    return None if closing is None else ("".join(lines[1:closing]), closing)


def _worker_text(
    file: Path, text: str, agents: set[str], agent_approvals: Mapping[str, PolicySettings]
) -> tuple[str, bool, list[Problem]]:
    """The worker file in today's format, whether it was marked as the entry, and what could not be translated."""
    split = _split(text)
    if split is None:
        return text, False, []
    front, closing = split
    try:
        node = yaml.compose(front, Loader=yaml.SafeLoader)
        values = yaml.safe_load(front)
    except yaml.YAMLError as error:
        return text, False, [Problem(file, None, f"the frontmatter is not valid YAML ({error}); fix it first")]
    if not isinstance(node, yaml.MappingNode) or not isinstance(values, dict):
        return text, False, []
    lines = front.splitlines(keepends=True)
    starts = [key.start_mark.line for key, _ in node.value]
    spans = {
        str(key.value): (start, end)
        for (key, _), start, end in zip(node.value, starts, [*starts[1:], len(lines)], strict=True)
    }
    problems: list[Problem] = []
    replaced: dict[str, str | None] = {}  # key -> its new lines (None: removed)
    is_entry = values.get("entry") is True
    if "entry" in values:
        replaced["entry"] = None
    for old in ("input_model_ref", "schema_in_ref"):
        if old in values:
            start, end = spans[old]
            replaced[old] = "".join(lines[start:end]).replace(old, "input", 1)
    if "server_side_tools" in values:
        native, native_problems = _native_tools(file, spans["server_side_tools"][0] + 2, values["server_side_tools"])
        problems.extend(native_problems)
        replaced["server_side_tools"] = _dump({"native_tools": native}) if native else None
    if "tools" in values:
        problems.append(
            Problem(
                file,
                spans["tools"][0] + 2,
                "tools: single tools are not named in files today; put them in a "
                "toolset (a FunctionToolset or a Toolset subclass in a project module) and name it in toolsets",
            )
        )
    given_toolsets = values.get("toolsets")
    toolsets: list[Any] = given_toolsets if isinstance(given_toolsets, list) else []
    today = [EARLIER_TOOLSETS.get(name) or name if isinstance(name, str) else name for name in toolsets]
    for name in toolsets:
        message = earlier_toolset_message(name) if isinstance(name, str) else None
        if message is not None and EARLIER_TOOLSETS[name] is None:
            problems.append(Problem(file, spans["toolsets"][0] + 2, message))
    if today != toolsets:
        start, end = spans["toolsets"]
        replaced["toolsets"] = "".join(_renamed_toolsets(line) for line in lines[start:end])
    approvals = _approvals(values, today, agents, agent_approvals)
    if approvals is not None and "approvals" in values:
        replaced["approvals"] = _dump({"approvals": approvals})
    out: list[str] = []
    for key, (start, end) in spans.items():
        if key not in replaced:
            out.extend(lines[start:end])
        elif replaced[key] is not None:
            out.append(str(replaced[key]))
    if approvals is not None and "approvals" not in values:
        out.append(_dump({"approvals": approvals}))
    body = text.splitlines(keepends=True)
    problems.extend(_earlier_tool_names(file, body, closing))
    new = "".join([body[0], *out, *body[closing:]])
    if "\r\n" in text:  # written on Windows: what was added ends its lines as the rest do
        new = new.replace("\r\n", "\n").replace("\n", "\r\n")
    return new, is_entry, problems


_EARLIER_TOOLS = {"read_file": "read_text", "write_file": "write_text", "list_files": "list_dir or glob"}
"""The earlier filesystem toolsets' tools and today's `filesystem` tools that do their work."""


def _earlier_tool_names(file: Path, lines: list[str], closing: int) -> list[Problem]:
    """A mention in the instructions of a tool of the earlier filesystem toolsets, which today's names differently."""
    pattern = re.compile(rf"(?<![\w]){'|'.join(_EARLIER_TOOLS)}(?![\w])")
    found = {index: pattern.findall(lines[index]) for index in range(closing + 1, len(lines))}
    names = sorted({name for mentions in found.values() for name in mentions})
    if names:
        first = min(index for index, mentions in found.items() if mentions)
        today = "; ".join(f"{name} is {_EARLIER_TOOLS[name]}" for name in names)
        return [
            Problem(
                file,
                first + 1,
                f"the instructions name the earlier filesystem tools ({', '.join(names)}, first on this line); "
                f"today's filesystem toolset names them otherwise ({today}): rename them in the instructions",
            )
        ]
    return []


def _renamed_toolsets(line: str) -> str:
    """A line of a `toolsets` list with the earlier built-in names that have an equivalent written as today's."""
    for old, new in EARLIER_TOOLSETS.items():
        if new is not None:
            line = re.sub(rf"(?<![\w-]){re.escape(old)}(?![\w-])", new, line)
    return line


def _approvals(
    values: dict[str, Any], toolsets: Sequence[Any], agents: set[str], agent_approvals: Mapping[str, PolicySettings]
) -> dict[str, Any] | None:
    """The worker's approvals with the earlier project.json's agent approvals under them, or None if unchanged."""
    written_approvals = values.get("approvals")
    given: dict[str, Any] = written_approvals if isinstance(written_approvals, dict) else {}
    result = dict(given)
    named = [name for name in toolsets if isinstance(name, str)]
    for name, policy in agent_call_approvals(named, agents, agent_approvals).items():
        written = policy.model_dump(exclude_defaults=True)
        result[name] = {**written, **result.get(name, {})}
    return result if result != given else None


_NATIVE_ALIASES = {"url_context": "web_fetch"}
"""pydantic-ai's earlier name of a native tool, where it changed."""


def _native_tools(file: Path, line: int, given: Any) -> tuple[dict[str, Any], list[Problem]]:
    """`server_side_tools` (a list of {tool_type, options...}) as today's `native_tools` mapping."""
    native: dict[str, Any] = {}
    problems: list[Problem] = []
    for item in given if isinstance(given, list) else [given]:
        kind = item.get("tool_type") if isinstance(item, dict) else None
        kind = _NATIVE_ALIASES.get(kind, kind) if isinstance(kind, str) else None
        if kind not in NATIVE_TOOLS:
            problems.append(
                Problem(
                    file,
                    line,
                    f"server_side_tools: {item!r} has no native tool today; the native tools are "
                    f"{', '.join(NATIVE_TOOLS)}",
                )
            )
            continue
        options = {key: value for key, value in item.items() if key != "tool_type"}
        native[str(kind)] = options or None
    return native, problems


def _dump(values: dict[str, Any]) -> str:
    return yaml.safe_dump(values, sort_keys=False, default_flow_style=False, allow_unicode=True)


# -- Python modules -------------------------------------------------------------------------------------


def _module_files(root: Path) -> list[Path]:
    """A project's modules without a project file: as `survey_project` finds them."""
    return sorted(
        path for path in root.glob("*.py") if not (path.name.startswith(("_", "test_")) or path.name == "conftest.py")
    )


def _python(
    root: Path,
    modules: Sequence[Path],
    workers: Sequence[Path],
    function: tuple[Path, str, str] | None,
    migration: Migration,
) -> list[Change]:
    """Each module rewritten from the earlier llm-do's Python API to today's (`rewrite.py`, LibCST); what has no
    rewrite that keeps its meaning is marked in the module and listed."""
    from .rewrite import ModuleContext, rewrite_module  # LibCST: imported by migrate only

    text_agents = frozenset(_worker_name(file) for file in workers if not _has_input_model(file))
    changes: list[Change] = []
    for module in modules:
        try:
            text = _read(module)
        except (OSError, UnicodeDecodeError):
            migration.untranslated.extend(earlier_api_problems(module))
            continue
        entry_functions = {function[1]: function[2]} if function is not None and function[0] == module else {}
        rewritten = rewrite_module(module, text, ModuleContext(text_agents, entry_functions))
        if rewritten.text is None and not rewritten.notes:
            migration.untranslated.extend(earlier_api_problems(module))  # nothing it could read or rewrite
            continue
        migration.untranslated.extend(rewritten.notes)
        if rewritten.text is not None:
            changes.append(Change(module, text, rewritten.text))
    return changes


def _has_input_model(file: Path) -> bool:
    """Whether a worker file names an input model (today's `input`, or an earlier key for it)."""
    try:
        front = _split(file.read_text(encoding="utf-8-sig"))
        values = yaml.safe_load(front[0]) if front is not None else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return True  # unknown: its calls are left as they are
    return isinstance(values, dict) and any(key in values for key in ("input", "input_model_ref", "schema_in_ref"))


def _entry_function(problem: Problem) -> bool:
    """Whether a problem of `project.json` is its `entry.function`, which migrate translates."""
    return problem.message.startswith("entry.function ")


def _earlier_entry_function(manifest: Path, workers: set[str]) -> tuple[Path, str, str] | None:
    """`entry.function` of the earlier `project.json` ("file.py:name"): the module, the function, and the entry
    name it gets today (its own, or NAME_entry when a worker has that name)."""
    try:
        values = json.loads(manifest.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    entry = values.get("entry") if isinstance(values, dict) else None
    given = entry.get("function") if isinstance(entry, dict) else None
    if not isinstance(given, str) or ":" not in given:
        return None
    file, _, name = given.rpartition(":")
    path = (manifest.parent / file).resolve()
    if not path.is_file() or not name.isidentifier():
        return None
    entry_name = name if name not in workers else f"{name}_entry"
    return path, name, entry_name


def _siblings(root: Path, workers: list[Path], modules: list[Path], migration: Migration) -> None:
    """The earlier llm-do let a directory hold other project files beside `project.json` (`project_x.json`),
    each naming some of its files; one `project.toml` names them all today, and each is listed to remove."""
    for sibling in sorted(root.glob("project_*.json")):
        try:
            values = json.loads(sibling.read_text(encoding="utf-8-sig"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if not isinstance(values, dict):
            continue
        for key, into in (("agent_files", workers), ("worker_files", workers), ("python_files", modules)):
            given = values.get(key)
            for name in given if isinstance(given, list) else []:
                path = (root / str(name)).resolve()
                if path.is_file() and path.is_relative_to(root) and path not in into:
                    into.append(path)
        entry = values.get("entry")
        named = entry.get("name") or entry.get("agent") if isinstance(entry, dict) else None
        runs = f"; its entry runs with --entry {named}" if isinstance(named, str) else ""
        migration.untranslated.append(
            Problem(
                sibling,
                None,
                f"another project file of the earlier llm-do: its files are in {CONFIG_FILE} now{runs}; "
                "remove it once checked",
            )
        )


# -- project.toml ---------------------------------------------------------------------------------------


def _project_toml(
    root: Path,
    layout: ProjectLayout,
    entries: list[str],
    renamed: Mapping[Path, Path],
    workers: list[Path],
    modules: list[Path],
    migration: Migration,
    function: tuple[Path, str, str] | None,
) -> str:
    lines = [f"# Translated from the earlier {EARLIER_CONFIG_FILE} by llm-do migrate (docs/migrating.md).\n"]
    relative = [renamed.get(path, path).relative_to(root).as_posix() for path in workers]
    lines.append(f"workers = {_toml(relative)}\n")
    lines.append(f"modules = {_toml([path.relative_to(root).as_posix() for path in modules])}\n")
    entry = function[2] if function is not None else layout.default_entry or (entries[0] if entries else None)
    if len(entries) > 1 and function is None:
        migration.untranslated.append(
            Problem(
                layout.config_file,
                None,
                f"{', '.join(entries)} are each marked entry: true; the default entry is "
                f"now {entries[0]!r}: change entry in {CONFIG_FILE} if another one is meant",
            )
        )
    if entry is not None:
        lines.append(f"entry = {_toml(entry)}\n")
    if layout.default_input is not None:
        lines.append(f"input = {_toml(layout.default_input)}\n")
    if layout.default_attachments:
        lines.append(f"attachments = {_toml(list(layout.default_attachments))}\n")
    if layout.approval_mode is not None:
        lines.append(f"approval_mode = {_toml(layout.approval_mode)}\n")
    if layout.max_depth is not None:  # read one less, for an entry agent; an entry function ran at depth 0 already
        depth = layout.max_depth + 1 if function is not None else layout.max_depth
        lines.append(f"max_depth = {_toml(depth)}\n")
    return "".join(lines)


def _toml(value: Any) -> str:
    """A TOML value: a JSON string is a TOML basic string; a mapping is an inline table."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(str(key))} = {_toml(item)}" for key, item in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")
