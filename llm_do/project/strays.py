"""What `llm-do check` finds wrong with a project beside what loading it finds: nothing to run, or files where
agents belong that the project leaves out or does not understand (reported whether or not the project loads)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

import yaml

from .layout import WORKER_SUFFIXES, ProjectLayout, survey_project
from .problems import Problem, ProjectError

__all__ = ["raise_with_strays", "stray_problems"]

_AGENT_KEYS = frozenset({"model", "toolsets", "instructions", "compatible_models", "server_side_tools"})
"""Frontmatter keys that make a file look like an agent's."""
_SKIPPED = frozenset({".py", ".toml", ".json", ".txt", ".csv", ".lock", ".pyc"})
_LARGEST = 1 << 20


def stray_problems(layout: ProjectLayout, entries: Mapping[str, Any]) -> list[Problem]:
    """The project has no entry; or a file in its directory (or a directory of its workers) is an agent file
    it leaves out, or looks like an agent file but is not one."""
    problems: list[Problem] = []
    if not entries:
        fix = f", or fix the files {layout.config_file.name} names" if layout.config_file is not None else ""
        problems.append(
            Problem(
                layout.config_file or layout.root,
                None,
                f"the project has no entries: no .worker or .agent file and no @entry function was loaded from "
                f"{layout.root}; add a .worker file{fix}",
            )
        )
    problems.extend(stray_files(layout))
    return problems


def raise_with_strays(error: ProjectError, path: Path | str) -> NoReturn:
    """Raise `error` with the stray files of the project at `path` beside its problems (a project that does not
    load still has them), in file order; `error` as it is when there are none, or when `path` is no project."""
    try:
        layout, _ = survey_project(path)
    except ProjectError:
        raise error from None
    known = set(error.problems)
    strays = [problem for problem in stray_files(layout) if problem not in known]
    if not strays:
        raise error
    raise ProjectError(
        sorted([*error.problems, *strays], key=lambda problem: (str(problem.file or ""), problem.line or 0)),
        error.to_install,
    )


def stray_files(layout: ProjectLayout) -> list[Problem]:
    """Each file in the project's directory (or a directory of its workers) that is an agent file it leaves out,
    or looks like an agent file but is not one."""
    problems: list[Problem] = []
    loaded = {path.resolve() for path in layout.worker_files}
    folders = sorted({layout.root.resolve(), *(path.parent for path in loaded)})
    for folder in folders:
        for path in sorted(folder.iterdir()):
            if not path.is_file() or path.resolve() in loaded:
                continue
            problem = _stray(path, layout)
            if problem is not None:
                problems.append(problem)
    return problems


def _stray(path: Path, layout: ProjectLayout) -> Problem | None:
    config = layout.config_name
    if path.suffix in WORKER_SUFFIXES:
        return Problem(
            path,
            None,
            f"an agent file the project leaves out: {config} does not list it; add it to the project's workers, "
            "or move it out of the project directory",
        )
    if path.suffix in _SKIPPED or path.name.startswith(".") or path.stat().st_size > _LARGEST:
        return None
    keys = _frontmatter_keys(path)
    if not keys & _AGENT_KEYS:
        return None
    return Problem(
        path,
        1,
        f"looks like an agent file (its frontmatter has {', '.join(sorted(keys & _AGENT_KEYS))}) but llm-do reads "
        f"agents from .worker (and .agent) files only; rename it to {path.stem.split('.')[0]}.worker, "
        "or move it out of the project directory",
    )


def _frontmatter_keys(path: Path) -> set[str]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return set()
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return set()
    closing = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if closing is None:
        return set()
    try:
        values = yaml.safe_load("\n".join(lines[1:closing]))
    except yaml.YAMLError:
        return set()
    return {str(key) for key in values} if isinstance(values, dict) else set()
