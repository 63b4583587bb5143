"""Projects written file by file for a test, and the problems loading one reports."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from llm_do.project import ProjectError, load_project


def write(root: Path, files: dict[str, str]) -> Path:
    """Write `files` (name: text, dedented) under `root`; `root`."""
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(content).lstrip())
    return root


def problems(root: Path, **options: object) -> list[tuple[str, int | None, str]]:
    """The problems `load_project(root, **options)` raises, as (file name, line, message)."""
    with pytest.raises(ProjectError) as caught:
        load_project(root, **options)  # type: ignore[arg-type]
    return [(p.file.name if p.file else "", p.line, p.message) for p in caught.value.problems]
