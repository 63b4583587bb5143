"""Without the `cli` extra (PyYAML, rich, LibCST): the library imports and runs an agent with a built-in toolset,
`import llm_do.project` names the extra, and the `llm-do` command says in one line what to install.

The extra's modules are kept out of a subprocess by a `sitecustomize` that makes importing them fail as it does
where they are not installed; `make test-lowest` checks the same in a virtualenv that lacks them
(`ci/lowest.py`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
MISSING = 'needs the cli extra, which is not installed (no module named {module!r}): pip install "llm-do[cli]"'
NOT_INSTALLED = '''
import importlib.abc
import os
import sys

MISSING = os.environ["NOT_INSTALLED"].split(",")


class NotInstalled(importlib.abc.MetaPathFinder):
    """The modules NOT_INSTALLED names, as if they were not installed."""

    def find_spec(self, fullname, path, target=None):
        if fullname.partition(".")[0] in MISSING:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


sys.meta_path.insert(0, NotInstalled())
'''


@pytest.fixture
def without_extras(tmp_path: Path) -> dict[str, str]:
    """The environment of a subprocess that cannot import rich or yaml."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NOT_INSTALLED)
    path = os.pathsep.join([str(site), str(ROOT)])
    environment = {k: v for k, v in os.environ.items() if not k.upper().startswith("LLM_DO_")}
    return {**environment, "PYTHONPATH": path, "NOT_INSTALLED": "rich,yaml,libcst"}


def test_the_command_says_in_one_line_which_extra_it_needs(tmp_path: Path, without_extras: dict[str, str]) -> None:
    (tmp_path / "ask.worker").write_text("---\nmodel: test\n---\nAnswer.\n")
    command = Path(sys.executable).with_name("llm-do")
    for args in (["run", str(tmp_path), "hi"], ["check", str(tmp_path)], ["worker", str(tmp_path)]):
        done = subprocess.run([command, *args], capture_output=True, text=True, env=without_extras, cwd=tmp_path)
        assert (done.returncode, done.stdout) == (1, ""), done.stderr
        assert done.stderr.splitlines() == [f"llm-do: error: the llm-do command {MISSING.format(module='rich')}"]
    version = subprocess.run([command, "--version"], capture_output=True, text=True, env=without_extras)
    assert version.returncode == 0 and version.stdout.startswith("llm-do "), version.stderr


def test_the_library_runs_an_agent_and_projects_name_the_extra(tmp_path: Path, without_extras: dict[str, str]) -> None:
    (tmp_path / "notes.txt").write_text("buy ink\n")
    script = textwrap.dedent(
        """
        import asyncio
        import sys

        from pydantic_ai import Agent

        from containers import BuiltinToolsets
        from llm_do import AgentEntry, Runtime
        from llm_do.testing import ScriptedModel, tool_call

        reader = AgentEntry(
            Agent(ScriptedModel(tool_call("read_text", path="notes.txt"), "It says to buy ink.")),
            name="reader",
            toolsets=["filesystem_readonly"],
        )


        async def main() -> None:
            async with Runtime(BuiltinToolsets(), entries=[reader]) as runtime:
                result = await runtime.run("reader", "What do my notes say?")
            print(result.output, [message for message in result.messages if "buy ink" in str(message)] != [])


        asyncio.run(main())
        print(sorted({"rich", "yaml"} & {name.partition(".")[0] for name in sys.modules}))
        try:
            import llm_do.project
        except ModuleNotFoundError as error:
            print(error.name, error)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=without_extras, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "It says to buy ink. True",
        "[]",
        f"yaml llm_do.project (.worker files are YAML) {MISSING.format(module='yaml')}",
    ]


def test_migrate_names_the_extra_when_libcst_alone_is_missing(tmp_path: Path, without_extras: dict[str, str]) -> None:
    project = tmp_path / "calculator"
    shutil.copytree(ROOT / "tests" / "project" / "earlier_projects" / "calculator", project)
    command = Path(sys.executable).with_name("llm-do")
    environment = {**without_extras, "NOT_INSTALLED": "libcst"}
    done = subprocess.run([command, "migrate", str(project)], capture_output=True, text=True, env=environment)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr.splitlines() == [
        "llm-do: error: ModuleNotFoundError: llm-do migrate (it rewrites Python with LibCST) "
        + MISSING.format(module="libcst")
    ]
