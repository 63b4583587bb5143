"""The filesystem toolset's confinement holds: every path that could leave the root is refused,
and nothing outside it is read, created or changed (checked against a sentinel directory beside
the root: paths, contents, mtimes and access times, snapshotted before and after each case).
Every call runs with approval_mode=approve_all, so only the confinement stands in the way."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import providers
from pydantic_ai import Agent
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import ModelRequest, ToolReturnPart

from containers import BuiltinToolsets
from llm_do import AgentEntry, Runtime, RuntimeConfig, Toolset, tool
from llm_do.testing import ScriptedModel, tool_call
from llm_do.toolsets import ALLOWED_PATHS, FilesystemToolset, PathRefused

from ..filesystem_fixtures import ATIME_RECORDED, HOME_SECRET, SECRET, Sentinel, build_layout, call_tools, tree_of

OUT = "{outside}"  # replaced by the sentinel's absolute path

# (tool, arguments): each must be refused without touching anything outside the root.
ATTACKS: dict[str, tuple[str, dict[str, Any]]] = {
    "dotdot": ("read_text", {"path": "../outside/secret.txt"}),
    "dotdot_after_a_dir": ("read_text", {"path": "inner/../../outside/secret.txt"}),
    "dot_then_dotdot": ("read_text", {"path": "./../outside/secret.txt"}),
    "dotdot_alone": ("list_dir", {"path": ".."}),
    "absolute": ("read_text", {"path": f"{OUT}/secret.txt"}),
    "absolute_system_file": ("read_text", {"path": "/etc/passwd"}),
    "the_filesystem_root": ("list_dir", {"path": "/"}),
    "double_slash": ("read_text", {"path": f"/{OUT}/secret.txt"}),
    "tilde": ("read_text", {"path": "~/secret.txt"}),
    "tilde_alone": ("list_dir", {"path": "~"}),
    "tilde_user": ("read_text", {"path": "~root/.bashrc"}),
    "percent_dots": ("read_text", {"path": "%2e%2e/outside/secret.txt"}),
    "percent_upper_with_slashes": ("read_text", {"path": "%2E%2E%2Foutside%2Fsecret.txt"}),
    "percent_twice": ("read_text", {"path": "%252e%252e/outside/secret.txt"}),
    "percent_slash_only": ("read_text", {"path": "..%2foutside%2fsecret.txt"}),
    "percent_absolute": ("read_text", {"path": f"%2f{OUT}/secret.txt"}),
    "percent_nul": ("read_text", {"path": "notes.txt%00.png"}),
    "percent_too_deep": ("read_text", {"path": "%25252525252e%25252525252e/outside/secret.txt"}),
    "backslashes": ("read_text", {"path": "..\\outside\\secret.txt"}),
    "backslashes_inside": ("read_text", {"path": "inner\\..\\..\\outside\\secret.txt"}),
    "drive_backslash": ("read_text", {"path": "C:\\outside\\secret.txt"}),
    "drive_slash": ("read_text", {"path": "C:/outside/secret.txt"}),
    "unc_share": ("read_text", {"path": "\\\\server\\share\\secret.txt"}),
    "nul_byte": ("read_text", {"path": "notes.txt\x00../../outside/secret.txt"}),
    "very_long_path": ("read_text", {"path": "a/" * 600 + "x"}),
    "very_long_name": ("write_text", {"path": "x" * 300, "text": "long"}),
    "symlink_to_secret": ("read_text", {"path": "link_secret"}),
    "symlink_dir_outside": ("read_text", {"path": "link_out/secret.txt"}),
    "symlink_absolute": ("read_text", {"path": "link_abs"}),
    "symlink_in_a_subdir": ("read_text", {"path": "inner/up/secret.txt"}),
    "symlink_chain": ("read_text", {"path": "chain"}),
    "symlink_to_a_device": ("read_text", {"path": "dev_zero"}),
    "symlink_staying_inside": ("read_text", {"path": "inside_link"}),  # refused too: no symlink is followed
    "list_symlinked_dir": ("list_dir", {"path": "link_out"}),
    "list_absolute": ("list_dir", {"path": OUT}),
    "list_nested_symlink": ("list_dir", {"path": "inner/up/sub"}),
    "glob_pattern_dotdot": ("glob", {"pattern": "../outside/*"}),
    "glob_pattern_absolute": ("glob", {"pattern": f"{OUT}/*"}),
    "glob_in_symlinked_dir": ("glob", {"pattern": "*", "path": "link_out"}),
    "glob_from_dotdot": ("glob", {"pattern": "**", "path": "../outside"}),
    "write_dotdot_new": ("write_text", {"path": "../outside/new.txt", "text": "pwned"}),
    "write_dotdot_existing": ("write_text", {"path": "../outside/secret.txt", "text": "pwned"}),
    "write_absolute": ("write_text", {"path": f"{OUT}/secret.txt", "text": "pwned"}),
    "write_through_file_symlink": ("write_text", {"path": "link_secret", "text": "pwned"}),
    "write_into_symlinked_dir": ("write_text", {"path": "link_out/new.txt", "text": "pwned"}),
    "write_through_dangling_symlink": ("write_text", {"path": "dangling_out", "text": "pwned"}),
    "write_through_nested_symlink": ("write_text", {"path": "inner/up/new.txt", "text": "pwned"}),
    "write_percent": ("write_text", {"path": "%2e%2e/outside/new.txt", "text": "pwned"}),
    "write_home": ("write_text", {"path": "~/new.txt", "text": "pwned"}),
    "write_backslashes": ("write_text", {"path": "..\\outside\\new.txt", "text": "pwned"}),
    "edit_through_symlink": ("edit", {"path": "link_secret", "old": SECRET, "new": "pwned"}),
    "edit_dotdot": ("edit", {"path": "../outside/secret.txt", "old": SECRET, "new": "pwned"}),
    "edit_in_symlinked_dir": ("edit", {"path": "link_out/secret.txt", "old": SECRET, "new": "pwned"}),
    "mkdir_dotdot": ("mkdir", {"path": "../outside/newdir"}),
    "mkdir_in_symlinked_dir": ("mkdir", {"path": "link_out/newdir"}),
    "mkdir_absolute": ("mkdir", {"path": f"{OUT}/newdir"}),
    "mkdir_through_nested_symlink": ("mkdir", {"path": "inner/up/newdir/deeper"}),
    "mkdir_over_dangling_symlink": ("mkdir", {"path": "dangling_out/newdir"}),
    "delete_dotdot": ("delete", {"path": "../outside/secret.txt"}),
    "delete_in_symlinked_dir": ("delete", {"path": "link_out/secret.txt"}),
    "delete_absolute": ("delete", {"path": f"{OUT}/secret.txt"}),
    "delete_through_nested_symlink": ("delete", {"path": "inner/up/sub/deeper.txt"}),
    "delete_outside_dir": ("delete", {"path": "link_out/sub"}),
}


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path, Sentinel]]:
    root, outside = build_layout(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(root)  # even relative to the working directory, '..' stays refused
    yield root, outside, Sentinel(tmp_path)


def resolve(args: dict[str, Any], outside: Path) -> dict[str, Any]:
    return {key: value.replace(OUT, str(outside)) if isinstance(value, str) else value for key, value in args.items()}


def assert_refused(result: Any, tool: str, path: str) -> None:
    assert isinstance(result, PathRefused), f"{tool}({path!r}) was not refused: {result!r}"
    message = str(result)
    shown = repr(path) if len(path) <= 1024 else repr(path[:60] + "...")
    assert message.startswith(f"{tool}: refused path {shown}: "), message
    assert message.endswith(ALLOWED_PATHS)
    assert SECRET not in message and HOME_SECRET not in message


@pytest.mark.parametrize("case", list(ATTACKS))
async def test_an_attack_is_refused_and_nothing_outside_changes(case: str, layout: tuple[Path, Path, Sentinel]) -> None:
    root, outside, sentinel = layout
    tool, args = ATTACKS[case]
    args = resolve(args, outside)
    before, inside = sentinel.snapshot(), tree_of(root)
    [result] = await call_tools(root, (tool, args))
    assert sentinel.read_since() == []
    assert sentinel.snapshot() == before
    assert tree_of(root) == inside  # a refusal changes nothing inside either
    assert_refused(result, tool, args.get("path", args.get("pattern", "")) if tool != "glob" else _glob_culprit(args))


def _glob_culprit(args: dict[str, Any]) -> str:
    pattern, path = args["pattern"], args.get("path", ".")
    return pattern if pattern.startswith("/") or ".." in pattern.split("/") else path


async def test_the_whole_corpus_through_an_agent_run_in_parallel(layout: tuple[Path, Path, Sentinel]) -> None:
    """A scripted model sends every attack in one response; each comes back to it as a refusal."""
    root, outside, sentinel = layout
    attacks = [(tool, resolve(args, outside)) for tool, args in ATTACKS.values()]
    model = ScriptedModel([tool_call(tool, **args) for tool, args in attacks], "done")
    agent = AgentEntry(Agent(model), name="intruder", toolsets=["filesystem"])
    app = BuiltinToolsets()
    app.config.project_root.from_value(str(root))
    before, inside = sentinel.snapshot(), tree_of(root)
    async with Runtime(app, entries=[agent], config=RuntimeConfig(approval_mode="approve_all")) as runtime:
        result = await runtime.run("intruder", "get out")
    assert sentinel.read_since() == []
    assert sentinel.snapshot() == before
    assert tree_of(root) == inside
    assert result.output == "done"
    request = model.turns[1].messages[-1]
    assert isinstance(request, ModelRequest)
    parts = [part for part in request.parts if isinstance(part, ToolReturnPart)]
    assert len(parts) == len(attacks) >= 40
    for part in parts:
        assert part.outcome == "failed"
        assert f"{part.tool_name}: refused path " in str(part.content)
        assert SECRET not in str(part.content)


class Saboteur(Toolset):
    """Stands for anything else that changes the tree during a run: swaps a directory for a symlink."""

    def __init__(self, root: str, outside: str) -> None:
        self.root, self.outside = Path(root), outside

    @tool
    def swap_for_link(self, name: str) -> str:
        """Replace a directory of the root by a symlink to the sentinel."""
        os.rename(self.root / name, self.root / f"{name}.moved")
        os.symlink(self.outside, self.root / name)
        return f"{name} now leads outside"


async def test_a_symlink_planted_between_calls_of_one_run_is_refused(layout: tuple[Path, Path, Sentinel]) -> None:
    root, outside, sentinel = layout

    class App(BuiltinToolsets):
        saboteur = providers.Factory(Saboteur, root=str(root), outside=str(outside))

    model = ScriptedModel(
        tool_call("write_text", path="work/before.txt", text="fine"),
        tool_call("swap_for_link", name="work"),
        [
            tool_call("read_text", path="work/secret.txt"),
            tool_call("write_text", path="work/after.txt", text="pwned"),
            tool_call("edit", path="work/secret.txt", old=SECRET, new="pwned"),
            tool_call("mkdir", path="work/newdir"),
            tool_call("delete", path="work/secret.txt"),
            tool_call("list_dir", path="work"),
            tool_call("glob", pattern="*", path="work"),
        ],
        lambda turn: "\n".join(str(content) for content in turn.returns),
    )
    agent = AgentEntry(Agent(model), name="editor", toolsets=["filesystem", "saboteur"])
    app = App()
    app.config.project_root.from_value(str(root))
    before = sentinel.snapshot()
    async with Runtime(app, entries=[agent], config=RuntimeConfig(approval_mode="approve_all")) as runtime:
        result = await runtime.run("editor", "edit")
    assert sentinel.read_since() == []
    assert sentinel.snapshot() == before
    assert (root / "work.moved" / "before.txt").read_text() == "fine"
    lines = result.output.splitlines()
    assert len(lines) == 7
    tools = ("read_text", "write_text", "edit", "mkdir", "delete", "list_dir", "glob")
    for line, name in zip(lines, tools, strict=True):
        assert line.startswith(f"{name}: refused path 'work"), line
        assert "'work' is a symbolic link" in line


async def test_a_directory_flipping_to_a_symlink_during_calls_never_leads_outside(
    layout: tuple[Path, Path, Sentinel],
) -> None:
    """A thread flips `flip` between a real directory and a symlink to the sentinel while tools run."""
    root, outside, sentinel = layout
    flip, hidden = root / "flip", root / "flip.real"
    flip.mkdir()
    (flip / "secret.txt").write_text("inside\n")
    before = sentinel.snapshot()
    stop = threading.Event()
    flips = [0]

    failures: list[BaseException] = []

    def flip_once() -> None:
        os.rename(flip, hidden)
        try:
            os.symlink(outside, flip)
        except FileExistsError:
            pass  # mkdir made `flip` again while it was missing
        else:
            os.unlink(flip)
            flips[0] += 1
        while True:
            try:
                os.rename(hidden, flip)
                return
            except OSError:
                shutil.rmtree(flip, ignore_errors=True)  # a `flip` made by mkdir meanwhile

    def flipper() -> None:
        try:
            while not stop.is_set():
                flip_once()
        except BaseException as error:
            failures.append(error)

    toolset = FilesystemToolset(root)
    calls = (
        (toolset.read_text, {"path": "flip/secret.txt"}),
        (toolset.write_text, {"path": "flip/new.txt", "text": "pwned"}),
        (toolset.edit, {"path": "flip/secret.txt", "old": SECRET, "new": "pwned"}),
        (toolset.mkdir, {"path": "flip/made/below"}),
        (toolset.list_dir, {"path": "flip"}),
        (toolset.glob, {"pattern": "**/*", "path": "flip"}),
        (toolset.delete, {"path": "flip/sub/deeper.txt"}),
    )
    racer = threading.Thread(target=flipper)
    racer.start()
    outcomes: list[object] = []
    try:
        for _ in range(150):
            outcomes += await asyncio.gather(*(method(**args) for method, args in calls), return_exceptions=True)
    finally:
        stop.set()
        racer.join()
    assert failures == []
    assert flips[0] > 0
    assert not [outcome for outcome in outcomes if SECRET in str(outcome)]
    assert not [outcome for outcome in outcomes if isinstance(outcome, str) and "deeper.txt" in outcome]
    assert {type(outcome) for outcome in outcomes} <= {str, ToolFailed, PathRefused}
    assert sentinel.read_since() == []
    assert sentinel.snapshot() == before


def test_the_sentinel_notices_reads_writes_and_new_files(tmp_path: Path) -> None:
    """The checks above can fail: the sentinel sees a read, a change in place, and a file created beside the root."""
    _, outside = build_layout(tmp_path)
    sentinel = Sentinel(tmp_path)
    before = sentinel.snapshot()
    (outside / "secret.txt").read_text()
    assert sentinel.read_since() == (["outside/secret.txt"] if ATIME_RECORDED else [])
    sentinel.snapshot()
    (tmp_path / "beside.txt").write_text("x")
    assert "beside.txt" in sentinel.snapshot()
    before = sentinel.snapshot()
    stat = (outside / "secret.txt").stat()
    (outside / "secret.txt").write_text(f"{SECRET}\n")  # same content, new mtime
    os.utime(outside / "secret.txt", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert sentinel.snapshot() != before
