"""The `llm-do` command without a terminal: output, JSON, stdin, errors and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic_ai.messages import ToolCallPart

from llm_do.models import Recording

from ..cli_projects import hello_project, llm_do, notes_project


def test_run_prints_the_output_on_stdout_and_the_tree_and_usage_on_stderr(tmp_path: Path) -> None:
    project = hello_project(tmp_path / "hello")
    done = llm_do("run", project, "Hi!")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "success (no tool calls)\n"
    assert "hello  depth 0  test:test  ok" in done.stderr
    assert "total" in done.stderr


def test_json_prints_one_document_and_nothing_else_on_stdout(tmp_path: Path) -> None:
    project = notes_project(tmp_path / "notes")
    done = llm_do("run", project, "note it", "--model", f"replay:{project / 'script.json'}", "--approve-all", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["output"] == "Noted."
    assert document["usage"]["requests"] == 2
    [call] = document["calls"]
    assert (call["entry"], call["depth"], call["outcome"], call["calls"]) == ("scribe", 0, "ok", [])
    assert call["model"].startswith("replay")
    assert (project / "notes.txt").read_text() == "remember the milk"


def test_input_comes_from_piped_stdin(tmp_path: Path) -> None:
    project = tmp_path / "echo"
    project.mkdir()
    (project / "flows.py").write_text(
        "from llm_do import entry\n\n\n@entry\nasync def shout(scope, text):\n    return text.upper()\n"
    )
    done = llm_do("run", project, "--json", stdin="quiet words\n")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == "QUIET WORDS"


def test_input_json_reaches_an_entry(tmp_path: Path) -> None:
    project = tmp_path / "sum"
    project.mkdir()
    (project / "flows.py").write_text(
        "from llm_do import entry\n\n\n@entry\nasync def add(scope, data):\n    return data['a'] + data['b']\n"
    )
    done = llm_do("run", project, "--input-json", '{"a": 2, "b": 3}')
    assert (done.returncode, done.stdout) == (0, "5\n"), done.stderr


def test_a_call_that_needs_approval_without_a_terminal_fails_with_what_to_do(tmp_path: Path) -> None:
    project = notes_project(tmp_path / "notes")
    done = llm_do("run", project, "note it", "--model", f"replay:{project / 'script.json'}")
    assert done.returncode == 2
    assert "notes.write, which needs approval" in done.stderr
    assert "pass --approve-all or --reject-all" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (project / "notes.txt").exists()


def test_reject_all_denies_and_the_model_is_told(tmp_path: Path) -> None:
    project = notes_project(tmp_path / "notes")
    done = llm_do("run", project, "note it", "--model", f"replay:{project / 'script.json'}", "--reject-all", "-v")
    assert done.returncode == 0, done.stderr
    assert "scribe -> write(" in done.stderr  # -v shows the tool call
    assert "scribe <- write -> " in done.stderr  # ... and its result (the denial)
    assert not (project / "notes.txt").exists()


def test_unknown_project_is_an_error(tmp_path: Path) -> None:
    done = llm_do("run", tmp_path / "nowhere", "hi")
    assert done.returncode == 1
    assert "nowhere: no such file or directory" in done.stderr


def test_check_reports_every_problem_with_file_and_line(tmp_path: Path) -> None:
    project = tmp_path / "broken"
    project.mkdir()
    (project / "clerk.worker").write_text("---\nmodel: gpt\ntoolset: [sql]\n---\nHi.\n")
    (project / "helper.worker").write_text("---\nmodel: test\ntoolsets: [sqll]\n---\nHi.\n")
    done = llm_do("check", project)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert any(line.startswith(f"{project / 'clerk.worker'}:2: model: 'gpt'") for line in lines), done.stderr
    assert any(line.startswith(f"{project / 'clerk.worker'}:3: unknown key 'toolset'") for line in lines)
    assert any(line.startswith(f"{project / 'helper.worker'}:3: unknown toolset 'sqll'") for line in lines)
    assert lines[-1] == "llm-do: 3 problems found"


def test_check_of_a_good_project(tmp_path: Path) -> None:
    done = llm_do("check", hello_project(tmp_path / "hello"))
    assert (done.returncode, done.stdout) == (0, "ok: 1 entries (hello); default entry: hello\n"), done.stderr


def test_a_worker_without_a_model_is_reported(tmp_path: Path) -> None:
    done = llm_do("run", notes_project(tmp_path / "notes"), "hi")
    assert done.returncode == 1
    assert "worker 'scribe' has no model" in done.stderr
    assert "--model" in done.stderr


def test_a_missing_replay_file_is_a_usage_error_naming_the_path_from_the_current_directory(tmp_path: Path) -> None:
    done = llm_do("run", notes_project(tmp_path / "notes"), "hi", "--model", "replay:missing.json", cwd=tmp_path)
    assert done.returncode == 2
    assert f"the recording {tmp_path / 'missing.json'} does not exist" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"version": 2, "responses": []}', "recording format version 2 is not supported"),
        ("{not json", "not JSON"),
    ],
)
def test_a_replay_file_that_is_no_recording_is_a_usage_error_naming_the_flag(
    tmp_path: Path, text: str, why: str
) -> None:
    """Not a problem of a worker file, which names no model: the flag (or LLM_DO_MODEL) gave it."""
    project = notes_project(tmp_path / "notes")
    (tmp_path / "bad.json").write_text(text)
    for flags, env, where in (
        (("--model", "replay:bad.json"), {}, "--model replay:bad.json"),
        ((), {"LLM_DO_MODEL": "replay:bad.json"}, "LLM_DO_MODEL replay:bad.json"),
    ):
        done = llm_do("run", project, "hi", *flags, "--json", cwd=tmp_path, env=env)
        assert done.returncode == 2, done.stderr
        document = json.loads(done.stdout)
        assert document["kind"] == "usage" and document["problems"] == []
        assert document["error"].startswith(f"{where}: ") and why in document["error"], document["error"]
        assert "scribe.worker" not in document["error"]


@pytest.mark.long
def test_replay_paths_on_the_command_line_are_relative_to_the_current_directory(tmp_path: Path) -> None:
    notes_project(tmp_path / "notes")
    args = ("run", "notes", "note it", "--approve-all", "--json")
    here = llm_do(*args, "-m", "replay:notes/script.json", cwd=tmp_path)
    assert (here.returncode, json.loads(here.stdout)["output"]) == (0, "Noted."), here.stderr
    from_env = llm_do(*args, cwd=tmp_path, env={"LLM_DO_MODEL": "replay:notes/script.json"})
    assert (from_env.returncode, json.loads(from_env.stdout)["output"]) == (0, "Noted."), from_env.stderr
    not_the_project = llm_do(*args, "-m", "replay:script.json", cwd=tmp_path)
    assert not_the_project.returncode == 2
    assert f"the recording {tmp_path / 'script.json'} does not exist" in not_the_project.stderr


def test_bad_flags_are_usage_errors(tmp_path: Path) -> None:
    project = hello_project(tmp_path / "hello")
    assert llm_do("run", project, "--no-such-flag").returncode == 2
    both = llm_do("run", project, "--approve-all", "--reject-all")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    bad_json = llm_do("run", project, "--input-json", "{nope")
    assert bad_json.returncode == 2 and "--input-json is not valid JSON" in bad_json.stderr
    assert llm_do("frobnicate", project).returncode == 2


def test_no_input_is_a_usage_error(tmp_path: Path) -> None:
    done = llm_do("run", hello_project(tmp_path / "hello"))
    assert done.returncode == 2
    assert "no input: give a PROMPT" in done.stderr


@pytest.mark.long
def test_a_failing_run_prints_one_line_and_a_traceback_only_with_debug(tmp_path: Path) -> None:
    project = tmp_path / "fails"
    project.mkdir()
    (project / "flows.py").write_text(
        "from llm_do import entry\n\n\n@entry\nasync def main(scope, text):\n    raise ValueError('no good: ' + text)\n"
    )
    done = llm_do("run", project, "x")
    assert done.returncode == 1
    assert "llm-do: error: ValueError: no good: x" in done.stderr
    assert "Traceback" not in done.stderr
    debug = llm_do("run", project, "x", "--debug")
    assert debug.returncode == 1 and "Traceback" in debug.stderr


@pytest.mark.long
def test_record_then_replay(tmp_path: Path) -> None:
    project = notes_project(tmp_path / "notes")
    recorded = tmp_path / "recorded.json"
    script = f"replay:{project / 'script.json'}"
    first = llm_do("run", project, "note it", "--model", script, "--approve-all", "--record", recorded, "--json")
    assert first.returncode == 0, first.stderr
    (project / "script.json").unlink()
    replayed = llm_do("run", project, "note it", "--model", f"replay:{recorded}", "--approve-all", "--json")
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["output"] == json.loads(first.stdout)["output"] == "Noted."


def test_list_shows_entries_toolsets_models_and_policies(tmp_path: Path) -> None:
    project = notes_project(tmp_path / "notes")
    done = llm_do("list", project, "--model", "replay:script.json", cwd=project)
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if "│ scribe" in line)
    assert "worker" in row and "notes" in row and "replay" in row
    assert "notes: default ask" in done.stdout


@pytest.mark.long
def test_max_depth_is_applied(tmp_path: Path) -> None:
    project = tmp_path / "deep"
    project.mkdir()
    (project / "boss.worker").write_text("---\ntoolsets: [helper]\n---\nDelegate.\n")
    (project / "helper.worker").write_text("---\nmodel: test\n---\nHelp.\n")
    (project / "project.toml").write_text('entry = "boss"\n')
    Recording.from_script([ToolCallPart("helper", {"input": "do it"}), "Done."], entry="boss").save(
        project / "script.json"
    )
    ok = llm_do("run", project, "go", "--model", f"replay:{project / 'script.json'}", "--json")
    assert ok.returncode == 0, ok.stderr
    assert [c["entry"] for c in json.loads(ok.stdout)["calls"][0]["calls"]] == ["helper"]
    shallow = llm_do("run", project, "go", "--model", f"replay:{project / 'script.json'}", "--max-depth", "0", "--json")
    assert shallow.returncode == 1
    failed = json.loads(shallow.stdout)
    assert (failed["output"], failed["kind"], failed["exit_code"]) == (None, "error", 1)
    assert failed["error"].startswith("MaxDepthExceeded: call depth 1 exceeds max_depth=0: boss -> helper")
    assert "MaxDepthExceeded: call depth 1 exceeds max_depth=0: boss -> helper" in shallow.stderr


def test_vv_streams_the_models_text_a_line_at_a_time_on_stderr(tmp_path: Path) -> None:
    project = notes_project(tmp_path / "notes")
    Recording.from_script([ToolCallPart("write", {"text": "milk"}), "First line.\nSecond line."]).save(
        project / "two_lines.json"
    )
    done = llm_do("run", project, "note it", "--model", f"replay:{project / 'two_lines.json'}", "--approve-all", "-vv")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "First line.\nSecond line.\n"
    assert "scribe -> write(" in done.stderr  # -vv includes -v
    assert "scribe .. First line." in done.stderr and "scribe .. Second line." in done.stderr


def test_text_of_models_and_tools_on_stderr_keeps_what_looks_like_emoji_codes(tmp_path: Path) -> None:
    """`:x:` or `:thumbs_up:` in a tool's arguments, a model's text or an error is shown as written, not as an
    emoji: an approver reads the arguments as the tool gets them."""
    project = notes_project(tmp_path / "notes")
    Recording.from_script([ToolCallPart("write", {"text": "ratio 3:x: :thumbs_up:"}), "Noted :smile:"]).save(
        project / "script.json"
    )
    done = llm_do("run", project, "note it", "-m", f"replay:{project / 'script.json'}", "--approve-all", "-vv")
    assert done.returncode == 0, done.stderr
    assert "ratio 3:x: :thumbs_up:" in done.stderr and "Noted :smile:" in done.stderr, done.stderr
    assert not {"\u274c", "\U0001f44d", "\U0001f604"} & set(done.stderr)
    typo = llm_do("run", project, "hi", "-m", "olama:x")
    assert typo.returncode == 2
    assert typo.stderr.startswith("llm-do: error: --model olama:x: unknown model provider 'olama'"), typo.stderr


def test_the_earlier_command_line_without_a_command_says_what_to_type_today(tmp_path: Path) -> None:
    """The earlier llm-do ran `llm-do PROJECT [PROMPT]` (and `--chat`, `--headless`): a project given where the
    command goes gets the command to type, not only argparse's list of commands."""
    project = hello_project(tmp_path / "hello")
    done = llm_do("hello", "Hi there", "--headless", "-v", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "llm-do: error: 'hello' is a project, not a command: the earlier llm-do's `llm-do PROJECT [PROMPT]` is "
        "`llm-do run PROJECT [PROMPT]` today (--headless is gone: the live tree shows on a terminal "
        "only); run: llm-do run hello 'Hi there' -v",
    ]
    chat = llm_do("hello/hello.worker", "--chat", cwd=tmp_path)
    assert chat.returncode == 2
    assert chat.stderr.rstrip().endswith("run: llm-do chat hello/hello.worker"), chat.stderr
    typo = llm_do("runn", project)
    assert typo.returncode == 2 and "invalid choice: 'runn'" in typo.stderr
