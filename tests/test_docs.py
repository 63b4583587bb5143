"""Every ```python block of the docs runs, in order, one namespace per page (top-level await allowed).

Fragments that are not meant to run on their own are fenced as ```py instead.
"""

from __future__ import annotations

import ast
import asyncio
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
PAGES = sorted(path for path in DOCS.glob("*.md") if BLOCK.search(path.read_text()))


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_doc_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": f"docs_{page.stem}"}
    text = page.read_text()
    loop = asyncio.new_event_loop()  # top-level awaits run here; a block may also call asyncio.run itself
    try:
        for match in BLOCK.finditer(text):
            line = text[: match.start()].count("\n") + 2
            tree = ast.increment_lineno(ast.parse(match.group(1), feature_version=(3, 11)), line - 1)
            result = eval(compile(tree, str(page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), namespace)
            if result is not None:
                loop.run_until_complete(result)
    finally:
        loop.close()


def worked_example(page: str) -> tuple[str, str]:
    """The first python block after '## Worked example' and the text block after 'Output:'."""
    section = page.split("## Worked example", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    output = re.search(r"Output:\n\n```text\n(.*?)```", section, re.DOTALL)
    assert code is not None and output is not None
    return code.group(1), output.group(1)


def test_the_approvals_worked_example_prints_what_the_page_shows() -> None:
    code, expected = worked_example((ROOT / "docs" / "approvals.md").read_text())
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True, cwd=ROOT
    )
    assert completed.stdout == expected


def test_the_readme_links_the_approvals_page() -> None:
    assert "[docs/approvals.md](docs/approvals.md)" in (ROOT / "README.md").read_text()
