"""`llm-do --help` and `--version` answer without importing pydantic-ai; the facade stays whole while lazy."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

import llm_do

from .cli_projects import environment
from .cli_projects import llm_do as run_llm_do


def imported_modules(*args: str) -> set[str]:
    """The modules `python -X importtime -m llm_do.cli ARGS` imported (from its import-time report)."""
    done = run_llm_do(*args, python=("-X", "importtime"))
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert lines, done.stderr
    return {line.rpartition("|")[2].strip() for line in lines}


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_do_not_import_pydantic_ai(flag: str) -> None:
    modules = imported_modules(flag)
    assert "llm_do.cli.main" in modules  # the report is the command's
    assert not {name for name in modules if name.split(".")[0] in ("pydantic_ai", "pydantic", "rich", "yaml")}
    assert not {name for name in modules if name.startswith("dependency_injector")}


def test_each_command_imports_pydantic_ai_only_when_it_runs() -> None:
    for name in ("run", "chat", "check", "list"):
        assert "pydantic_ai" not in imported_modules(name, "--help")


def test_version_prints_the_installed_version() -> None:
    done = run_llm_do("--version")
    assert (done.returncode, done.stdout) == (0, f"llm-do {importlib.metadata.version('llm-do')}\n")


def test_importing_llm_do_does_not_import_pydantic_ai() -> None:
    code = "import sys, llm_do; print('pydantic_ai' in sys.modules, 'llm_do.runtime' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment(), check=True)
    assert done.stdout == "False False\n"


def type_checking_imports() -> dict[str, str]:
    """Name -> module of the facade's `if TYPE_CHECKING:` imports (what mypy and IDEs see)."""
    tree = ast.parse(Path(llm_do.__file__).read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    return {
        alias.name: f"llm_do.{node.module}"
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_type_checkers_see_every_public_name() -> None:
    assert sorted(type_checking_imports()) == sorted(llm_do.__all__)


@pytest.mark.parametrize("name", llm_do.__all__)
def test_every_public_name_imports_from_the_facade(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from llm_do import {name}", namespace)
    value = namespace[name]
    assert value is getattr(importlib.import_module(type_checking_imports()[name]), name)
    assert value is getattr(llm_do, name)
    assert name in dir(llm_do)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        llm_do.Nope  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(ImportError):
        exec("from llm_do import Nope", {})
