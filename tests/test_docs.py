"""Every ```python block of the docs runs, in order, one namespace per page (top-level await allowed)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

DOCS = Path(__file__).parents[1] / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
PAGES = sorted(path for path in DOCS.glob("*.md") if BLOCK.search(path.read_text()))


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
async def test_doc_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": f"docs_{page.stem}"}
    text = page.read_text()  # noqa: ASYNC240 (a small local file)
    for match in BLOCK.finditer(text):
        source = match.group(1)
        line = text[: match.start()].count("\n") + 2
        code = compile(
            ast.increment_lineno(ast.parse(source, mode="exec", feature_version=(3, 11)), line - 1),
            str(page),
            "exec",
            flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
        )
        result = eval(code, namespace)
        if result is not None:
            await result
