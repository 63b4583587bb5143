"""The built-in `filesystem` and `filesystem_readonly` toolsets: each tool's behaviour, limits,
configuration from settings, and the default approval policy (reads run, writes and deletes ask)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import providers
from pydantic import ValidationError
from pydantic_ai import Agent
from pydantic_ai.exceptions import ToolFailed

from containers import BuiltinToolsets
from llm_do import (
    AgentEntry,
    ApprovalUnavailable,
    ConfigurationError,
    Runtime,
    RuntimeConfig,
    ToolPolicy,
    ToolsetError,
)
from llm_do.testing import ScriptedModel, tool_call
from llm_do.toolsets import FilesystemToolset, PathRefused, ReadOnlyFilesystemToolset

from ..filesystem_fixtures import call_tools

READ_TOOLS = {"read_text", "list_dir", "glob"}
WRITE_TOOLS = {"write_text", "edit", "mkdir", "delete"}
WHOLE_LINE_TOO_LONG = "line 1 alone is longer than the limit, so the rest of it cannot be read"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "empty").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "src" / "pkg" / "data.txt").write_text("data\n")
    (root / "docs" / "intro.md").write_text("one\ntwo\nthree\nfour\nfive\n")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "inner.py").write_text("hidden\n")
    return root


def failed(result: Any, *fragments: str) -> str:
    assert isinstance(result, ToolFailed), f"expected a tool failure, got {result!r}"
    message = str(result)
    for fragment in fragments:
        assert fragment in message, message
    return message


# read_text


async def test_read_text_returns_the_file_exactly(root: Path) -> None:
    (root / "crlf.txt").write_bytes("é\r\nnot trimmed  \r\n".encode())
    whole, crlf = await call_tools(root, ("read_text", {"path": "docs/intro.md"}), ("read_text", {"path": "crlf.txt"}))
    assert whole == "one\ntwo\nthree\nfour\nfive\n"
    assert crlf == "é\r\nnot trimmed  \r\n"


async def test_read_text_offset_and_limit_select_lines_and_say_how_to_read_on(root: Path) -> None:
    middle, tail, past, at_end = await call_tools(
        root,
        ("read_text", {"path": "docs/intro.md", "offset": 1, "limit": 2}),
        ("read_text", {"path": "docs/intro.md", "offset": 3}),
        ("read_text", {"path": "docs/intro.md", "offset": 9}),
        ("read_text", {"path": "docs/intro.md", "offset": 5}),
    )
    assert middle == "two\nthree\n[lines 2-3 shown; more follow: read on with offset=3]"
    assert tail == "four\nfive\n"
    assert past == "['docs/intro.md' has 5 lines, so there is nothing at offset=9]"
    assert at_end == "['docs/intro.md' has 5 lines, so there is nothing at offset=5]"


async def test_read_text_stops_at_the_byte_limit_with_a_note_the_model_can_follow(root: Path) -> None:
    (root / "big.txt").write_text("".join(f"line {n:04}\n" for n in range(1000)))  # 10 bytes a line
    (root / "wide.txt").write_text("é" * 40)  # 80 bytes, one line: the cut falls inside a character
    app = BuiltinToolsets()
    app.config.filesystem.max_read_bytes.from_value(25)
    first, onwards, wide = await call_tools(
        root,
        ("read_text", {"path": "big.txt"}),
        ("read_text", {"path": "big.txt", "offset": 2}),
        ("read_text", {"path": "wide.txt"}),
        container=app,
    )
    assert first == (
        "line 0000\nline 0001\nline \n[truncated at the 25-byte read limit (10000 bytes in all); read on with offset=2]"
    )
    assert onwards.startswith("line 0002\nline 0003\n")
    assert wide == "é" * 12 + f"\n[truncated at the 25-byte read limit (80 bytes in all); {WHOLE_LINE_TOO_LONG}]"


async def test_read_text_says_what_is_wrong(root: Path) -> None:
    (root / "blob.bin").write_bytes(b"\xff\xfe\x00binary")
    (root / "empty.txt").write_text("")
    os.mkfifo(root / "pipe")
    missing, directory, binary, fifo, empty = await call_tools(
        root,
        ("read_text", {"path": "src/nope.py"}),
        ("read_text", {"path": "src"}),
        ("read_text", {"path": "blob.bin"}),
        ("read_text", {"path": "pipe"}),  # opened without blocking, then refused
        ("read_text", {"path": "empty.txt"}),
    )
    failed(missing, "read_text: 'src/nope.py' does not exist; list_dir or glob show what does")
    failed(directory, "read_text: 'src' is a directory; list_dir shows what is in it")
    failed(binary, "read_text: 'blob.bin' is not UTF-8 text")
    failed(fifo, "read_text: 'pipe' is not a regular file")
    assert empty == "['empty.txt' is empty]"
    with pytest.raises(ValidationError, match="offset\n  Input should be greater than or equal to 0"):
        await call_tools(root, ("read_text", {"path": "docs/intro.md", "offset": -1}))


# list_dir


async def test_list_dir_lists_sorted_entries_with_kinds_and_sizes(root: Path) -> None:
    os.symlink("src/app.py", root / "shortcut")
    listing, nested, empty = await call_tools(
        root, ("list_dir", {}), ("list_dir", {"path": "src/pkg"}), ("list_dir", {"path": "empty"})
    )
    assert listing.splitlines() == [
        "the root: 5 entries",
        ".hidden/",
        "docs/",
        "empty/",
        "shortcut  (symbolic link, not followed)",
        "src/",
    ]
    assert nested == "src/pkg: 2 entries\ndata.txt  (5 bytes)\nmod.py  (6 bytes)"
    assert empty == "empty is empty"


async def test_names_that_are_not_utf8_are_shown_escaped(root: Path) -> None:
    """Found by fuzzing: such a name would reach the model as a lone surrogate, which no provider can send."""
    (root / "empty").joinpath(os.fsdecode(b"caf\xe9.txt")).write_text("latin-1 name")
    listing, found, read = await call_tools(
        root,
        ("list_dir", {"path": "empty"}),
        ("glob", {"pattern": "*.txt", "path": "empty"}),
        ("read_text", {"path": "empty/caf\udce9.txt"}),  # the name as Python decodes it still opens it
    )
    assert listing == "empty: 1 entries\ncaf\\xe9.txt  (12 bytes)"
    assert found == "empty/caf\\xe9.txt"
    assert read == "latin-1 name"


async def test_list_dir_shows_at_most_max_entries(root: Path) -> None:
    for n in range(12):
        (root / "empty" / f"f{n:02}").write_text("")
    listing = FilesystemToolset(root, max_entries=3)
    assert await listing.list_dir("empty") == (
        "empty: 12 entries\nf00  (0 bytes)\nf01  (0 bytes)\nf02  (0 bytes)\n"
        "[9 more entries not shown (limit 3); glob narrows it down]"
    )
    with pytest.raises(ToolFailed, match=r"list_dir: 'src/app\.py' is not a directory"):
        await listing.list_dir("src/app.py")


# glob


async def test_glob_matches_paths_below_a_directory(root: Path) -> None:
    os.symlink("src", root / "src_link")
    py, top, under, hidden, nothing = await call_tools(
        root,
        ("glob", {"pattern": "**/*.py"}),
        ("glob", {"pattern": "*"}),
        ("glob", {"pattern": "*.txt", "path": "src/pkg"}),
        ("glob", {"pattern": ".hidden/*.py"}),
        ("glob", {"pattern": "**/*.rs"}),
    )
    assert py.splitlines() == ["src/app.py", "src/pkg/mod.py"]  # not .hidden/, not through src_link
    assert top.splitlines() == ["docs/", "empty/", "src/", "src_link  (symbolic link, not followed)"]
    assert under == "src/pkg/data.txt"
    assert hidden == ".hidden/inner.py"
    assert nothing == "no matches for '**/*.rs' under '.'"


async def test_glob_limits_results_and_the_entries_it_looks_at(root: Path) -> None:
    for n in range(30):
        (root / "empty" / f"f{n:02}.txt").write_text("")
    few = FilesystemToolset(root, max_entries=2)
    assert await few.glob("*.txt", "empty") == "empty/f00.txt\nempty/f01.txt\n[28 more matches not shown (limit 2)]"
    short_sighted = FilesystemToolset(root, max_scanned=5)
    found = await short_sighted.glob("**/*.txt")
    assert found.endswith("[stopped after looking at 5 entries; give a narrower path or pattern]")
    with pytest.raises(ToolFailed, match=r"glob: the pattern '\.' matches nothing"):
        await few.glob(".")


async def test_glob_matches_in_a_tree_as_deep_as_a_path_may_name(root: Path) -> None:
    """A path may have 512 names (1024 characters), so one `mkdir` makes a tree that deep: `**` matches down it
    without running out of stack (a recursive match did, and the exception ended the run)."""
    deep = "/".join(["d"] * 512)
    bottom = "d/" * 507 + "bottom.txt"  # 1024 characters
    made, created, found, listed = await call_tools(
        root,
        ("mkdir", {"path": deep}),
        ("write_text", {"path": bottom, "text": "x"}),
        ("glob", {"pattern": "**/*.txt", "path": "d"}),
        ("glob", {"pattern": "**/d/d/d"}),
    )
    assert made.startswith("created 'd', 'd/d', ") and created.startswith("created ")
    assert found == bottom
    assert listed.splitlines()[0] == "d/d/d/" and len(listed.splitlines()) == 500 + 1
    assert listed.splitlines()[-1] == "[10 more matches not shown (limit 500)]"


# write_text, edit, mkdir, delete


async def test_write_text_creates_and_replaces_files(root: Path) -> None:
    created, replaced, no_parent, on_dir = await call_tools(
        root,
        ("write_text", {"path": "docs/new.md", "text": "fresh\n"}),
        ("write_text", {"path": "docs/intro.md", "text": "short"}),
        ("write_text", {"path": "docs/drafts/a.md", "text": "x"}),
        ("write_text", {"path": "docs", "text": "x"}),
    )
    assert created == "created 'docs/new.md' (6 bytes)"
    assert replaced == "replaced 'docs/intro.md' (5 bytes)"
    assert (root / "docs" / "new.md").read_text() == "fresh\n"
    assert (root / "docs" / "intro.md").read_text() == "short"  # the old, longer content is gone
    failed(no_parent, "write_text: 'docs/drafts' does not exist")
    failed(on_dir, "write_text: 'docs' is a directory")
    assert not (root / "docs" / "drafts").exists()


async def test_write_text_refuses_more_than_max_write_bytes(root: Path) -> None:
    app = BuiltinToolsets()
    app.config.filesystem.max_write_bytes.from_value(4)
    [too_big, fits] = await call_tools(
        root,
        ("write_text", {"path": "big.txt", "text": "12345"}),
        ("write_text", {"path": "ok.txt", "text": "1234"}),
        container=app,
    )
    failed(too_big, "write_text: 5 bytes for 'big.txt' is more than the 4-byte write limit")
    assert not (root / "big.txt").exists()
    assert fits == "created 'ok.txt' (4 bytes)"


async def test_edit_replaces_exactly_one_occurrence(root: Path) -> None:
    (root / "twice.txt").write_text("a = 1\nb = 2\na = 1\n")
    (root / "overlap.txt").write_text("aaa")
    done, missing, twice, overlapping, empty_old = await call_tools(
        root,
        ("edit", {"path": "docs/intro.md", "old": "two\nthree", "new": "2\n3"}),
        ("edit", {"path": "docs/intro.md", "old": "six", "new": "6"}),
        ("edit", {"path": "twice.txt", "old": "a = 1", "new": "a = 3"}),
        ("edit", {"path": "overlap.txt", "old": "aa", "new": "b"}),
        ("edit", {"path": "docs/intro.md", "old": "", "new": "x"}),
    )
    assert done == "edited 'docs/intro.md': replaced 1 occurrence at line 2"
    assert (root / "docs" / "intro.md").read_text() == "one\n2\n3\nfour\nfive\n"
    failed(missing, "edit: the old text was not found in 'docs/intro.md'", "read_text shows the exact text")
    failed(twice, "edit: the old text occurs 2 times in 'twice.txt' (at lines 1, 3)", "include more")
    failed(overlapping, "occurs 2 times in 'overlap.txt'")
    failed(empty_old, "edit: `old` is empty")
    assert (root / "twice.txt").read_text() == "a = 1\nb = 2\na = 1\n"
    assert (root / "overlap.txt").read_text() == "aaa"


async def test_edit_stops_counting_an_ambiguous_old_text_after_ten(root: Path) -> None:
    """Counting every overlapping occurrence costs the file's size times the old text's (a 500 kB `old` in a 1 MB
    file of one letter: minutes, in a thread no cancellation stops); ten are enough to say it is ambiguous."""
    (root / "many.txt").write_text("x\n" * 12)
    (many,) = await call_tools(root, ("edit", {"path": "many.txt", "old": "x", "new": "y"}))
    failed(many, "edit: the old text occurs more than 10 times in 'many.txt' (first at lines 1, 2, 3, 4, 5, 6, 7, 8, ")
    assert "9, 10); include more" in str(many) and (root / "many.txt").read_text() == "x\n" * 12


async def test_edit_keeps_files_within_max_write_bytes(root: Path) -> None:
    small = FilesystemToolset(root, max_write_bytes=24)
    with pytest.raises(ToolFailed, match=r"edit: 'docs/intro.md' would grow past the 24-byte write limit"):
        await small.edit("docs/intro.md", "one", "one hundred")
    (root / "big.txt").write_text("x" * 30)
    with pytest.raises(ToolFailed, match=r"edit: 'big.txt' \(30 bytes\) is larger than the 24-byte limit"):
        await small.edit("big.txt", "x", "y")
    assert (root / "docs" / "intro.md").read_text() == "one\ntwo\nthree\nfour\nfive\n"


async def test_mkdir_makes_missing_parents(root: Path) -> None:
    made, again, on_file = await call_tools(
        root,
        ("mkdir", {"path": "a/b/c"}),
        ("mkdir", {"path": "a/b"}),
        ("mkdir", {"path": "src/app.py/x"}),
    )
    assert made == "created 'a', 'a/b', 'a/b/c'"
    assert (root / "a" / "b" / "c").is_dir()
    assert again == "'a/b' already exists"
    failed(on_file, "mkdir: 'src/app.py' is not a directory (in 'src/app.py/x')")


async def test_delete_removes_files_links_and_empty_directories_only(root: Path) -> None:
    outside = root.parent / "kept.txt"
    outside.write_text("kept")
    os.symlink(outside, root / "to_outside")
    file, link, empty, full, missing, whole = await call_tools(
        root,
        ("delete", {"path": "src/app.py"}),
        ("delete", {"path": "to_outside"}),
        ("delete", {"path": "empty"}),
        ("delete", {"path": "src"}),
        ("delete", {"path": "src/app.py"}),
        ("delete", {"path": "."}),
    )
    assert file == "deleted the file 'src/app.py'"
    assert link == "deleted the symbolic link 'to_outside'"
    assert outside.read_text() == "kept"  # the link went, never its target
    assert empty == "deleted the empty directory 'empty'"
    failed(full, "delete: the directory 'src' is not empty; delete what is in it first")
    failed(missing, "delete: 'src/app.py' does not exist")
    failed(whole, "delete: the root directory itself cannot be deleted")
    assert sorted(os.listdir(root)) == [".hidden", "docs", "src"]


# configuration


async def test_the_root_comes_from_llm_do_project_root(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DO_PROJECT_ROOT", str(root / "docs"))
    monkeypatch.setenv("LLM_DO_FILESYSTEM__MAX_ENTRIES", "1")
    app = BuiltinToolsets()
    toolset = app.filesystem()
    assert toolset.root.path == root / "docs"
    assert toolset.max_entries == 1
    assert await toolset.list_dir() == "the root: 1 entries\nintro.md  (24 bytes)"


async def test_the_root_can_be_given_to_the_provider(root: Path) -> None:
    class App(BuiltinToolsets):
        filesystem = providers.Factory(FilesystemToolset, root=root / "src", max_read_bytes=4)

    read = await App().filesystem().read_text("app.py")
    assert read == f"prin\n[truncated at the 4-byte read limit (12 bytes in all); {WHOLE_LINE_TOO_LONG}]"


def test_a_bad_root_or_limit_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigurationError, match=r"filesystem root '.*nowhere' is not an existing directory; set LLM_DO_PROJECT_ROOT"
    ):
        FilesystemToolset(tmp_path / "nowhere")
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigurationError, match="is not an existing directory"):
        ReadOnlyFilesystemToolset(tmp_path / "file")
    with pytest.raises(ConfigurationError, match="filesystem root must be a directory path, got None"):
        FilesystemToolset(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_read_bytes must be a whole number > 0, got 0"):
        FilesystemToolset(tmp_path, max_read_bytes=0)


def test_the_readonly_toolset_offers_only_the_read_tools() -> None:
    assert ReadOnlyFilesystemToolset.tool_names() == READ_TOOLS
    assert FilesystemToolset.tool_names() == READ_TOOLS | WRITE_TOOLS


async def test_the_readonly_toolset_cannot_write(root: Path) -> None:
    [read] = await call_tools(root, ("read_text", {"path": "src/app.py"}), toolset="filesystem_readonly")
    assert read == "print('hi')\n"
    with pytest.raises(ToolsetError, match="entry 'direct' has no tool 'write_text'; its tools are: glob, list_dir"):
        await call_tools(root, ("write_text", {"path": "x", "text": "x"}), toolset="filesystem_readonly")
    assert not (root / "x").exists()


# approvals, through agent runs with a scripted model


def editor(model: ScriptedModel, toolset: str = "filesystem") -> AgentEntry:
    return AgentEntry(Agent(model), name="editor", toolsets=[toolset])


def script() -> ScriptedModel:
    return ScriptedModel(
        tool_call("read_text", path="docs/intro.md", limit=1),
        [tool_call("write_text", path="notes.md", text="hello"), tool_call("delete", path="src/app.py")],
        lambda turn: " | ".join(str(content) for content in turn.returns),
    )


async def run_editor(root: Path, mode: str, **runtime: Any) -> str:
    app = BuiltinToolsets()
    app.config.project_root.from_value(str(root))
    config = RuntimeConfig.from_container(app, approval_mode=mode)
    async with Runtime(app, entries=[editor(script())], config=config, **runtime) as running:
        output: str = (await running.run("editor", "take notes")).output
    return output


async def test_writes_and_deletes_ask_so_reject_all_leaves_the_files_alone(root: Path, llm_do_leaks: object) -> None:
    output = await run_editor(root, "reject_all")
    assert output == (
        "The call to 'write_text' was not run: it needs approval (toolset 'filesystem' policy: tool 'write_text' "
        "is 'ask') and approval_mode is 'reject_all'. Do not retry the same call. | "
        "The call to 'delete' was not run: it needs approval (toolset 'filesystem' policy: tool 'delete' "
        "is 'ask') and approval_mode is 'reject_all'. Do not retry the same call."
    )
    assert not (root / "notes.md").exists()
    assert (root / "src" / "app.py").exists()


async def test_with_approve_all_the_writes_happen(root: Path) -> None:
    output = await run_editor(root, "approve_all")
    assert output == "created 'notes.md' (5 bytes) | deleted the file 'src/app.py'"
    assert (root / "notes.md").read_text() == "hello"
    assert not (root / "src" / "app.py").exists()


async def test_reads_need_no_approval_and_writes_need_an_approver(root: Path) -> None:
    model = ScriptedModel(tool_call("read_text", path="docs/intro.md", limit=1), tool_call("mkdir", path="new"))
    app = BuiltinToolsets()
    app.config.project_root.from_value(str(root))
    async with Runtime(app, entries=[editor(model)], config=RuntimeConfig(approval_mode="prompt")) as runtime:
        with pytest.raises(ApprovalUnavailable, match="called tool 'mkdir' of toolset 'filesystem'"):
            await runtime.run("editor", "go")
    assert model.turns[1].returned("read_text") == "one\n[lines 1-1 shown; more follow: read on with offset=1]"
    assert not (root / "new").exists()


async def test_the_default_policy_can_be_loosened_by_settings_or_replaced_in_the_container(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLM_DO_APPROVAL_POLICIES__filesystem__tools__write_text", "allow")
    monkeypatch.setenv("LLM_DO_APPROVAL_POLICIES__filesystem__tools__delete", "allow")
    assert await run_editor(root, "prompt") == "created 'notes.md' (5 bytes) | deleted the file 'src/app.py'"
    monkeypatch.delenv("LLM_DO_APPROVAL_POLICIES__filesystem__tools__write_text")
    monkeypatch.delenv("LLM_DO_APPROVAL_POLICIES__filesystem__tools__delete")

    class Strict(BuiltinToolsets):
        approval_policies = providers.Dict(filesystem=ToolPolicy(default="deny", tools={"read_text": "allow"}))

    app = Strict()
    app.config.project_root.from_value(str(root))
    async with Runtime(app, entries=[editor(script())], config=RuntimeConfig(approval_mode="approve_all")) as runtime:
        output = (await runtime.run("editor", "go")).output
    assert output.count("was not run: denied by policy") == 2
    assert (root / "notes.md").read_text() == "hello"  # from the first run only


async def test_a_path_refusal_reaches_the_model_and_the_run_goes_on(root: Path) -> None:
    model = ScriptedModel(
        tool_call("read_text", path="../secret"), lambda turn: f"the tool said: {turn.returned('read_text')}"
    )
    app = BuiltinToolsets()
    app.config.project_root.from_value(str(root))
    async with Runtime(app, entries=[editor(model, "filesystem_readonly")]) as runtime:
        result = await runtime.run("editor", "peek")
    assert result.output.startswith(
        "the tool said: read_text: refused path '../secret': '..' (a parent directory) is not allowed."
    )
    assert issubclass(PathRefused, ToolFailed)
