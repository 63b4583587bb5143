"""Check the lowest-versions virtualenv (`make test-lowest`): each dependency is at the version
ci/constraints-lowest.txt names; the `cli` extra (PyYAML, rich, LibCST) is not installed; llm_do and its core import;
an agent with a built-in toolset runs; and the project loader and the `llm-do` command name the extra they need."""

from __future__ import annotations

import asyncio
import importlib
import subprocess
import sys
import tempfile
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from pathlib import Path

CONSTRAINTS = Path(__file__).with_name("constraints-lowest.txt")
CORE = ("llm_do", "llm_do.run", "llm_do.scopes", "llm_do.di", "llm_do.guards", "llm_do.toolkit", "containers")
CLI_EXTRA = {"pyyaml": "yaml", "rich": "rich", "libcst": "libcst"}
"""The `cli` extra's distributions and the modules they give."""
NAMES_THE_EXTRA = 'needs the cli extra, which is not installed (no module named {!r}): pip install "llm-do[cli]"'


def installed(distribution: str) -> bool:
    try:
        version(distribution)
    except PackageNotFoundError:
        return False
    return True


def run_an_agent(root: Path) -> str:
    """A scripted agent reads a file through the built-in `filesystem_readonly` toolset."""
    from pydantic_ai import Agent

    from containers import BuiltinToolsets
    from llm_do import AgentEntry, Runtime
    from llm_do.testing import ScriptedModel, tool_call

    (root / "notes.txt").write_text("buy ink\n")
    model = ScriptedModel(tool_call("read_text", path="notes.txt"), lambda turn: f"Read: {turn.returns[0]}")
    reader = AgentEntry(Agent(model), name="reader", toolsets=["filesystem_readonly"])
    app = BuiltinToolsets()
    app.config.project_root.from_value(root)

    async def run() -> str:
        async with Runtime(app, entries=[reader]) as runtime:
            return str((await runtime.run("reader", "What do my notes say?")).output)

    return asyncio.run(run())


def problems_without_the_extra(root: Path) -> list[str]:
    """What is wrong with how the library, the project loader and the command behave without the `cli` extra."""
    wrong = []
    output = run_an_agent(root)
    if "buy ink" not in output:
        wrong.append(f"the agent did not read its file through the filesystem toolset: {output!r}")
    loaded = sorted(set(CLI_EXTRA.values()) & {name.partition(".")[0] for name in sys.modules})
    if loaded:
        wrong.append(f"running an agent imported {', '.join(loaded)}")
    try:
        importlib.import_module("llm_do.project")
        wrong.append("import llm_do.project worked without PyYAML")
    except ModuleNotFoundError as error:
        if NAMES_THE_EXTRA.format("yaml") not in str(error):
            wrong.append(f"import llm_do.project does not name the extra: {error}")
    command = Path(sys.executable).with_name("llm-do")
    done = subprocess.run([command, "run", str(root), "hi"], capture_output=True, text=True, cwd=root)
    expected = f"llm-do: error: the llm-do command {NAMES_THE_EXTRA.format('rich')}"
    if done.returncode != 1 or done.stderr.splitlines() != [expected]:
        wrong.append(f"llm-do run exited {done.returncode} and printed:\n{done.stderr}")
    return wrong


def main() -> int:
    pins = [line.split("#")[0].strip() for line in CONSTRAINTS.read_text().splitlines()]
    wrong = []
    for pin in filter(None, pins):
        name, pinned = pin.split("==")
        if version(name) != pinned:
            wrong.append(f"{name} is {version(name)}, not {pinned}")
    wrong.extend(f"{name} is installed: the cli extra must not be" for name in CLI_EXTRA if installed(name))
    wrong.extend(f"{module} imports: the cli extra must not" for module in CLI_EXTRA.values() if find_spec(module))
    if wrong:
        print(f"{sys.prefix} is not at the lowest versions ({CONSTRAINTS.name}): " + "; ".join(wrong), file=sys.stderr)
        return 1
    for module in CORE:
        importlib.import_module(module)
    with tempfile.TemporaryDirectory(prefix="llm-do-lowest-") as folder:
        wrong = problems_without_the_extra(Path(folder))
    if wrong:
        print("without the cli extra:\n" + "\n".join(f"  {line}" for line in wrong), file=sys.stderr)
        return 1
    print("llm_do imports at the lowest versions declared:", ", ".join(filter(None, pins)))
    print("without the cli extra (PyYAML, rich, LibCST): an agent runs; llm_do.project and llm-do name the extra")
    return 0


if __name__ == "__main__":
    sys.exit(main())
