"""A project root with a sentinel directory beside it, and ways to call the filesystem tools.

`Sentinel` snapshots everything under the test's base directory except the root: paths, kinds,
contents, link targets and modification times. It also sets every access time to zero, so a later
read or listing of anything outside the root shows as a changed access time (on file systems that
record access times; `ATIME_RECORDED` says whether this one does).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from pydantic_ai.exceptions import ToolFailed

from containers import BuiltinToolsets
from llm_do import CallScope, Runtime, RuntimeConfig, entry

SECRET = "TOPSECRET"
HOME_SECRET = "HOMESECRET"
Entry = tuple[str, int, int, int, str]


def _atime_recorded() -> bool:
    with tempfile.TemporaryDirectory() as probe:
        path = Path(probe, "probe")
        path.write_text("x")
        os.utime(path, ns=(0, path.stat().st_mtime_ns))
        path.read_text()
        return path.stat().st_atime_ns != 0


ATIME_RECORDED = _atime_recorded()


class Sentinel:
    """Everything under `base` except `base/<root>`: snapshots and reads since the last snapshot."""

    def __init__(self, base: Path, root: str = "project") -> None:
        self.base = base
        self.root = root
        self.paths: list[str] = []

    def read_since(self) -> list[str]:
        """Entries whose access time changed since the last snapshot (call it before `snapshot`)."""
        if not ATIME_RECORDED:
            return []
        changed = []
        for rel in self.paths:
            try:
                if os.lstat(self.base / rel).st_atime_ns != 0:
                    changed.append(rel)
            except FileNotFoundError:
                changed.append(rel)
        return changed

    def snapshot(self) -> dict[str, Entry]:
        """Paths (with the base itself as '.'), kinds, modes, sizes, mtimes and contents; resets access times."""
        tree: dict[str, Entry] = {".": _entry(self.base)}
        for dirpath, dirnames, filenames in os.walk(self.base):
            here = Path(dirpath)
            if here == self.base:
                dirnames[:] = [name for name in dirnames if name != self.root]
            for name in dirnames + filenames:
                path = here / name
                tree[str(path.relative_to(self.base))] = _entry(path)
        self.paths = [rel for rel in tree if rel != "."]
        for rel in self.paths:
            path = self.base / rel
            os.utime(path, ns=(0, os.lstat(path).st_mtime_ns), follow_symlinks=False)
        return tree


def _entry(path: Path) -> Entry:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        content = "-> " + os.readlink(path)
    elif stat.S_ISREG(info.st_mode):
        content = path.read_bytes().decode("utf-8", "replace")
    else:
        content = ""
    return (stat.filemode(info.st_mode), info.st_size, info.st_mtime_ns, info.st_nlink, content)


def tree_of(root: Path) -> dict[str, Entry]:
    """Every entry under `root` (not following symlinks), for checking that a refusal changed nothing inside."""
    tree: dict[str, Entry] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            tree[str(path.relative_to(root))] = _entry(path)
    return tree


def build_layout(base: Path) -> tuple[Path, Path]:
    """A project root and a sentinel beside it, with symlinks from the one into the other.

    Returns (root, outside). `base/home` is meant for HOME.
    """
    root, outside, home = base / "project", base / "outside", base / "home"
    for directory in (outside / "sub", home):
        directory.mkdir(parents=True)
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    (outside / "sub" / "deeper.txt").write_text(f"{SECRET} deeper\n")
    (home / "secret.txt").write_text(f"{HOME_SECRET}\n")
    populate_root(root, outside)
    return root, outside


def populate_root(root: Path, outside: Path) -> None:
    """The root's files and directories, and symlinks from it into `outside` (which need not exist yet)."""
    for directory in (root / "inner", root / "work"):
        directory.mkdir(parents=True)
    (root / "notes.txt").write_text("inside notes\n")
    (root / "inner" / "a.txt").write_text("inner a\n")
    (root / "work" / "secret.txt").write_text("not the secret\n")
    links = {
        "link_out": "../outside",
        "link_secret": "../outside/secret.txt",
        "link_abs": str(outside / "secret.txt"),
        "dangling_out": "../outside/created-through-link.txt",
        "inner/up": "../../outside",
        "chain": "chain2",
        "chain2": "link_secret",
        "inside_link": "notes.txt",
        "dev_zero": "/dev/zero",
    }
    for name, target in links.items():
        os.symlink(target, root / name)


async def call_tools(
    root: Path,
    *steps: tuple[str, dict[str, Any]],
    toolset: str = "filesystem",
    approval_mode: str = "approve_all",
    container: BuiltinToolsets | None = None,
) -> list[Any]:
    """Call the tools in order from an `@entry` function; a `ToolFailed` is returned in the list."""

    @entry(name="direct", toolsets=[toolset])
    async def direct(scope: CallScope, input_data: str) -> list[Any]:
        results: list[Any] = []
        for tool, args in steps:
            try:
                results.append(await scope.call_tool(tool, args))
            except ToolFailed as error:
                results.append(error)
        return results

    app = container or BuiltinToolsets()
    app.config.project_root.from_value(str(root))
    config = RuntimeConfig.from_container(app, approval_mode=approval_mode)
    async with Runtime(app, entries=[direct], config=config) as runtime:
        output: list[Any] = (await runtime.run("direct", "go")).output
    return output
