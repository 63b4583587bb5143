"""The `llm-do` command as a demanding user meets it, mostly on a pseudo-terminal: questions answered in turn,
interrupted or typed ahead, Ctrl-C twice, stderr redirected, hostile text from models, tools and servers, flags after
the prompt, files with a byte order mark, chat turns and their live tree."""

from __future__ import annotations

import os
import pty
import subprocess
import time
from pathlib import Path

from pydantic_ai.messages import ToolCallPart

from llm_do.models import Recording, ScriptStep

from ..cli_projects import NOTES, command, environment, llm_do, notes_project, slow_project
from .test_cli_tty import Terminal, _controlling_terminal, wait_for_the_tool

ASKING = """
from llm_do import entry


@entry(toolsets=["notes"])
async def main(scope, text):
    return await scope.call_tool("write", {"text": text})
"""


FILES = '''
from pathlib import Path

from llm_do import ToolPolicy, Toolset, tool


class Files(Toolset):
    default_policy = ToolPolicy(default="ask")

    @tool
    def write(self, name: str, text: str) -> str:
        """Write a file."""
        Path(__file__).with_name(name).write_text(text)
        return f"wrote {name}"
'''


def files_project(root: Path, script: list[ScriptStep]) -> Path:
    """A worker whose `write(name, text)` asks each time, and a replay script of its responses."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools.py").write_text(FILES)
    (root / "clerk.worker").write_text("---\ntoolsets: [files]\n---\nWrite.\n")
    Recording.from_script(script).save(root / "script.json")
    return root


class Questions(Terminal):
    def question(self, number: int, timeout: float = 30) -> str:
        """What the terminal showed since the previous question, once question `number` (from 1) is asked."""
        deadline = time.monotonic() + timeout
        while self.seen.count("approve? [a/s/d]") < number:
            assert time.monotonic() < deadline, f"question {number} never came:\n{self.seen}"
            self._read(deadline - time.monotonic())
        return self.seen.split("approve? [a/s/d]")[number - 1]


def asking_project(root: Path) -> Path:
    """An @entry function that writes its input as a note: each turn asks for approval once."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools.py").write_text(NOTES)
    (root / "flows.py").write_text(ASKING)
    return root


def test_ctrl_c_at_a_question_in_chat_leaves_the_next_line_to_the_chat(tmp_path: Path) -> None:
    project = asking_project(tmp_path / "asking")
    terminal = Terminal("chat", project)
    terminal.expect("you>")
    terminal.type("first\n")
    terminal.expect("approve? [a/s/d]")
    terminal.type("\x03")  # Ctrl-C while the question waits: the turn is cancelled
    terminal.expect("turn cancelled")
    terminal.type("second\n")  # the next line is the next turn, not a late answer to the cancelled question
    terminal.expect('"text": "second"', timeout=20)
    terminal.type("a\n")
    terminal.expect("written")
    terminal.type("\x04")
    assert terminal.finish() == 0, terminal.seen
    assert (project / "notes.txt").read_text() == "second"


HOSTILE = "\x1b(0 \x1b[2J \u202e"
"""What a terminal obeys rather than shows: a switch to line-drawing characters, a screen clear, a
right-to-left override (the pty helper strips only colour-like CSI sequences, not these)."""
VISIBLE = "\\x1b(0 \\x1b[2J \\u202e"

LOOK = f'''
from llm_do import ToolPolicy, Toolset, tool


class Probe(Toolset):
    default_policy = ToolPolicy(default="ask")

    @tool
    def look(self, path: str) -> str:
        """Look at a file."""
        return "found {HOSTILE!s}"

    @tool
    def boom(self) -> str:
        """Fail."""
        raise RuntimeError("broken {HOSTILE!s}")
'''


def hostile_project(root: Path) -> Path:
    """A worker whose tool result, arguments, model text and error hold terminal escape sequences."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools.py").write_text(LOOK.replace("\x1b", "\\x1b").replace("\u202e", "\\u202e"))
    (root / "looker.worker").write_text("---\ntoolsets: [probe]\n---\nLook.\n")
    Recording.from_script([ToolCallPart("look", {"path": f"a {HOSTILE}"}), f"seen {HOSTILE}\nbye"]).save(
        root / "look.json"
    )
    Recording.from_script([ToolCallPart("boom", {})]).save(root / "boom.json")
    return root


def test_escape_sequences_from_a_model_or_a_tool_never_reach_the_terminal(tmp_path: Path) -> None:
    project = hostile_project(tmp_path / "hostile")
    terminal = Terminal("run", project, "look", "--model", f"replay:{project / 'look.json'}", "-vv")
    shown = terminal.expect("approve? [a/s/d]")
    assert '"path": "a \\u001b(0 \\u001b[2J \\u202e"' in shown  # the arguments the model chose, as JSON
    terminal.type("a\n")
    assert terminal.finish() == 0, terminal.seen
    seen = terminal.seen
    assert HOSTILE.split()[0] not in seen and HOSTILE.split()[2] not in seen, seen
    assert f"looker <- look -> found {VISIBLE}" in seen  # -v: the tool's result
    assert f"looker .. seen {VISIBLE}" in seen  # -vv: the model's text
    assert f"\nseen {VISIBLE}\nbye" in seen.replace("\r\n", "\n")  # the output, on a terminal


def test_output_to_a_pipe_stays_exact_and_stderr_shows_escapes(tmp_path: Path) -> None:
    project = hostile_project(tmp_path / "hostile")
    done = llm_do("run", project, "look", "--model", f"replay:{project / 'look.json'}", "--approve-all", "-v")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"seen {HOSTILE}\nbye\n"  # a pipe or a file gets the output as it is
    assert f"looker <- look -> found {VISIBLE}" in done.stderr
    failed = llm_do("run", project, "look", "--model", f"replay:{project / 'boom.json'}", "--approve-all")
    assert failed.returncode == 1
    assert f"llm-do: error: RuntimeError: broken {VISIBLE}" in failed.stderr
    assert "\x1b(0" not in failed.stderr


def test_the_prompt_may_come_after_the_flags(tmp_path: Path) -> None:
    project = tmp_path / "echo"
    project.mkdir()
    (project / "flows.py").write_text(
        "from llm_do import entry\n\n\n@entry\nasync def shout(scope, text):\n    return text.upper()\n"
    )
    for args in (("--entry", "shout", "quiet words"), ("-v", "quiet words"), ("quiet words", "--entry", "shout")):
        done = llm_do("run", project, *args)
        assert (done.returncode, done.stdout) == (0, "QUIET WORDS\n"), (args, done.stderr)
    extra = llm_do("run", project, "one", "--entry", "shout", "two")
    assert extra.returncode == 2
    assert "unrecognized arguments: two" in extra.stderr


def test_the_final_tree_wraps_on_a_narrow_terminal_instead_of_losing_its_end(tmp_path: Path) -> None:
    project = notes_project(tmp_path / ("notes-" * 15))  # a long replay path: the line is wider than 120 columns
    terminal = Terminal("run", project, "note it", "--model", f"replay:{project / 'script.json'}", "--approve-all")
    assert terminal.finish() == 0, terminal.seen
    tree = terminal.seen.split("calls", 1)[1].split("usage", 1)[0]
    assert "ok 0 in / 0 out, 1 tool call" in " ".join(tree.split()), tree  # outcome and tokens, not cut off


def test_files_saved_with_a_byte_order_mark_are_read_as_written(tmp_path: Path) -> None:
    """Editors on Windows start UTF-8 files with a byte order mark; the frontmatter after it still counts."""
    project = tmp_path / "bom"
    project.mkdir()
    (project / "project.toml").write_text('entry = "clerk"\n', encoding="utf-8-sig")
    (project / "clerk.worker").write_text("---\nmodel: test\ntoolsets: [nope]\n---\nHi.\n", encoding="utf-8-sig")
    done = llm_do("check", project)
    assert done.returncode == 1
    assert f"{project / 'clerk.worker'}:3: unknown toolset 'nope'" in done.stderr
    (project / "clerk.worker").write_text("---\nmodel: test\n---\nHi.\n", encoding="utf-8-sig")
    done = llm_do("check", project)
    assert done.returncode == 0, done.stderr
    assert "no model" not in done.stderr


def test_ctrl_d_at_a_question_stops_the_run_and_says_which_call_was_not_approved(tmp_path: Path) -> None:
    project = notes_project(tmp_path / "notes")
    terminal = Terminal("run", project, "note it", "--model", f"replay:{project / 'script.json'}")
    terminal.expect("approve? [a/s/d]")
    terminal.type("\x04")  # Ctrl-D: end of input
    assert terminal.finish() == 1, terminal.seen
    message = " ".join(terminal.seen.split("approve? [a/s/d]", 1)[1].split())
    assert "the input ended (Ctrl-D) at the question for notes.write of entry 'scribe'" in message, message
    assert "Traceback" not in terminal.seen
    assert not (project / "notes.txt").exists()


def test_parallel_calls_are_asked_one_at_a_time_and_each_answer_reaches_its_call(tmp_path: Path) -> None:
    both = [
        ToolCallPart("write", {"name": "a.txt", "text": "one"}),
        ToolCallPart("write", {"name": "b.txt", "text": "two"}),
    ]
    project = files_project(tmp_path / "files", [both, "Done."])
    terminal = Questions("run", project, "go", "--model", f"replay:{project / 'script.json'}", "-v")
    for number in (1, 2):
        question = terminal.question(number)
        assert ('"text": "one"' in question) != ('"text": "two"' in question), question  # one call per question
        if '"text": "one"' in question:
            terminal.type("a\n")
        else:
            terminal.type("d\n")
            terminal.expect("note for the model")
            terminal.type("not b\n")
    assert terminal.finish() == 0, terminal.seen
    assert terminal.seen.count("approval needed") == 2
    assert (project / "a.txt").read_text() == "one"
    assert not (project / "b.txt").exists()
    assert "clerk <- write -> The call to 'write' was not run: the approver denied it: not b." in terminal.seen


def test_approve_for_session_in_chat_does_not_cover_other_arguments(tmp_path: Path) -> None:
    one = ToolCallPart("write", {"name": "a.txt", "text": "one"})
    other = ToolCallPart("write", {"name": "a.txt", "text": "other"})
    project = files_project(tmp_path / "files", [one, "First.", [one, other], "Second."])
    terminal = Questions("chat", project, "--model", f"replay:{project / 'script.json'}")
    terminal.expect("you>")
    terminal.type("first\n")
    terminal.question(1)
    terminal.type("s\n")
    terminal.expect("First.")
    terminal.type("second\n")
    question = terminal.question(2)
    assert '"text": "other"' in question and '"text": "one"' not in question, question
    terminal.type("a\n")
    terminal.expect("Second.")
    terminal.type("\x04")
    assert terminal.finish() == 0, terminal.seen
    assert terminal.seen.count("approval needed") == 2


def test_a_record_path_that_cannot_be_written_is_refused_before_the_run(tmp_path: Path) -> None:
    project = tmp_path / "echo"
    project.mkdir()
    (project / "flows.py").write_text(
        "from pathlib import Path\n\nfrom llm_do import entry\n\n\n@entry\nasync def mark(scope, text):\n"
        "    Path(__file__).with_name('ran').write_text(text)\n    return text\n"
    )
    for where, problem in ((tmp_path / "nowhere" / "run.json", "does not exist"), (tmp_path, "is a directory")):
        done = llm_do("run", project, "hi", "--model", "test", "--record", where)
        assert done.returncode == 2, done.stderr
        assert f"--record {where}: " in done.stderr and problem in done.stderr, done.stderr
        assert not (project / "ran").exists()  # refused before anything ran (and before anything was spent)


class ErrToFile(Terminal):
    """The command on a pseudo-terminal, with its stderr sent to a file (`llm-do run ... 2>log`)."""

    def __init__(self, log: Path, *args: str | Path) -> None:
        self.master, slave = pty.openpty()
        env = {**environment(), "TERM": "xterm", "COLUMNS": "120", "LINES": "40"}
        with log.open("wb") as err:
            self.process = subprocess.Popen(
                command(*args), stdin=slave, stdout=slave, stderr=err, env=env, preexec_fn=_controlling_terminal
            )
        os.close(slave)
        self.seen = ""


def test_a_question_is_asked_on_the_terminal_when_stderr_goes_to_a_file(tmp_path: Path) -> None:
    project = notes_project(tmp_path / "notes")
    log = tmp_path / "err.log"
    terminal = ErrToFile(log, "run", project, "note it", "--model", f"replay:{project / 'script.json'}")
    shown = terminal.expect("approve? [a/s/d]", timeout=20)  # not into the log, where nobody would see it
    assert '"text": "remember the milk"' in shown
    terminal.type("a\n")
    terminal.expect("Noted.")
    assert terminal.finish() == 0, terminal.seen + log.read_text()
    assert "approve?" not in log.read_text()
    assert "scribe  depth 0" in log.read_text()  # the tree and usage still go to stderr
    assert (project / "notes.txt").read_text() == "remember the milk"


def test_chat_talks_on_the_terminal_when_stderr_goes_to_a_file(tmp_path: Path) -> None:
    project = asking_project(tmp_path / "asking")
    log = tmp_path / "err.log"
    terminal = ErrToFile(log, "chat", project)
    terminal.expect("you>", timeout=20)
    terminal.type("first\n")
    terminal.expect("approve? [a/s/d]")
    terminal.type("a\n")
    terminal.expect("written")
    terminal.type("\x04")
    assert terminal.finish() == 0, terminal.seen + log.read_text()
    assert "you>" not in log.read_text() and "approve?" not in log.read_text()


def test_chat_with_no_entry_to_talk_to_is_a_usage_error(tmp_path: Path) -> None:
    project = tmp_path / "two"
    project.mkdir()
    for name in ("a", "b"):
        (project / f"{name}.worker").write_text("---\nmodel: test\n---\nAnswer.\n")
    done = llm_do("chat", project, stdin="hi\n")
    assert done.returncode == 2, done.stderr
    assert "the project has no default entry: pass --entry NAME (entries: a, b)" in done.stderr
    assert "you>" not in done.stderr
    done = llm_do("chat", project, "--entry", "c", stdin="hi\n")
    assert done.returncode == 2, done.stderr
    assert "no entry 'c' in the project; entries: a, b" in done.stderr
    done = llm_do("chat", project, "--entry", "b", stdin="hi\n")
    assert (done.returncode, done.stdout) == (0, "success (no tool calls)\n"), done.stderr


def test_a_second_ctrl_c_does_not_cut_the_teardown_short(tmp_path: Path) -> None:
    project = slow_project(tmp_path / "slow")
    flows = project / "flows.py"
    slow_cleanup = 'async def cleanup(self):\n        note("cleanup started")\n        await asyncio.sleep(1)\n'
    flows.write_text(flows.read_text().replace("def cleanup(self):\n", slow_cleanup))
    log = project / "log.txt"
    terminal = Terminal("run", project, "go", "--approve-all")
    wait_for_the_tool(terminal.process, log)
    terminal.type("\x03")
    deadline = time.monotonic() + 30
    while "cleanup started" not in log.read_text():
        assert time.monotonic() < deadline and terminal.process.poll() is None, terminal.seen
        time.sleep(0.02)
    terminal.type("\x03")  # again, during the teardown
    assert terminal.finish() == 130, terminal.seen
    assert "interrupted: the run was cancelled and torn down" in terminal.seen
    assert log.read_text().splitlines() == ["waiting", "rollback", "cleanup started", "cleanup"]


def test_enter_alone_at_a_question_asks_again(tmp_path: Path) -> None:
    project = notes_project(tmp_path / "notes")
    terminal = Terminal("run", project, "note it", "--model", f"replay:{project / 'script.json'}")
    terminal.expect("approve? [a/s/d]")
    terminal.type("\n")  # Enter, no answer: not the end of input
    terminal.expect("answer a, s or d ([a] approve once")
    terminal.type("a\n")
    terminal.expect("Noted.")
    assert terminal.finish() == 0, terminal.seen
    assert (project / "notes.txt").read_text() == "remember the milk"


def test_keys_typed_before_a_question_is_shown_do_not_answer_it(tmp_path: Path) -> None:
    both = [
        ToolCallPart("write", {"name": "a.txt", "text": "one"}),
        ToolCallPart("write", {"name": "b.txt", "text": "two"}),
    ]
    project = files_project(tmp_path / "files", [both, "Done."])
    terminal = Questions("run", project, "go", "--model", f"replay:{project / 'script.json'}")
    first = terminal.question(1)
    terminal.type("a\na\n")  # one answer, and one more typed ahead (a key pressed twice)
    second = terminal.question(2)
    assert "wrote" not in second.split("approval needed")[0]  # asked, not answered by the key typed ahead
    terminal.type("d\n\n")
    assert terminal.finish() == 0, terminal.seen
    files = {name: (project / name).exists() for name in ("a.txt", "b.txt")}
    assert sorted(files.values()) == [False, True], files  # the one approved, not the other
    assert ('"text": "one"' in first) == files["a.txt"]


def test_ctrl_c_at_the_chat_prompt_shows_the_prompt_again(tmp_path: Path) -> None:
    project = tmp_path / "echo"
    project.mkdir()
    (project / "flows.py").write_text(
        "from llm_do import entry\n\n\n@entry\nasync def shout(scope, text):\n    return text.upper()\n"
    )
    terminal = Terminal("chat", project)
    terminal.expect("you>")
    terminal.type("\x03")  # Ctrl-C at the prompt: nothing to cancel, and the prompt is there again
    terminal.expect("(Ctrl-D to exit)\nyou>", timeout=10)
    terminal.type("words\n")
    terminal.expect("WORDS")
    terminal.type("\x04")
    assert terminal.finish() == 0, terminal.seen


def test_the_live_tree_of_a_chat_turn_shows_that_turn_only(tmp_path: Path) -> None:
    project = notes_project(tmp_path / "desk")
    (project / "scribe.worker").write_text("---\ntoolsets: [notes, helper]\n---\nWrite notes.\n")
    (project / "helper.worker").write_text("Help.\n")
    script = Recording.from_script(
        [ToolCallPart("helper", {"input": "help"}), "First.", ToolCallPart("write", {"text": "milk"}), "Second."],
        entry="scribe",
    )
    script.add_script(["Helped."], entry="helper").save(project / "script.json")
    terminal = Terminal("chat", project, "--model", f"replay:{project / 'script.json'}", "--entry", "scribe")
    terminal.expect("you>")
    terminal.type("first\n")
    terminal.expect("First.")
    mark = len(terminal.seen)
    terminal.type("second\n")
    terminal.expect("approve? [a/s/d]")
    tree = terminal.seen[mark:].split("approval needed", 1)[0]  # the live tree, drawn as the question stops it
    assert "scribe  depth 0" in tree
    assert "helper" not in tree, tree  # turn 1's call is not running in turn 2
    terminal.type("a\n")
    terminal.expect("Second.")
    terminal.type("\x04")
    assert terminal.finish() == 0, terminal.seen


HOSTILE_SERVER = """
from fastmcp import FastMCP

mcp = FastMCP("hostile")


@mcp.tool(name="peek\\x1b(0")
def peek() -> str:
    return "x"


mcp.run(show_banner=False)
"""


def test_list_shows_escape_sequences_in_the_tool_names_an_mcp_server_gives_as_text(tmp_path: Path) -> None:
    project = tmp_path / "desk"
    (project / "servers").mkdir(parents=True)
    (project / "servers" / "hostile.py").write_text(HOSTILE_SERVER)
    (project / "project.toml").write_text('[mcp_servers.hostile]\ncommand = "python"\nargs = ["servers/hostile.py"]\n')
    (project / "clerk.worker").write_text("---\nmodel: test\ntoolsets: [hostile]\n---\nHi.\n")
    done = llm_do("list", project)
    assert done.returncode == 0, done.stderr
    assert "\x1b(0" not in done.stdout
    assert "hostile: ask peek\\x1b(0" in done.stdout  # the approvals column
    assert done.stdout.count("peek\\x1b(0") == 2  # ... and the servers table
