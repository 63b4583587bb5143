"""Hard links: a file with more than one link (another name for it may be outside the root) is read,
but `write_text`, `edit` and `delete` refuse it unless hard links are allowed (the setting
`LLM_DO_FILESYSTEM__ALLOW_HARD_LINKS` or the constructor argument `allow_hard_links`).

The links are made the way someone else would make them: `os.link` from outside the toolset,
into a real root with a sentinel directory beside it. Calls go through `Runtime.run`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import providers
from pydantic_ai import Agent
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import ToolReturnPart

from containers import BuiltinToolsets
from llm_do import AgentEntry, InvalidSettings, Runtime, RuntimeConfig
from llm_do.testing import ScriptedModel, tool_call
from llm_do.toolsets import FilesystemToolset, ToolsetSettings

from ..filesystem_fixtures import SECRET, Sentinel, build_layout, call_tools, tree_of

CHANGES: list[tuple[str, dict[str, Any]]] = [
    ("write_text", {"path": "hard", "text": "pwned\n"}),
    ("edit", {"path": "hard", "old": SECRET, "new": "pwned"}),
    ("delete", {"path": "hard"}),
]


@pytest.fixture
def layout(tmp_path: Path) -> Iterator[tuple[Path, Path, Sentinel]]:
    root, outside = build_layout(tmp_path)
    os.link(outside / "secret.txt", root / "hard")  # placed by someone else, before the run
    yield root, outside, Sentinel(tmp_path)


def assert_hard_link_refusal(result: Any, tool: str, path: str = "hard") -> None:
    assert isinstance(result, ToolFailed), f"{tool}({path!r}) was not refused: {result!r}"
    message = str(result)
    assert message.startswith(f"{tool}: refused {path!r}: the file has 2 hard links"), message
    assert "LLM_DO_FILESYSTEM__ALLOW_HARD_LINKS=true" in message
    assert SECRET not in message


@pytest.mark.parametrize(("tool", "args"), CHANGES, ids=[tool for tool, _ in CHANGES])
async def test_a_hard_link_to_a_file_outside_is_not_changed(
    tool: str, args: dict[str, Any], layout: tuple[Path, Path, Sentinel]
) -> None:
    root, outside, sentinel = layout
    before, inside = sentinel.snapshot(), tree_of(root)
    [result] = await call_tools(root, (tool, args))
    assert_hard_link_refusal(result, tool)
    assert sentinel.snapshot() == before
    assert tree_of(root) == inside
    assert (outside / "secret.txt").read_text() == f"{SECRET}\n"
    assert os.stat(outside / "secret.txt").st_nlink == 2


async def test_reading_a_hard_link_is_allowed(layout: tuple[Path, Path, Sentinel]) -> None:
    """A hard link is the file itself: reads see it, under whichever name (the documented trade-off)."""
    root, _, _ = layout
    read, listed = await call_tools(root, ("read_text", {"path": "hard"}), ("list_dir", {"path": "."}))
    assert read == f"{SECRET}\n"
    assert "hard  (10 bytes)" in listed.splitlines()


async def test_a_second_name_inside_the_root_counts_too(tmp_path: Path) -> None:
    root, _ = build_layout(tmp_path)
    os.link(root / "notes.txt", root / "inner" / "same-notes.txt")
    results = await call_tools(
        root,
        ("write_text", {"path": "notes.txt", "text": "changed\n"}),
        ("edit", {"path": "inner/same-notes.txt", "old": "inside", "new": "outside"}),
        ("delete", {"path": "notes.txt"}),
    )
    for result, (tool, path) in zip(
        results, [("write_text", "notes.txt"), ("edit", "inner/same-notes.txt"), ("delete", "notes.txt")], strict=True
    ):
        assert_hard_link_refusal(result, tool, path)
    assert (root / "notes.txt").read_text() == "inside notes\n"
    os.unlink(root / "inner" / "same-notes.txt")  # one name left: an ordinary file again
    [replaced] = await call_tools(root, ("write_text", {"path": "notes.txt", "text": "changed\n"}))
    assert replaced == "replaced 'notes.txt' (8 bytes)"


async def test_the_setting_allows_changing_a_hard_linked_file(
    layout: tuple[Path, Path, Sentinel], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, outside, _ = layout
    monkeypatch.setenv("LLM_DO_FILESYSTEM__ALLOW_HARD_LINKS", "true")
    written, edited = await call_tools(
        root, ("write_text", {"path": "hard", "text": "one\n"}), ("edit", {"path": "hard", "old": "one", "new": "two"})
    )
    assert (written, edited) == ("replaced 'hard' (4 bytes)", "edited 'hard': replaced 1 occurrence at line 1")
    assert (outside / "secret.txt").read_text() == "two\n", "allowed: the other name sees the change"
    [deleted] = await call_tools(root, ("delete", {"path": "hard"}))
    assert deleted == "deleted the file 'hard'"
    assert os.stat(outside / "secret.txt").st_nlink == 1


async def test_the_constructor_argument_allows_it_through_an_agent_run(layout: tuple[Path, Path, Sentinel]) -> None:
    root, outside, _ = layout
    model = ScriptedModel(
        [tool_call("edit", path="hard", old=SECRET, new="allowed")],
        lambda turn: "\n".join(str(content) for content in turn.returns),
    )
    agent = AgentEntry(Agent(model), name="editor", toolsets=["filesystem"])
    toolset = providers.Factory(FilesystemToolset, root, allow_hard_links=True)
    async with Runtime(
        None, entries=[agent], toolsets={"filesystem": toolset}, config=RuntimeConfig(approval_mode="approve_all")
    ) as runtime:
        result = await runtime.run("editor", "edit")
    assert result.output == "edited 'hard': replaced 1 occurrence at line 1"
    assert (outside / "secret.txt").read_text() == "allowed\n"


async def test_the_model_reads_the_refusal_and_the_run_goes_on(layout: tuple[Path, Path, Sentinel]) -> None:
    root, outside, _ = layout
    model = ScriptedModel(
        [tool_call("write_text", path="hard", text="pwned")],
        tool_call("write_text", path="copy.txt", text="a new file instead"),
        "done",
    )
    agent = AgentEntry(Agent(model), name="writer", toolsets=["filesystem"])
    app = BuiltinToolsets()
    app.config.project_root.from_value(str(root))
    async with Runtime(app, entries=[agent], config=RuntimeConfig(approval_mode="approve_all")) as runtime:
        result = await runtime.run("writer", "write")
    assert result.output == "done"
    parts = [part for turn in model.turns[1:] for part in turn.messages[-1].parts if isinstance(part, ToolReturnPart)]
    assert [part.outcome for part in parts] == ["failed", "success"]
    assert str(parts[0].content).startswith("write_text: refused 'hard': the file has 2 hard links")
    assert (outside / "secret.txt").read_text() == f"{SECRET}\n"
    assert (root / "copy.txt").read_text() == "a new file instead"


def test_the_setting_is_checked_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ToolsetSettings().filesystem.allow_hard_links is False
    assert ToolsetSettings(filesystem={"allow_hard_links": True}).filesystem.allow_hard_links is True
    with pytest.raises(InvalidSettings, match=r"filesystem\.allow_hard_links='sometimes': expected a valid boolean"):
        ToolsetSettings(filesystem={"allow_hard_links": "sometimes"})
    monkeypatch.setenv("LLM_DO_FILESYSTEM__ALLOW_HARD_LINKS", "sometimes")
    with pytest.raises(InvalidSettings, match="LLM_DO_FILESYSTEM__ALLOW_HARD_LINKS='sometimes'"):
        ToolsetSettings()
    with pytest.raises(ValueError, match="allow_hard_links must be True or False"):
        FilesystemToolset(".", allow_hard_links="yes")  # type: ignore[arg-type]
