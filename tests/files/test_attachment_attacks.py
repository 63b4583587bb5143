"""Attachments stay inside the root: every path that could leave it, and every file that is not a plain,
bounded, single-linked file, is refused with a readable error, and nothing outside the root is read
(checked against a sentinel directory beside the root: contents, mtimes and access times)."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, ToolReturnPart, UserPromptPart

from llm_do import AgentEntry, Attachment, AttachmentError, AttachmentSettings, Runtime, RuntimeConfig
from llm_do.testing import ScriptedModel, Turn, tool_call

from ..attachment_files import png
from ..filesystem_fixtures import HOME_SECRET, SECRET, Sentinel, build_layout

LIMIT = 4096
LIMITS = AttachmentSettings(max_file_bytes=LIMIT)
OUT = "{outside}"

# name -> (path, what the refusal says)
ATTACKS: dict[str, tuple[str, str]] = {
    "dotdot": ("../outside/secret.txt", "'..' (a parent directory) is not allowed"),
    "dotdot_after_a_dir": ("inner/../../outside/secret.txt", "'..' (a parent directory) is not allowed"),
    "absolute": (f"{OUT}/secret.txt", "absolute paths are not allowed"),
    "absolute_system_file": ("/etc/hostname", "absolute paths are not allowed"),
    "tilde": ("~/secret.txt", "'~' (a home directory) is not expanded"),
    "percent_dots": ("%2e%2e/outside/secret.txt", "'..' (a parent directory) is not allowed"),
    "backslashes": ("..\\outside\\secret.txt", "backslashes are not path separators here"),
    "nul_byte": ("notes.txt\x00../../outside/secret.txt", "control characters"),
    "symlink_out": ("link_secret", "is a symbolic link, and symbolic links are never followed"),
    "symlink_absolute": ("link_abs", "is a symbolic link"),
    "symlink_dir_out": ("link_out/secret.txt", "'link_out' is a symbolic link"),
    "symlink_in_a_subdir": ("inner/up/secret.txt", "'inner/up' is a symbolic link"),
    "symlink_chain": ("chain", "is a symbolic link"),
    "symlink_staying_inside": ("inside_link", "is a symbolic link"),  # refused too: no symlink is followed
    "symlink_to_dev_zero": ("dev_zero", "is a symbolic link"),
    "directory": ("inner", "'inner' is a directory"),
    "the_root": (".", "is the root directory, not a file"),
    "fifo": ("pipe", "'pipe' is not a regular file (a device, pipe or socket)"),
    "hard_link_to_outside": ("hard", "has 2 hard links"),
    "one_byte_over": ("over.png", f"'over.png' is {LIMIT + 1:,} bytes, more than the {LIMIT:,}-byte limit"),
    "sparse_gigabyte": ("sparse.png", "'sparse.png' is 1,073,741,824 bytes, more than the"),
    "newline_in_name": ("evil\nname.txt", "control characters, line breaks or bytes that are not UTF-8"),
    "not_utf8_name": (os.fsdecode(b"caf\xe9.txt"), "control characters, line breaks or bytes that are not UTF-8"),
    "line_separator": ("evil\u2028name.txt", "control characters, line breaks"),
    "missing": ("nothing-here.png", "'nothing-here.png' does not exist"),
    "empty_name": ("", "an attachment needs a file name"),
}


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path, Sentinel]]:
    root, outside = build_layout(tmp_path)
    os.link(outside / "secret.txt", root / "hard")
    os.mkfifo(root / "pipe")
    (root / "over.png").write_bytes(png()[:8] + b"\x00" * (LIMIT + 1 - 8))
    with open(root / "sparse.png", "wb") as sparse:
        sparse.write(png()[:8])
        sparse.truncate(1 << 30)  # a 1 GiB file that takes no room: refused by its size, never read
    (root / "evil\nname.txt").write_text(SECRET)
    (root / os.fsdecode(b"caf\xe9.txt")).write_text(SECRET)
    (root / "evil\u2028name.txt").write_text(SECRET)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(root)
    yield root, outside, Sentinel(tmp_path)


def path_of(case: str, outside: Path) -> str:
    return ATTACKS[case][0].replace(OUT, str(outside))


@pytest.mark.parametrize("case", list(ATTACKS))
def test_each_attack_is_refused_by_attachment_read(case: str, layout: tuple[Path, Path, Sentinel]) -> None:
    root, outside, sentinel = layout
    before = sentinel.snapshot()
    with pytest.raises(AttachmentError) as refused:
        Attachment.read(root, path_of(case, outside), settings=LIMITS)
    message = str(refused.value)
    assert ATTACKS[case][1] in message, message
    assert message.startswith("attach: ")
    assert "\n" not in message and SECRET not in message and HOME_SECRET not in message
    assert sentinel.read_since() == []
    assert sentinel.snapshot() == before


def test_a_device_file_is_refused(tmp_path: Path) -> None:
    """A root holding a device (here /dev itself, configuration being trusted): the file is opened, never read."""
    with pytest.raises(AttachmentError, match=r"'zero' is not a regular file \(a device, pipe or socket\)"):
        Attachment.read("/dev", "zero")


def test_a_hard_link_is_attached_when_allowed(layout: tuple[Path, Path, Sentinel]) -> None:
    root, _, _ = layout
    attachment = Attachment.read(root, "hard", settings=AttachmentSettings(allow_hard_links=True))
    assert attachment.data == f"{SECRET}\n".encode()  # the person who allowed it knows what it is


async def test_the_whole_corpus_passed_by_an_agent_comes_back_as_refusals(layout: tuple[Path, Path, Sentinel]) -> None:
    """A parent sends every attack to a child in one response; each comes back to it as a failure, the child
    never runs, and nothing outside the root is read."""
    root, outside, sentinel = layout
    cases = [case for case in ATTACKS if case not in ("empty_name", "not_utf8_name")]  # JSON cannot carry these
    calls = [tool_call("reader", input="read it", attachments=[path_of(case, outside)]) for case in cases]
    seen: list[Any] = []

    def child(turn: Turn) -> str:
        seen.append(turn.messages)
        return "read"

    parent_model = ScriptedModel(calls, "done")
    parent = AgentEntry(Agent(parent_model), name="intruder", toolsets=["reader"])
    reader = AgentEntry(Agent(ScriptedModel(child)), name="reader")
    config = RuntimeConfig(project_root=root, approval_mode="approve_all", attachments=LIMITS)
    before = sentinel.snapshot()
    async with Runtime(None, entries=[parent, reader], config=config) as runtime:
        result = await runtime.run("intruder", "get out")
    assert sentinel.read_since() == []
    assert sentinel.snapshot() == before
    assert result.output == "done"
    assert seen == []
    request = parent_model.turns[1].messages[-1]
    assert isinstance(request, ModelRequest)
    parts = [part for part in request.parts if isinstance(part, ToolReturnPart)]
    assert len(parts) == len(cases)
    for part, case in zip(parts, cases, strict=True):
        assert part.outcome == "failed", case
        assert ATTACKS[case][1] in str(part.content), (case, part.content)
        assert SECRET not in str(part.content)


async def test_a_directory_flipping_to_a_symlink_during_reads_never_leads_outside(
    layout: tuple[Path, Path, Sentinel],
) -> None:
    """A thread flips `flip` between a real directory and a symlink to the sentinel while attachments are read."""
    root, outside, sentinel = layout
    flip, hidden = root / "flip", root / "flip.real"
    flip.mkdir()
    (flip / "secret.txt").write_text("inside\n")
    before = sentinel.snapshot()
    stop = threading.Event()
    flips = [0]
    failures: list[BaseException] = []

    def flipper() -> None:
        try:
            while not stop.is_set():
                os.rename(flip, hidden)
                os.symlink(outside, flip)
                flips[0] += 1
                os.unlink(flip)
                os.rename(hidden, flip)
        except BaseException as error:
            failures.append(error)

    def read() -> object:
        try:
            return Attachment.read(root, "flip/secret.txt").data
        except AttachmentError as error:
            return error

    racer = threading.Thread(target=flipper)
    racer.start()
    try:
        outcomes = await asyncio.gather(*(asyncio.to_thread(read) for _ in range(600)))
    finally:
        stop.set()
        racer.join()
    assert failures == []
    assert flips[0] > 0
    assert {type(outcome) for outcome in outcomes} <= {bytes, AttachmentError}
    assert all(outcome == b"inside\n" for outcome in outcomes if isinstance(outcome, bytes))
    assert not [outcome for outcome in outcomes if SECRET in str(outcome)]
    assert sentinel.read_since() == []
    assert sentinel.snapshot() == before
    shutil.rmtree(flip, ignore_errors=True)


async def test_a_symlink_planted_between_a_parents_calls_is_refused(layout: tuple[Path, Path, Sentinel]) -> None:
    """The first call hands over work/secret.txt; then `work` becomes a symlink to the sentinel; the second
    call with the same name is refused: every call opens the path again from the root."""
    root, outside, sentinel = layout
    got: list[str] = []

    def child(turn: Turn) -> str:
        for message in turn.messages:
            for part in message.parts:
                if isinstance(part, UserPromptPart) and not isinstance(part.content, str):
                    got.extend(str(item) for item in part.content)
        return "read"

    def swap(turn: Turn) -> Any:
        os.rename(root / "work", root / "work.moved")
        os.symlink(outside, root / "work")
        return tool_call("reader", input="again", attachments=["work/secret.txt"])

    parent_model = ScriptedModel(
        tool_call("reader", input="read", attachments=["work/secret.txt"]),
        swap,
        lambda turn: str(turn.returns[0]),
    )
    parent = AgentEntry(Agent(parent_model), name="parent", toolsets=["reader"])
    reader = AgentEntry(Agent(ScriptedModel(child)), name="reader")
    config = RuntimeConfig(project_root=root, approval_mode="approve_all")
    before = sentinel.snapshot()
    async with Runtime(None, entries=[parent, reader], config=config) as runtime:
        result = await runtime.run("parent", "go")
    assert result.output.startswith("attach: refused path 'work/secret.txt': 'work' is a symbolic link")
    assert any("not the secret" in item for item in got)
    assert not any(SECRET in item for item in got)
    assert sentinel.read_since() == []
    assert sentinel.snapshot() == before
