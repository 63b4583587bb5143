"""Property-based fuzzing of the built-in toolsets (`filesystem`, `shell`, `sql` on SQLite and PostgreSQL)
and of attachments handed from agent to agent.

Hypothesis generates a script of tool calls: paths with `..`, absolute paths, NUL bytes, unicode
(lone surrogates too) and huge names; shell argv with metacharacters and programs that are not
allowed; SQL text (transaction control, ATTACH, several statements, odd placeholders, random
text) with params of every JSON type; forged handles, handles of another toolset instance, stale
ones of an earlier call and closed ones. A `FunctionModel` replays the script through
`Runtime.run`, one turn per model response (most scripts are one turn of 1 to 4 tool calls, which
pydantic-ai runs one after the other), so an example is one real agent run. For every example:

- the run ends normally and every call is answered with a success or a readable failure (a string
  the model reads, or pydantic-ai's validation retry), which can be written as JSON: no exception
  ever leaves `Runtime.run`;
- nothing beside the root (or beside the database) is created or changed: a sibling directory is
  snapshotted before and after;
- the database holds exactly what the script's successful commits wrote (SQLite: the committed
  statements are replayed on a reference copy and the two dumps compared; PostgreSQL: without a
  successful commit, nothing changes), and no connection or handle is left open;
- no process the shell started is left running, and no private HOME is left behind.

How many examples (per toolset; `sql` shares them half and half between SQLite and PostgreSQL):
`make test` runs 500, `make test-deep` 2,000 (tests/tiers.py), and LLM_DO_FUZZ_EXAMPLES=N runs N.
Each test checks that it made at least 2.5 calls per example, and that every tool both succeeded
and failed. Odd text (lone surrogates, NULs), edge integers bound by statements and globs that can
match are drawn often, so that 500 examples find every class of bug the fuzz has found: re-introduced
one at a time, a validation error holding a lone surrogate (the run failed with UnicodeEncodeError),
an integer beyond SQLite's 64 bits (OverflowError), and file names that are not UTF-8 (results that
could not be sent as JSON) each fail the 500-example run, as does a lone surrogate passed to a
program as a raw byte, which it found. A test keeps one `Runtime` for all its examples. Runs are
deterministic (`derandomize=True`, no example database), and `pytest -s` prints how many calls of
each tool succeeded and failed.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import re
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import hypothesis
import pydantic_core
import pytest
from dependency_injector import providers
from hypothesis import HealthCheck, given, settings, strategies as st
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextContent,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from llm_do import AgentEntry, AttachmentSettings, ModelLimits, RunResult, Runtime, RuntimeConfig, open_handles
from llm_do.toolsets import (
    CommandResult,
    FilesystemToolset,
    ShellRule,
    ShellToolset,
    SqlToolset,
    database_from_url,
)
from llm_do.toolsets.database import Database

from ..attachment_files import CSV, png
from ..filesystem_fixtures import SECRET, populate_root, tree_of
from ..postgres import PostgresServer
from ..tiers import sized
from .test_shell_toolset import marked_processes

pytestmark = [pytest.mark.long, pytest.mark.deep]

settings.register_profile(
    "llm-do-fuzz",
    max_examples=int(os.environ.get("LLM_DO_FUZZ_EXAMPLES") or sized(dev=500, deep=2000)),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
FUZZ = settings.get_profile("llm-do-fuzz")
FUZZ_EXAMPLES = FUZZ.max_examples  # per toolset; `sql` shares them between SQLite and PostgreSQL
SQL_EXAMPLES = {"sqlite": FUZZ_EXAMPLES - FUZZ_EXAMPLES // 2, "postgresql": FUZZ_EXAMPLES // 2}
# The scripts are no model going round in circles: the same call made again is what they explore, so the guard
# that ends such a run (`repeated_calls`, tested in tests/guards) is off here.
APPROVE = RuntimeConfig(approval_mode="approve_all", limits=ModelLimits(repeated_calls=0))
MAX_BATCH = 4  # calls in one model response


def enough_calls(examples: int) -> int:
    """The generated tool calls a test makes at least: 2.5 a script on average (5,000 for 2,000 scripts)."""
    return 5 * examples // 2


USAGE = RequestUsage(input_tokens=1, output_tokens=1)  # FunctionModel would estimate it from JSON the args may not make


# -- the replaying model and the checks every run passes ------------------------------------------


@dataclass(frozen=True)
class Ref:
    """The result of an earlier `begin` of the same script (`index` modulo how many there were: -1 is the latest)."""

    index: int


@dataclass(frozen=True)
class Big:
    """A long text, made when the call is sent (so that failing examples print short)."""

    head: str
    repeated: str
    times: int
    tail: str = ""

    def text(self) -> str:
        return self.head + self.repeated * self.times + self.tail


@dataclass(frozen=True)
class Foreign:
    """A handle open in another toolset instance (live) or minted by an earlier call (stale)."""

    live: bool


@dataclass(frozen=True)
class Call:
    tool: str
    args: Mapping[str, Any]


@dataclass
class Answer:
    """A call as it was sent, and what the model read back."""

    number: int
    tool: str
    args: dict[str, Any]
    ok: bool
    content: Any

    @property
    def ran(self) -> bool:
        """Whether the tool ran: a success, or a failure it raised (not a retry for bad arguments)."""
        return self.ok or isinstance(self.content, str)


Script = list[list[Call]]
"""A script: the model's turns, each one response of one or more tool calls (run one after the other)."""


@dataclass
class Harness:
    """One runtime for a whole test; each example replays its script through `Runtime.run`.

    The calls of a turn run one after the other (pydantic-ai's sequential mode), except that calls
    waiting for approval run after the others of their turn (pydantic-ai defers them, then runs the
    approved ones). Where the order matters (`in_order`), a turn is cut so that it holds no call
    that needs no approval after one that does, and no `Ref` to a `begin` of the same turn (a
    reference is resolved when its turn is sent): the calls then run as written, one after the other.
    """

    runner: asyncio.Runner
    resolve: Callable[[Any, list[Any]], Any]
    in_order: bool = False
    asking: frozenset[str] = frozenset()
    """The tools whose calls wait for approval, under the toolset's default policy."""
    turns: Script = field(default_factory=list)
    stats: collections.Counter[str] = field(default_factory=collections.Counter)
    runtime: Runtime | None = None

    def model(self) -> FunctionModel:
        async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            step = sum(isinstance(message, ModelResponse) for message in messages)
            if step >= len(self.turns):
                return ModelResponse(parts=[TextPart("done")], usage=USAGE)
            begun = [answer.content for answer in answers_in(messages) if answer.tool == "begin" and answer.ok]
            first = sum(len(turn) for turn in self.turns[:step])
            parts = [
                ToolCallPart(
                    call.tool,
                    {key: self.resolved(value, begun) for key, value in call.args.items()},
                    tool_call_id=f"fuzz-{number}",
                )
                for number, call in enumerate(self.turns[step], start=first)
            ]
            return ModelResponse(parts=parts, usage=USAGE)

        return FunctionModel(respond)

    def resolved(self, value: Any, begun: list[Any]) -> Any:
        if isinstance(value, Big):
            return value.text()
        if isinstance(value, list):
            return [self.resolved(item, begun) for item in value]
        return self.resolve(value, begun)

    def open(self, toolsets: Mapping[str, Any]) -> None:
        agent = AgentEntry(Agent(self.model(), retries=1000), name="fuzzer", toolsets=list(toolsets))
        self.runtime = Runtime(None, entries=[agent], toolsets=dict(toolsets), config=APPROVE)
        self.runner.run(self.runtime.__aenter__())

    def close(self) -> None:
        if self.runtime is not None:
            self.runner.run(self.runtime.aclose())

    def cut(self, script: Script) -> Script:
        if not self.in_order:
            return script
        turns: Script = []
        for turn in script:
            current: list[Call] = []
            for call in turn:
                if current and self.waits_for(call, current):
                    turns.append(current)
                    current = []
                current.append(call)
            turns.append(current)
        return turns

    def waits_for(self, call: Call, earlier: list[Call]) -> bool:
        refers = any(isinstance(value, Ref) for value in call.args.values())
        if refers and any(other.tool == "begin" for other in earlier):
            return True
        return call.tool not in self.asking and any(other.tool in self.asking for other in earlier)

    async def run(self) -> RunResult:
        assert self.runtime is not None
        with Agent.parallel_tool_call_execution_mode("sequential"):  # in the runner's context, which the run copies
            return await self.runtime.run("fuzzer", "go")

    def replay(self, script: Script) -> list[Answer]:
        """Run the script as one agent run; check that every call got a success or a readable failure.

        The calls of a turn run one after the other, in order (pydantic-ai's sequential mode), so the
        answers read like those of one call per turn, at a fraction of the model requests."""
        assert self.runtime is not None
        self.turns = self.cut(script)
        result = self.runner.run(self.run())  # any exception fails the example
        assert result.output == "done"
        answers = sorted(answers_in(result.messages), key=lambda answer: answer.number)  # retries come first
        calls = sum(len(turn) for turn in script)
        assert [answer.number for answer in answers] == list(range(calls)), "every call is answered, once"
        for answer in answers:
            self.stats[f"{answer.tool}:{'ok' if answer.ok else 'failed'}"] += 1
            if not answer.ok:
                assert_readable(answer)
            pydantic_core.to_json(answer.content)  # a provider can send it back as JSON (no lone surrogates)
        self.stats["examples"] += 1
        self.stats["calls"] += calls
        self.stats["turns"] += len(self.turns)
        return answers


def answers_in(messages: list[ModelMessage]) -> list[Answer]:
    sent: dict[str, ToolCallPart] = {}
    answers: list[Answer] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                sent[part.tool_call_id] = part
            elif isinstance(part, ToolReturnPart | RetryPromptPart) and isinstance(message, ModelRequest):
                call = sent.pop(part.tool_call_id)
                ok = isinstance(part, ToolReturnPart) and part.outcome == "success"
                number = int(call.tool_call_id.removeprefix("fuzz-"))
                answers.append(Answer(number, call.tool_name, call.args_as_dict(), ok, part.content))
    return answers


def assert_readable(answer: Answer) -> None:
    """A failure the model can read: a message naming what went wrong, or pydantic's list of argument errors."""
    content = answer.content
    if isinstance(content, list):  # a validation retry: which argument, and why
        assert content and all(isinstance(item, dict) and item.get("msg") for item in content), content
        return
    assert isinstance(content, str) and content.strip(), f"{answer.tool}({answer.args!r}) -> {content!r}"
    assert "Traceback" not in content and "Error(" not in content, content


@pytest.fixture
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as runner:
        yield runner


@pytest.fixture
def base(tmp_path: Path) -> Iterator[Path]:
    """A scratch directory, on tmpfs when the machine has one: the tests below rebuild trees thousands of times."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        with tempfile.TemporaryDirectory(dir=shm, prefix="llm-do-fuzz-") as place:
            yield Path(place).resolve()
    else:
        yield tmp_path.resolve()


def beside(base: Path, outside: Path) -> dict[str, Any]:
    """The names in `base` and everything under `outside` (kinds, sizes, mtimes, link counts, contents)."""
    return {"": sorted(os.listdir(base)), **tree_of(outside)}


# -- generated values shared by the toolsets --------------------------------------------------------

ODD_TEXT = st.sampled_from(["\ud800", "a\udcffb", "\udfff\ud800", "\x00", "a\x00b", "\u202e", "é", "\n", " "])
"""Text that broke tools before (lone surrogates, NULs): drawn often, so that a short run meets it too."""
ANY_TEXT = st.one_of(
    *[st.text(st.characters(codec=None, exclude_categories=()), max_size=30)] * 3,  # lone surrogates too, rarely
    ODD_TEXT,
)
JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30, -(10**40)]),  # at and beyond 64 bits
    st.floats(),  # nan, inf, -0.0
    ANY_TEXT,
    st.sampled_from(["", "'", "'; DROP TABLE ledger; --", "$1", "a\x00b", "Robert'); COMMIT; --", "é" * 100]),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner, max_size=3), max_leaves=6
)
NOT_A_STRING = st.one_of(
    st.none(), st.integers(), st.floats(), st.lists(st.text(max_size=3), max_size=2), st.booleans()
)


# -- filesystem ----------------------------------------------------------------------------------

FS_NAMES = [
    "notes.txt", "inner", "inner/a.txt", "work", "work/secret.txt", "hard", "pipe", "link_out", "link_secret",
    "link_abs", "dangling_out", "inner/up", "inner/up/secret.txt", "chain", "inside_link", "dev_zero", "new.txt",
    "inner/new.txt", "fresh/deeper/dir", "work/..", ".", "",
]  # fmt: skip
FS_ODD = [
    "..", "../outside/secret.txt", "inner/../../outside/secret.txt", "/etc/passwd", "/", "~", "~/x", "C:\\x", "C:/x",
    "..\\outside", "%2e%2e/outside/secret.txt", "%252e%252e/x", "..%2fx", "a%00b", "notes.txt\x00../x", "a/" * 600,
    "x" * 300, "é" * 200, "link_out/secret.txt", "link_out/new.txt", "inner/up/new.txt", "txn_deadbeef",
]  # fmt: skip
SEGMENTS = st.one_of(
    st.sampled_from(["", ".", "..", "~", "C:", "%2e%2e", "%2f", "\\", "\x00", "link_out", "inner", "up", "hard"]),
    st.sampled_from(["a.txt", "notes.txt", "secret.txt", "work", "**", "*", "?", "[a-z]*", "new"]),
    ANY_TEXT.filter(bool),
)


def fs_paths(outside: Path) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(FS_NAMES),
        st.sampled_from(FS_NAMES),
        st.sampled_from(["notes.txt", "inner/a.txt", "work/secret.txt", "hard", "new.txt", "inner/new.txt"]),
        st.sampled_from(FS_ODD),
        st.lists(SEGMENTS, min_size=1, max_size=5).map("/".join),
        st.sampled_from(["secret.txt", "sub", "sub/deeper.txt", "new.txt", ""]).map(lambda name: f"{outside}/{name}"),
        ANY_TEXT,
    )


def fs_calls(outside: Path) -> st.SearchStrategy[Call]:
    path = fs_paths(outside)
    texts = st.one_of(
        ANY_TEXT,
        st.sampled_from([SECRET, "inside", "notes", "inner", "not the", "\n", ""]),
        st.just(Big("", "x", 5000)),
    )
    offset = st.one_of(st.integers(min_value=-1, max_value=3), st.just(10**30))
    limit = st.one_of(st.none(), st.integers(min_value=0, max_value=3))
    return calls_of(
        st.builds(lambda p, o, n: Call("read_text", {"path": p, "offset": o, "limit": n}), path, offset, limit),
        st.builds(lambda p: Call("list_dir", {"path": p}), path),
        st.builds(lambda g, p: Call("glob", {"pattern": g, "path": p}), path, path),
        st.builds(  # a glob that can succeed
            lambda g, p: Call("glob", {"pattern": g, "path": p}),
            st.sampled_from(["*.txt", "*", "**/*.txt", "inner/*", "link_out/*"]),
            st.sampled_from([".", "", "inner"]),
        ),
        st.builds(lambda p, t: Call("write_text", {"path": p, "text": t}), path, texts),
        st.builds(lambda p, o, n: Call("edit", {"path": p, "old": o, "new": n}), path, texts, texts),
        st.builds(  # an edit that can succeed: text that occurs once in a file of the layout
            lambda place, n: Call("edit", {"path": place[0], "old": place[1], "new": n}),
            st.sampled_from([("notes.txt", "inside"), ("inner/a.txt", "inner"), ("work/secret.txt", "not the")]),
            texts,
        ),
        st.builds(lambda p: Call("mkdir", {"path": p}), path),
        st.builds(lambda p: Call("delete", {"path": p}), path),
    )


def scripts(calls: st.SearchStrategy[Call]) -> st.SearchStrategy[Script]:
    """Most scripts are one turn (one model response of 1 to 4 calls); one in four is two turns."""
    turn = st.lists(calls, min_size=1, max_size=MAX_BATCH)
    return st.sampled_from([1, 1, 1, 2]).flatmap(lambda turns: st.lists(turn, min_size=turns, max_size=turns))


def calls_of(*typed: st.SearchStrategy[Call]) -> st.SearchStrategy[Call]:
    """Calls whose arguments have the right types (and fuzzed values); one in five has an argument of a
    wrong type, or one the tool does not take."""
    well_typed = st.one_of(*typed)
    return st.one_of(well_typed, well_typed, well_typed, well_typed, st.builds(_mistyped, well_typed, JSON_VALUES))


def _mistyped(call: Call, junk: Any) -> Call:
    names = sorted(call.args) or ["unexpected"]
    name = names[len(repr(junk)) % len(names)] if len(repr(junk)) % 4 else "unexpected"
    return Call(call.tool, {**call.args, name: junk})


def build_root(root: Path, outside: Path) -> None:
    """The root's layout: files, directories, symlinks into the sentinel, a hard link to it, a FIFO."""
    populate_root(root, outside)
    os.link(outside / "secret.txt", root / "hard")
    os.mkfifo(root / "pipe")
    (root / os.fsdecode(b"caf\xe9.txt")).write_text("a name that is not UTF-8\n")


def test_fuzz_filesystem(base: Path, runner: asyncio.Runner) -> None:
    root, outside = base / "project", base / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    (outside / "sub" / "deeper.txt").write_text(f"{SECRET} deeper\n")
    build_root(root, outside)
    pristine = tree_of(root)
    toolset = providers.Factory(
        FilesystemToolset, root, max_read_bytes=2048, max_write_bytes=4096, max_entries=20, max_scanned=200
    )
    harness = Harness(runner, lambda value, _: value)
    harness.open({"filesystem": toolset})

    @FUZZ
    @given(script=scripts(fs_calls(outside)))
    def example(script: Script) -> None:
        if tree_of(root) != pristine:  # an earlier example changed it
            shutil.rmtree(root)
            build_root(root, outside)
        before = beside(base, outside)
        answers = harness.replay(script)
        assert beside(base, outside) == before, "something beside the root was created or changed"
        assert (root / "hard").exists() and (root / "hard").stat().st_nlink == 2, "the hard link was refused"
        wrote_it = False  # the script itself wrote the secret's text into the root (then it may read it back)
        for answer in answers:
            if answer.ok:
                assert isinstance(answer.content, str)
                reads_the_hard_link = answer.tool == "read_text" and "hard" in str(answer.args.get("path"))
                shown = SECRET in answer.content and not (reads_the_hard_link or wrote_it)
                assert not shown, (answer, "showed what is outside")
                wrote_it |= answer.tool in ("write_text", "edit") and SECRET in json.dumps(answer.args)

    try:
        example()
    finally:
        harness.close()
    report("filesystem", harness.stats)
    assert harness.stats["examples"] >= FUZZ_EXAMPLES
    assert harness.stats["calls"] >= enough_calls(FUZZ_EXAMPLES)
    each_succeeded_and_failed(harness.stats, ("read_text", "list_dir", "glob", "write_text", "edit", "mkdir", "delete"))


def each_succeeded_and_failed(stats: Mapping[str, int], tools: tuple[str, ...]) -> None:
    """The search reached both outcomes of every tool; with few examples it may not, and says so."""
    missed = [tool for tool in tools if not (stats[f"{tool}:ok"] and stats[f"{tool}:failed"])]
    assert not missed, (
        f"over {stats['examples']} examples, these tools did not both succeed and fail: "
        + ", ".join(f"{tool} ({stats[f'{tool}:ok']} ok, {stats[f'{tool}:failed']} failed)" for tool in missed)
        + "; a small LLM_DO_FUZZ_EXAMPLES may not reach both outcomes: run more examples (make test-deep runs 2,000)"
    )


def report(name: str, stats: Mapping[str, int]) -> None:
    """Shown with `pytest -s`: how many examples and calls ran, and how many of each tool succeeded."""
    print(f"\n{name}: {json.dumps(dict(sorted(stats.items())))}")


# -- shell ---------------------------------------------------------------------------------------

META = [
    "; touch pwned", "$(touch pwned)", "`touch pwned`", "| tee pwned", "> pwned", "&& rm -rf .", "*", "~", "$HOME",
    "'\"", "\n", "-n", "--help", "%s", "%n", "\\", "../outside/secret.txt", "pwned", "-la", "..", "/", "{a,b}",
]  # fmt: skip
NOT_ALLOWED = [
    "sh", "bash", "/bin/sh", "rm", "touch", "python3", "printf ", " printf", "PRINTF", "../printf", "/usr/bin/printf",
    "printf\x00", "", "printf; rm -rf .", "ls -la", "env", "cat",
]  # fmt: skip
SHELL_ALLOW = ["printf", "echo", "true", "false", "pwd", ShellRule("ls", args=[r"-[1aA]+", r"[\w.-]+"])]


def shell_calls(outside: Path) -> st.SearchStrategy[Call]:
    args = st.lists(st.one_of(st.sampled_from(META), ANY_TEXT, st.just(Big("", "y", 140_000))), max_size=5)
    program = st.one_of(st.sampled_from(["printf", "echo", "true", "false", "pwd", "ls"]), st.sampled_from(NOT_ALLOWED))
    cwd = st.one_of(
        st.sampled_from(
            [".", "", "inner", "..", "/", "/tmp", str(outside), "link_out", "inner/../..", "nope", "a\x00", "\ud800"]
        ),
        st.sampled_from([".", "inner"]),
        ANY_TEXT,
    )
    command = st.one_of(
        st.builds(lambda p, a: [p, *a], program, args),
        st.builds(lambda a: ["printf", "%s|", *a], args),  # its output is checked below
        st.just([]),
    )
    return calls_of(st.builds(lambda c, d: Call("run", {"command": c, "cwd": d}), command, cwd))


def test_fuzz_shell(base: Path, runner: asyncio.Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    root, outside, homes = base / "project", base / "outside", base / "homes"
    for directory in (root / "inner", outside, homes):
        directory.mkdir(parents=True)
    (root / "notes.txt").write_text("inside\n")
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    os.symlink("../outside", root / "link_out")
    monkeypatch.setattr(tempfile, "tempdir", str(homes))  # where each call's private HOME is made
    marker = uuid.uuid4().hex
    toolset = providers.Factory(
        ShellToolset, root, SHELL_ALLOW, timeout=2, kill_grace=0.2, max_output=4096, env={"LLM_DO_TEST_MARK": marker}
    )
    harness = Harness(runner, lambda value, _: value)
    harness.open({"shell": toolset})
    inside = sorted(os.listdir(root))

    @FUZZ
    @given(script=scripts(shell_calls(outside)))
    def example(script: Script) -> None:
        before = beside(base, outside)
        answers = harness.replay(script)
        assert beside(base, outside) == before, "something beside the root was created or changed"
        assert sorted(os.listdir(root)) == inside, "no allowed program writes, and nothing else ran"
        assert os.listdir(homes) == [], "every private HOME was removed"
        if any(answer.ok for answer in answers):  # a program ran (a refused call starts nothing)
            assert marked_processes(marker) == [], "a process of the command outlived its call"
        for answer in answers:
            if answer.ok:
                result = answer.content
                assert isinstance(result, CommandResult), result
                command = answer.args["command"]
                if command[:2] == ["printf", "%s|"] and not result.truncated:
                    expected = "".join(f"{arg}|" for arg in command[2:]) if command[2:] else "|"
                    assert (result.exit_code, result.stdout) == (0, expected), (command, result)
                    harness.stats["printf echoed"] += 1

    try:
        example()
    finally:
        harness.close()
    report("shell", harness.stats)
    assert harness.stats["examples"] >= FUZZ_EXAMPLES
    assert harness.stats["calls"] >= enough_calls(FUZZ_EXAMPLES)
    each_succeeded_and_failed(harness.stats, ("run",))
    assert harness.stats["printf echoed"] > 0


# -- attachments ---------------------------------------------------------------------------------

READABLE = ["notes.txt", "inner/a.txt", "work/secret.txt", "chart.png", "data.csv"]


def attachment_calls(outside: Path) -> st.SearchStrategy[Call]:
    names = st.one_of(fs_paths(outside), st.sampled_from(READABLE), st.sampled_from(READABLE))
    return calls_of(
        st.builds(
            lambda text, given: Call("reader", {"input": text, "attachments": given}),
            st.sampled_from(["read these", ""]),
            st.lists(names, max_size=4),
        )
    )


def test_fuzz_attachments(base: Path, runner: asyncio.Runner) -> None:
    """A parent agent hands fuzzed paths to a child agent as attachments: each call hands over files from
    inside the root (read by the child, byte for byte) or fails readably, and nothing beside it is read."""
    root, outside = base / "project", base / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    build_root(root, outside)
    (root / "chart.png").write_bytes(png())
    (root / "data.csv").write_text(CSV)
    received: list[list[Any]] = []

    async def reader(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        items = [
            item
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, UserPromptPart) and not isinstance(part.content, str)
            for item in part.content
        ]
        received.append(items)
        return ModelResponse(parts=[TextPart(f"read {len(items)} items")], usage=USAGE)

    harness = Harness(runner, lambda value, _: value)
    parent = AgentEntry(Agent(harness.model(), retries=1000), name="fuzzer", toolsets=["reader"])
    child = AgentEntry(Agent(FunctionModel(reader)), name="reader")
    limits = AttachmentSettings(max_file_bytes=4096, max_files=3)
    config = RuntimeConfig(approval_mode="approve_all", project_root=root, attachments=limits, limits=APPROVE.limits)
    harness.runtime = Runtime(None, entries=[parent, child], config=config)
    runner.run(harness.runtime.__aenter__())
    expected = {name: (root / name).read_bytes() for name in READABLE}

    @FUZZ
    @given(script=scripts(attachment_calls(outside)))
    def example(script: Script) -> None:
        before = beside(base, outside)
        received.clear()
        answers = harness.replay(script)
        assert beside(base, outside) == before, "something beside the root was created or changed"
        assert sum(answer.ok for answer in answers) == len(received), "a child ran for each call that succeeded"
        for items in received:
            assert SECRET not in repr(items), "a file from outside the root reached the child"
            for item in items:
                if isinstance(item, BinaryContent):
                    assert item.data == expected["chart.png"]
                    harness.stats["binary handed over"] += 1
                elif isinstance(item, TextContent) and item.metadata["llm_do.attachment"]["media_type"] != "image/png":
                    name = item.metadata["llm_do.attachment"]["name"]
                    assert expected[name].decode() in item.content, name
                    harness.stats["text handed over"] += 1

    try:
        example()
    finally:
        harness.close()
    report("attachments", harness.stats)
    assert harness.stats["examples"] >= FUZZ_EXAMPLES
    each_succeeded_and_failed(harness.stats, ("reader",))
    assert harness.stats["binary handed over"] > 0 and harness.stats["text handed over"] > 0


# -- sql -----------------------------------------------------------------------------------------

SCHEMA = [
    "CREATE TABLE ledger (k INTEGER PRIMARY KEY, v TEXT NOT NULL CHECK (length(v) < 40))",
    "CREATE TABLE notes (id INTEGER PRIMARY KEY, k INTEGER REFERENCES ledger (k), body TEXT)",
    "INSERT INTO ledger VALUES (1, 'one'), (2, 'two'), (3, 'three')",
    "INSERT INTO notes VALUES (1, 1, 'first')",
]
STATEMENTS = [
    "SELECT k, v FROM ledger ORDER BY k", "SELECT * FROM ledger WHERE k = $1", "SELECT $1 AS v",
    "SELECT $1, $2, $3", "SELECT count(*) AS n FROM notes", "SELECT * FROM missing_table",
    "INSERT INTO ledger (k, v) VALUES ($1, $2)", "INSERT INTO ledger (v) VALUES ($1) RETURNING k",
    "UPDATE ledger SET v = $2 WHERE k = $1", "DELETE FROM ledger WHERE k = $1", "DELETE FROM ledger",
    "INSERT INTO notes (k, body) VALUES ($1, $2)", "DELETE FROM notes", "UPDATE ledger SET v = v || v",
    "CREATE TABLE IF NOT EXISTS extra (x)", "DROP TABLE IF EXISTS extra", "INSERT INTO extra VALUES ($1)",
    "CREATE TABLE extra (x)", "DROP TABLE notes", "ALTER TABLE ledger ADD COLUMN w TEXT",
    "SAVEPOINT s", "RELEASE s", "ROLLBACK TO s", "ROLLBACK TO SAVEPOINT s",
]  # fmt: skip
EDGE_PARAMS = [
    2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30, float("nan"), float("inf"), -0.0, 1e308, True, None, "",
    "a\x00b", "a\ud800", "\udcff", "'; DROP TABLE ledger; --", "x" * 50,
]  # fmt: skip
CONTROL = [
    "BEGIN", "BEGIN IMMEDIATE", "COMMIT", "ROLLBACK", "END", "ABORT", "commit", "  Commit ; ", "/* x */ COMMIT",
    "COMMIT; SELECT 1", "SELECT 1; COMMIT", "START TRANSACTION", "PREPARE TRANSACTION 'x'", "COMMIT PREPARED 'x'",
    "END TRANSACTION", "ROLLBACK TRANSACTION",
]  # fmt: skip
ESCAPES = [
    "ATTACH DATABASE '{outside}/evil.db' AS evil", "VACUUM INTO '{outside}/copy.db'", "VACUUM",
    "PRAGMA journal_mode=DELETE", "PRAGMA query_only=OFF", "PRAGMA writable_schema=ON", "PRAGMA foreign_keys=OFF",
    "SELECT load_extension('x')", "SELECT 1; DELETE FROM ledger", "DELETE FROM ledger; SELECT 1",
    "SELECT ?", "SELECT :name", "SELECT $0", "SELECT $99", "SELECT ?1", "SELECT 1\x00; DELETE FROM ledger",
    "SELECT '\ud800'", "COPY ledger TO '{outside}/copy.csv'", "SELECT pg_sleep(10)", "SET ROLE postgres",
    "SET TRANSACTION READ WRITE", "CREATE TEMP TABLE t (x)", "LISTEN x", "SELECT pg_read_file('/etc/passwd')",
]  # fmt: skip
TXN_CONTROL = re.compile(
    r"\s*(/\*.*?\*/\s*)?(BEGIN|COMMIT|END|ABORT|START|PREPARE)\b|\s*ROLLBACK\s*(TRANSACTION\s*)?(;|$)", re.I | re.S
)


def sql_calls(outside: Path) -> st.SearchStrategy[Call]:
    sql = st.one_of(
        st.sampled_from(STATEMENTS),
        st.sampled_from([statement for statement in STATEMENTS if "$1" in statement]),
        st.sampled_from(CONTROL),
        st.sampled_from(ESCAPES).map(lambda text: text.replace("{outside}", str(outside))),
        ANY_TEXT,
        st.just(Big("SELECT '", "x", 100_000, "'")),
    )
    param = st.one_of(st.sampled_from(EDGE_PARAMS), JSON_SCALARS)
    params = st.one_of(st.none(), st.lists(param, max_size=4), st.lists(param, min_size=1, max_size=4))
    refs = st.one_of(st.just(Ref(-1)), st.just(Ref(-1)), st.builds(Ref, st.integers(min_value=0, max_value=3)))
    txn = st.one_of(
        refs,
        refs,
        refs,
        refs,
        st.builds(Foreign, st.booleans()),
        st.sampled_from(["txn_deadbeef", "txn_", "", "TXN_00000000", " txn_00000000", "txn_0000000\x00"]),
        ST_FORGED,
    )
    query = st.builds(lambda t, s, p: Call("query", {"txn": t, "sql": s, "params": p}), refs, sql, params)
    execute = st.builds(lambda t, s, p: Call("execute", {"txn": t, "sql": s, "params": p}), refs, sql, params)
    binding = st.builds(  # edge values bound by a statement that takes them, in the latest transaction
        lambda tool, s, p: Call(tool, {"txn": Ref(-1), "sql": s, "params": p}),
        st.sampled_from(["query", "execute"]),
        st.sampled_from([statement for statement in STATEMENTS if "$1" in statement]),
        st.lists(st.sampled_from(EDGE_PARAMS), min_size=1, max_size=3),
    )
    return calls_of(
        st.builds(lambda r: Call("begin", {"read_only": r}), st.booleans()),
        query,
        query,
        execute,
        execute,
        execute,
        binding,
        st.builds(lambda t, s, p: Call("query", {"txn": t, "sql": s, "params": p}), txn, sql, params),
        st.builds(lambda t, s, p: Call("execute", {"txn": t, "sql": s, "params": p}), txn, sql, params),
        st.builds(lambda t: Call("commit", {"txn": t}), txn),
        st.builds(lambda t: Call("rollback", {"txn": t}), txn),
        st.just(Call("tables", {})),
        st.builds(lambda t: Call("describe", {"table": t}), st.sampled_from(["ledger", "notes", "nope"]) | ANY_TEXT),
    )


def sql_scripts(outside: Path) -> st.SearchStrategy[Script]:
    """Most scripts open a transaction or two first, so that what follows has a handle to use."""
    begins = st.lists(st.builds(lambda r: Call("begin", {"read_only": r}), st.booleans()), max_size=2)
    return st.builds(lambda first, rest: [first, *rest] if first else rest, begins, scripts(sql_calls(outside)))


ST_FORGED = st.binary(min_size=4, max_size=4).map(lambda raw: f"txn_{raw.hex()}")


class SqlModel:
    """What the database should hold: the script's committed statements, replayed in commit order."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.pending: dict[str, list[tuple[str, list[Any]]]] = {}
        self.committed: list[list[tuple[str, list[Any]]]] = []

    def follow(self, answers: list[Answer], foreign: set[str]) -> None:
        closed: set[str] = set()
        for answer in answers:
            txn = answer.args.get("txn")
            if isinstance(txn, str) and (txn in foreign or txn in closed):
                assert not answer.ok, answer  # refused: unknown here (or refused earlier, for its arguments)
            if answer.tool == "begin" and answer.ok:
                self.pending[answer.content] = []
            elif answer.tool in ("query", "execute") and answer.ok:
                sql = answer.args["sql"]
                assert not TXN_CONTROL.match(sql), f"transaction control ran as SQL: {sql!r}"
                self.pending[txn].append((sql, list(answer.args.get("params") or [])))
                self.check_echo(sql, answer)
            elif answer.tool == "commit" and answer.ok:
                self.committed.append(self.pending.pop(txn))
                closed.add(txn)
            elif answer.tool == "rollback" and isinstance(txn, str) and txn in self.pending and answer.ran:
                del self.pending[txn]  # a rollback that ran closes the handle, whatever the database said
                closed.add(txn)
        self.pending.clear()  # the rest were forgotten: rolled back when the call ended

    def check_echo(self, sql: str, answer: Answer) -> None:
        """A bound value comes back as it was given: it is never read as SQL."""
        params = answer.args.get("params") or []
        echo = sql == "SELECT $1 AS v" and answer.tool == "query" and len(params) == 1
        if echo and isinstance(params[0], str) and (self.kind == "sqlite" or "\x00" not in params[0]):
            assert answer.content["rows"] == [{"v": params[0]}], answer


def sqlite_dump(path: str | Path) -> list[str]:
    connection = sqlite3.connect(path)
    try:
        return list(connection.iterdump())
    finally:
        connection.close()


def sqlite_reference(statements: list[list[tuple[str, list[Any]]]]) -> list[str]:
    """A fresh in-memory copy of the schema with the committed statements replayed on it, dumped."""
    connection = sqlite3.connect(":memory:", isolation_level=None)
    try:
        connection.execute("PRAGMA foreign_keys=ON")
        connection.execute("BEGIN")
        for statement in SCHEMA:
            connection.execute(statement)
        connection.execute("COMMIT")
        for transaction in statements:
            connection.execute("BEGIN")
            for sql, params in transaction:
                connection.execute(sql, {str(number): value for number, value in enumerate(params, 1)}).fetchall()
            connection.execute("COMMIT")
        return list(connection.iterdump())
    finally:
        connection.close()


def reset_sqlite(path: Path) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA foreign_keys=OFF")
        connection.execute("BEGIN IMMEDIATE")
        for kind, name in connection.execute(
            "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'"
        ).fetchall():
            connection.execute(f'DROP {kind.upper()} "{name}"')
        for statement in SCHEMA:
            connection.execute(statement)
        connection.execute("COMMIT")
    finally:
        connection.close()


def resolver(foreign: dict[bool, str]) -> Callable[[Any, list[Any]], Any]:
    def resolve(value: Any, begun: list[Any]) -> Any:
        if isinstance(value, Ref):
            return begun[value.index % len(begun)] if begun else "txn_00000000"
        if isinstance(value, Foreign):
            return foreign[value.live]
        return value

    return resolve


async def foreign_handle(database: Database) -> tuple[SqlToolset, str]:
    """A transaction open in another toolset instance for the whole test (read-only: it holds no write lock)."""
    other = SqlToolset(database)
    return other, await other.begin(read_only=True)


def fuzz_sql(
    harness: Harness,
    database: Database,
    outside: Path,
    foreign: dict[bool, str],
    reset: Callable[[], None],
    check: Callable[[SqlModel], None],
    kind: str,
) -> None:
    live = foreign[True]
    dirty = [True]

    @settings(FUZZ, max_examples=SQL_EXAMPLES[kind])
    @given(script=sql_scripts(outside))
    @hypothesis.example(  # a rollback refused for its arguments leaves the transaction open, to be committed
        script=[
            [
                Call("begin", {"read_only": False}),
                Call("execute", {"txn": Ref(-1), "sql": "DELETE FROM ledger WHERE k = $1", "params": [2]}),
                Call("rollback", {"txn": Ref(-1), "unexpected": None}),
                Call("commit", {"txn": Ref(-1)}),
            ]
        ]
    )
    def example(script: Script) -> None:
        if dirty[0]:  # a commit changed it (or a check failed): back to the initial rows
            reset()
        dirty[0] = True
        before = beside(outside.parent, outside)
        answers = harness.replay(script)
        model = SqlModel(kind)
        model.follow(answers, set(foreign.values()))
        check(model)
        dirty[0] = bool(model.committed)
        assert beside(outside.parent, outside) == before, "a statement created or changed a file beside the database"
        assert database.stats().in_use == 1, "only the other instance's transaction holds a connection"
        assert open_handles() == [live], "every handle of the call was closed when it ended"
        for answer in answers:
            if answer.ok and answer.tool == "begin":
                foreign[False] = answer.content  # a stale handle for a later example
        harness.stats["commits"] += len(model.committed)

    example()


@pytest.fixture
def sql_place(base: Path) -> tuple[Path, Path]:
    """A directory for the database file, and one beside it that no statement may touch."""
    place, outside = base / "db", base / "outside"
    place.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    return place, outside


def test_fuzz_sql_on_sqlite(sql_place: tuple[Path, Path], runner: asyncio.Runner) -> None:
    place, outside = sql_place
    path = place / "fuzz.db"
    reset_sqlite(path)
    database = database_from_url(f"sqlite:///{path}", pool_size=4, statement_timeout=0.02)
    harness = run_sql_fuzz(runner, database, outside, lambda: reset_sqlite(path), "sqlite", path)
    assert harness.stats["commits"] > 0


def run_sql_fuzz(
    runner: asyncio.Runner,
    database: Database,
    outside: Path,
    reset: Callable[[], None],
    kind: str,
    path: Path | None = None,
    dump: Callable[[], Any] | None = None,
) -> Harness:
    other, live = runner.run(foreign_handle(database))
    foreign = {True: live, False: "txn_00000000"}
    policy = SqlToolset.default_policy
    assert policy is not None
    asking = frozenset(tool for tool, decision in policy.tools.items() if decision == "ask")
    harness = Harness(runner, resolver(foreign), in_order=True, asking=asking)
    toolset = providers.Factory(SqlToolset, database, max_rows=5, max_bytes=2048)
    harness.open({"sql": toolset})
    initial = runner.run(dump()) if dump is not None else None

    def check(model: SqlModel) -> None:
        if kind == "sqlite":
            assert path is not None
            assert sqlite_dump(path) == sqlite_reference(model.committed), "the database differs from its commits"
        elif not model.committed:
            assert dump is not None
            assert runner.run(dump()) == initial, "the database changed, but nothing was committed"

    try:
        fuzz_sql(harness, database, outside, foreign, reset, check, kind)
        assert live in other.txns, "the other instance's transaction is untouched"
    finally:
        runner.run(other.rollback(live))
        harness.close()
        runner.run(database.aclose())
    report(f"sql ({kind})", harness.stats)
    assert harness.stats["examples"] >= SQL_EXAMPLES[kind]
    assert harness.stats["calls"] >= enough_calls(SQL_EXAMPLES[kind])
    each_succeeded_and_failed(harness.stats, ("begin", "query", "execute", "commit", "rollback", "tables", "describe"))
    return harness


class PgChecker:
    """One connection of the test's own, to reset the fuzzed database and read what it holds."""

    def __init__(self, connection: asyncpg.Connection) -> None:
        self.connection = connection

    async def reset(self) -> None:
        await self.connection.execute(";".join(PG_SCHEMA))

    async def dump(self) -> list[Any]:
        tables = await self.connection.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1"
        )
        dump: list[Any] = []
        for (name,) in tables:
            rows = await self.connection.fetch(f'SELECT * FROM "{name}"')
            dump.append((name, sorted(repr(tuple(row)) for row in rows)))
        return dump


async def _connect(postgres: PostgresServer, database: str) -> asyncpg.Connection:
    return await asyncpg.connect(**postgres.connect_kwargs(database))  # type: ignore[arg-type]


PG_SCHEMA = [
    "DROP SCHEMA public CASCADE",
    "CREATE SCHEMA public",
    "CREATE TABLE ledger (k serial PRIMARY KEY, v text NOT NULL CHECK (length(v) < 40))",
    "CREATE TABLE notes (id serial PRIMARY KEY, k integer REFERENCES ledger (k), body text)",
    "INSERT INTO ledger VALUES (1, 'one'), (2, 'two'), (3, 'three')",
    "SELECT setval('ledger_k_seq', 3)",
    "INSERT INTO notes VALUES (1, 1, 'first')",
]


def test_fuzz_sql_on_postgresql(sql_place: tuple[Path, Path], runner: asyncio.Runner, postgres: PostgresServer) -> None:
    _, outside = sql_place
    name = postgres.new_database_name()
    admin = runner.run(_connect(postgres, "postgres"))
    try:
        runner.run(admin.execute(f'CREATE DATABASE "{name}"'))
    finally:
        runner.run(admin.close())
    checker = PgChecker(runner.run(_connect(postgres, name)))
    try:
        runner.run(checker.reset())
        database = database_from_url(postgres.dsn(name), pool_size=4, statement_timeout=0.1)
        harness = run_sql_fuzz(
            runner, database, outside, lambda: runner.run(checker.reset()), "postgresql", dump=checker.dump
        )
    finally:
        runner.run(checker.connection.close())
    assert harness.stats["commits"] > 0
