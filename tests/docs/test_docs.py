"""The examples in docs/ run as written.

A fenced block whose first line is `# file: NAME` is written to NAME in a fresh directory (without
that line for a `markdown` or `json` block, where it would be part of the content); a `console`
block runs each `$ command` there in a shell and compares its output line by line (`...` matches
anything), `llm-do` being forked from a warm interpreter (`tests/cli_warm.py`); any other `python`
block runs in-process, in order, sharing one namespace, with top-level `await` allowed (a block may
also call `asyncio.run` itself). Fragments that are not meant to run are fenced as `py`. `LLM_DO_*`
variables of the outer environment are removed first.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .. import cli_warm

DOCS = Path(__file__).parents[2] / "docs"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
HEADER = re.compile(r"#\s*file:\s*(\S+)")


def blocks(doc: Path) -> list[tuple[str, str, int]]:
    text = doc.read_text()
    return [(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 2) for m in FENCE.finditer(text)]


def matches(expected: str, actual: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, actual) is not None


def run_console(block: str, where: Path, env: dict[str, str], origin: str) -> None:
    commands: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            commands[-1][1].append(line)
    for command, expected in commands:
        done = subprocess.run(
            command, shell=True, cwd=where, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        actual = done.stdout.splitlines()
        ok = len(actual) == len(expected) and all(map(matches, expected, actual))
        assert ok, f"{origin}: `{command}` printed:\n{done.stdout}\nexpected:\n" + "\n".join(expected)


def run_python(block: str, namespace: dict[str, Any], origin: str, line: int, loop: asyncio.AbstractEventLoop) -> None:
    tree = ast.increment_lineno(ast.parse(block), line - 1)
    code = compile(tree, origin.rpartition(":")[0], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)
    if inspect.iscoroutine(result):
        loop.run_until_complete(result)


PAGES = sorted(page.name for page in DOCS.glob("*.md") if re.search(r"^```(python|console)$", page.read_text(), re.M))


@pytest.mark.long
@pytest.mark.parametrize("name", PAGES)
def test_doc_examples_run(
    name: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in [v for v in os.environ if v.upper().startswith("LLM_DO_")]:
        monkeypatch.delenv(variable)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("PYTEST_ADDOPTS", None)
    if any(lang == "console" and "llm-do " in block for lang, block, _ in blocks(DOCS / name)):
        env = cli_warm.command_on_path(env, tmp_path_factory.mktemp("bin"))  # the command, without its start-up
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    namespace: dict[str, Any] = {"__name__": f"docs.{name}"}
    ran = 0
    loop = asyncio.new_event_loop()
    try:
        for lang, block, line in blocks(DOCS / name):
            origin = f"docs/{name}:{line}"
            header = HEADER.fullmatch(block.partition("\n")[0].strip())
            if header:
                target = tmp_path / header.group(1)
                target.parent.mkdir(parents=True, exist_ok=True)
                # A Markdown file (a .worker file, say) or a JSON file starts after the header line.
                target.write_text(block.partition("\n")[2] if lang in ("markdown", "json") else block)
            elif lang == "console":
                run_console(block, tmp_path, env, origin)
            elif lang == "python":
                run_python(block, namespace, origin, line, loop)
            else:
                continue
            ran += 1
    finally:
        loop.close()
        for module in set(sys.modules) - before:
            if getattr(sys.modules[module], "__file__", None) and str(tmp_path) in str(sys.modules[module].__file__):
                del sys.modules[module]
    assert ran >= 1, f"docs/{name} has no runnable example"


def worked_example(page: str) -> tuple[str, str]:
    """The first python block after '## Worked example' and the text block after 'Output:'."""
    section = page.split("## Worked example", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    output = re.search(r"Output:\n\n```text\n(.*?)```", section, re.DOTALL)
    assert code is not None and output is not None
    return code.group(1), output.group(1)


def test_the_approvals_worked_example_prints_what_the_page_shows() -> None:
    code, expected = worked_example((DOCS.parent / "docs" / "approvals.md").read_text())
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True, cwd=DOCS.parent
    )
    assert completed.stdout == expected


def test_the_readme_links_the_approvals_page() -> None:
    assert "[docs/approvals.md](docs/approvals.md)" in (DOCS.parent / "README.md").read_text()
