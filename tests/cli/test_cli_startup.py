"""`llm-do --help` and `--version` answer without importing pydantic-ai; a replayed run imports nothing it
does not use (no FastAPI, no MCP, no jobs); the facade stays whole while lazy."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import llm_do

from ..cli_projects import environment, llm_do as run_llm_do


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


BANK_CLERK = Path(__file__).parents[2] / "examples" / "bank_clerk"

NOT_FOR_A_REPLAYED_RUN = (
    "fastapi",  # dependency-injector's wiring imports it when installed; the command keeps it out
    "starlette",
    "pydantic_ai.models.function",  # only a direct `CallScope.call_tool` needs its model
    "pydantic_ai.mcp",
    "fastmcp",
    "llm_do.mcp",
    "llm_do.jobs",
    "procrastinate",
    "asyncpg",
    "opentelemetry.sdk",  # --otel only
    "llm_do.cli.otel",
    "llm_do.cli.approve",  # a terminal's approver; --approve-all needs none
    "llm_do.cli.chat",
)


def modules_after(*args: str) -> set[str]:
    """`sys.modules` after the command `llm-do ARGS` ran in a fresh interpreter (which must succeed)."""
    code = (
        "import json, sys\n"
        "from llm_do.cli.main import main\n"
        "code = main(sys.argv[1:])\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=environment(), timeout=120
    )
    report = json.loads(done.stderr.splitlines()[-1])
    assert report["code"] == 0, done.stderr
    assert "Done: moved 30 from alice to carol" in done.stdout
    return set(report["modules"])


def test_a_replayed_run_imports_no_web_framework_mcp_jobs_or_exporter() -> None:
    # Only meaningful where these are installed (the dev extra installs FastAPI and the rest).
    for name in ("fastapi", "starlette", "fastmcp", "procrastinate", "opentelemetry.sdk"):
        assert importlib.util.find_spec(name) is not None, f"{name} is not installed: `make setup` installs it"
    modules = modules_after(
        "run", str(BANK_CLERK), "--model", f"replay:{BANK_CLERK / 'recording.json'}", "--approve-all"
    )
    assert {"llm_do.cli.running", "dependency_injector.wiring", "llm_do.toolsets.sqlite_backend"} <= modules
    loaded = {
        name for name in modules if any(name == lazy or name.startswith(f"{lazy}.") for lazy in NOT_FOR_A_REPLAYED_RUN)
    }
    assert loaded == set()


def test_check_and_list_without_mcp_servers_import_no_mcp_client(tmp_path: Path) -> None:
    project = tmp_path / "hello"
    project.mkdir()
    (project / "hello.worker").write_text("---\nmodel: test\n---\nSay hi.\n")
    for command in ("check", "list"):
        modules = imported_modules(command, str(project))
        assert "llm_do.project" in modules  # the report is of a loaded project
        assert not {name for name in modules if name.split(".")[0] in ("fastmcp", "mcp") or name == "llm_do.mcp"}


WIRING_CHECK = """
import json, sys

if sys.argv[1] == "kept-out":
    from llm_do.cli.wiring import import_wiring_without_web_frameworks

    import_wiring_without_web_frameworks()
    assert "fastapi" not in sys.modules and "starlette" not in sys.modules

from dependency_injector import containers, providers
from dependency_injector.wiring import Provide, inject

assert ("fastapi" in sys.modules) is (sys.argv[1] == "as-installed")  # dependency-injector imports it by itself

from fastapi import Depends
from starlette.requests import Request


class Container(containers.DeclarativeContainer):
    value = providers.Object("injected")


@inject
def handler(value: str = Depends(Provide[Container.value])) -> object:
    return value


class AppRequest(Request):  # wiring leaves the markers of Starlette requests alone
    value = Provide[Container.value]


class Plain:
    value = Provide[Container.value]


container = Container()
container.wire(modules=[sys.modules[__name__]])
print(json.dumps([handler(), type(AppRequest.value).__name__, Plain.value]))
"""


def test_the_command_keeps_fastapi_out_of_wiring_without_changing_what_wiring_does(tmp_path: Path) -> None:
    script = tmp_path / "wired.py"
    script.write_text(textwrap.dedent(WIRING_CHECK))
    outputs = {
        mode: subprocess.run(
            [sys.executable, str(script), mode], capture_output=True, text=True, env=environment(), timeout=60
        )
        for mode in ("as-installed", "kept-out")
    }
    for done in outputs.values():
        assert done.returncode == 0, done.stderr
    assert (
        json.loads(outputs["kept-out"].stdout)
        == json.loads(outputs["as-installed"].stdout)
        == ["injected", "Provide", "injected"]
    )


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
