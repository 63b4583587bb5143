"""Projects written for the earlier llm-do (tests/project/earlier_projects), through the command as a user runs it:
`check`, `run` and `migrate` on a copy of each."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import IO, Any

import pytest
from pydantic_ai.messages import ToolCallPart

from llm_do.models import Recording

from ..cli_projects import command, environment, llm_do

EARLIER = Path(__file__).with_name("earlier_projects")


def copy(name: str, tmp_path: Path) -> Path:
    """A copy of the earlier project `name`, so that a test may run and migrate it."""
    target = tmp_path / name
    shutil.copytree(EARLIER / name, target)
    return target


def files(root: Path) -> dict[str, bytes]:
    """The project's files (not the bytecode a check's import leaves beside its modules)."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def edit_manifest(root: Path, **runtime: object) -> None:
    manifest = json.loads((root / "project.json").read_text())
    manifest["runtime"].update(runtime)
    (root / "project.json").write_text(json.dumps(manifest, indent=2))


# -- .agent files and project.json, no Python ---------------------------------------------------------------


def test_check_loads_agent_files_and_project_json(tmp_path: Path) -> None:
    project = copy("greeter", tmp_path)
    done = llm_do("check", project)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "ok: 2 entries (main, polisher); default entry: main",
        "ungated: polisher.polisher (main) runs without asking: 'polisher' is an agent: its own tools are gated by "
        "their policies",
    ]
    document = json.loads(llm_do("check", project, "--json").stdout)
    assert (document["ok"], document["entries"], document["default_entry"]) == (True, ["main", "polisher"], "main")


def test_run_takes_entry_and_input_from_project_json(tmp_path: Path) -> None:
    project = copy("greeter", tmp_path)
    done = llm_do("run", project, "--model", "test", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    [main] = document["calls"]
    assert (main["entry"], [call["entry"] for call in main["calls"]]) == ("main", ["polisher"])
    assert "polisher" in document["output"]


def test_max_depth_of_project_json_means_what_it_meant_and_the_flag_wins(tmp_path: Path) -> None:
    project = copy("greeter", tmp_path)
    edit_manifest(project, max_depth=1)  # earlier: the entry agent alone (it ran at depth 1), no agent below it
    done = llm_do("run", project, "--model", "test")
    assert done.returncode == 1
    assert "call depth 1 exceeds max_depth=0: main -> polisher" in done.stderr
    assert llm_do("run", project, "--model", "test", "--max-depth", "1").returncode == 0
    edit_manifest(project, max_depth=2)  # earlier: main, and polisher below it
    assert llm_do("run", project, "--model", "test").returncode == 0


def test_agent_calls_require_approval_asks_before_an_agent_is_called(tmp_path: Path) -> None:
    project = copy("greeter", tmp_path)
    edit_manifest(project, approval_mode="prompt", agent_calls_require_approval=True)
    done = llm_do("run", project, "--model", "test")
    assert done.returncode == 2, done.stderr
    assert "polisher" in done.stderr and "pass --approve-all or --reject-all" in done.stderr
    assert llm_do("run", project, "--model", "test", "--approve-all").returncode == 0
    edit_manifest(project, approval_mode="approve_all")  # the file's mode answers, as the flag did
    assert llm_do("run", project, "--model", "test").returncode == 0


def test_keys_of_project_json_without_an_equivalent_are_problems_with_their_lines(tmp_path: Path) -> None:
    project = copy("greeter", tmp_path)
    (project / "project.json").write_text(
        json.dumps(
            {
                "version": 1,
                "runtime": {"approval_mode": "approve_all", "auth_mode": "oauth_auto"},
                "generated_agents_dir": "generated",
                "entry": {"function": "entry.py:main", "args": {"input": "Go", "attachments": ["a.pdf"]}},
                "agent_files": ["main.agent", "polisher.agent"],
            },
            indent=2,
        )
    )
    done = llm_do("check", project, "--json")
    assert done.returncode == 1
    problems = {problem["line"]: problem["message"] for problem in json.loads(done.stdout)["problems"]}
    assert "llm-do has no OAuth" in problems[5]
    assert 7 not in problems  # generated_agents_dir: dropped, as made agents are never written
    assert "llm_do.entry" in problems[9] and "entry = " in problems[9]
    assert "entry.args.attachments: 'a.pdf' is not a file under" in problems[12]  # today's attachments, checked


# -- the built-in toolsets ask where the earlier ones asked -----------------------------------------------------
#
# Each call is what the earlier llm-do's preset did with it: ran it freely, asked for it, or refused it. Under
# --reject-all what it asked for is refused (and what it ran still runs); under --approve-all it runs.

RAN, ASKED, REFUSED = "ran", "asked", "refused"

SHELL_READONLY = [  # examples/code_analyzer: its shell_readonly ran these freely, asked for find's actions
    (["ls", "src"], RAN),
    (["cat", "src/app.py"], RAN),
    (["wc", "-l", "src/app.py"], RAN),
    (["grep", "-rn", "def", "src"], RAN),
    (["head", "-n", "1", "src/app.py"], RAN),
    (["tail", "-n", "1", "src/app.py"], RAN),
    (["sort", "src/app.py"], RAN),
    (["uniq", "src/app.py"], RAN),
    (["find", "src", "-name", "*.py"], RAN),
    (["git", "log"], RAN),
    (["git", "status"], RAN),
    (["find", "src", "-name", "cli.py", "-delete"], ASKED),
    (["find", "src", "-name", "app.py", "-exec", "touch", "{}.seen", ";"], ASKED),
    (["stat", "src/app.py"], REFUSED),
    (["git", "blame", "src/app.py"], REFUSED),
    (["rm", "src/app.py"], REFUSED),
]
SHELL_FILE_OPS = [  # examples/file_organizer: its shell_file_ops ran ls, asked for mv, refused the rest
    (["ls", "messy_files"], RAN),
    (["mv", "messy_files/FINAL_Report_v3.pdf", "messy_files/report.pdf"], ASKED),
    (["mkdir", "archive"], REFUSED),
    (["touch", "messy_files/new.txt"], REFUSED),
    (["cp", "messy_files/FINAL_Report_v3.pdf", "copy.pdf"], REFUSED),
    (["cat", "messy_files/FINAL_Report_v3.pdf"], REFUSED),
]
BOOTSTRAPPING = [  # examples/bootstrapping: dynamic_agents asked before agent_create; filesystem_project before writes
    (ToolCallPart("glob", {"pattern": "input/*.md"}), RAN),
    (ToolCallPart("read_text", {"path": "input/acme.md"}), RAN),
    (ToolCallPart("agent_create", {"name": "pitch_evaluator", "instructions": "Evaluate the deck."}), ASKED),
    (
        ToolCallPart(
            "agent_call", {"agent": "pitch_evaluator", "input": "Evaluate.", "attachments": ["input/acme.md"]}
        ),
        RAN,
    ),
    (ToolCallPart("write_text", {"path": "evaluations/acme.md", "text": "**Verdict:** GO"}), ASKED),
]

SUMMARIZER = [  # its design-era main.worker: filesystem_project read freely and asked before writes
    (ToolCallPart("read_text", {"path": "sample_input.txt"}), RAN),
    (ToolCallPart("list_dir", {"path": "."}), RAN),
    (ToolCallPart("write_text", {"path": "summary.txt", "text": "A fox."}), ASKED),
]


def run_calls(project: Path, script: Path, calls: list[Any], *flags: str) -> tuple[list[str], dict[str, Any]]:
    """Run the project's default entry on a replay of `calls` (a model response each, then a text; a made
    `pitch_evaluator` answers "GO"), with `flags`; what became of each call, and the run's JSON document."""
    steps = [call if isinstance(call, ToolCallPart) else ToolCallPart("run", {"command": call}) for call in calls]
    recording = Recording.from_script([*steps, "Done."], entry="main")
    recording.add_script(["**Verdict:** GO"], entry="pitch_evaluator").save(script)
    done = llm_do("run", project, "--model", f"replay:{script}", "-v", "--json", *flags)
    assert done.returncode == 0, done.stderr
    results = [line.split(" -> ", 1)[1] for line in done.stderr.splitlines() if line.startswith("main <- ")]
    return [_outcome(result) for result in results], json.loads(done.stdout)


def _outcome(result: str) -> str:
    if "was not run: it needs approval" in result:
        return ASKED
    return REFUSED if "was not run: denied by policy" in result else RAN


@pytest.mark.parametrize(
    ("name", "calls"),
    [
        ("code_analyzer", SHELL_READONLY),
        ("file_organizer", SHELL_FILE_OPS),
        ("bootstrapping", BOOTSTRAPPING),
        ("summarizer", SUMMARIZER),  # once migrated: its design-era keys do not load as they are
    ],
)
def test_a_ported_project_asks_where_the_earlier_one_asked(name: str, calls: list[Any], tmp_path: Path) -> None:
    project, again = copy(name, tmp_path), copy(name, tmp_path / "again")
    if name == "summarizer":
        assert llm_do("migrate", project, "--write").returncode == llm_do("migrate", again, "--write").returncode == 0
    script = tmp_path / "script.json"
    rejected, _ = run_calls(project, script, [call for call, _ in calls], "--reject-all")
    assert rejected == [outcome for _, outcome in calls]
    approved, _ = run_calls(again, script, [call for call, _ in calls], "--approve-all")
    assert approved == [REFUSED if outcome == REFUSED else RAN for _, outcome in calls]


def test_what_the_read_only_shell_asks_for_runs_only_when_approved(tmp_path: Path) -> None:
    project = copy("code_analyzer", tmp_path)
    run_calls(project, tmp_path / "script.json", [call for call, _ in SHELL_READONLY], "--reject-all")
    assert (project / "src" / "cli.py").exists() and not (project / "src" / "app.py.seen").exists()
    run_calls(project, tmp_path / "script.json", [call for call, _ in SHELL_READONLY], "--approve-all")
    assert not (project / "src" / "cli.py").exists() and (project / "src" / "app.py.seen").exists()


def test_a_move_runs_only_when_approved_and_nothing_else_changes_the_files(tmp_path: Path) -> None:
    project = copy("file_organizer", tmp_path)
    before = files(project)
    run_calls(project, tmp_path / "script.json", [call for call, _ in SHELL_FILE_OPS], "--reject-all")
    assert files(project) == before
    run_calls(project, tmp_path / "script.json", [call for call, _ in SHELL_FILE_OPS], "--approve-all")
    assert sorted(files(project)) == [
        "main.agent",
        "messy_files/Meeting Notes (2).docx",
        "messy_files/report.pdf",
        "project.json",
    ]


def test_a_made_agent_is_made_and_called_only_when_approved(tmp_path: Path) -> None:
    project = copy("bootstrapping", tmp_path)
    _, rejected = run_calls(project, tmp_path / "script.json", [call for call, _ in BOOTSTRAPPING], "--reject-all")
    assert [call["entry"] for call in rejected["calls"]] == ["main"]
    assert not (project / "evaluations" / "acme.md").exists()
    _, approved = run_calls(project, tmp_path / "script.json", [call for call, _ in BOOTSTRAPPING], "--approve-all")
    [main] = approved["calls"]
    assert [call["entry"] for call in main["calls"]] == ["pitch_evaluator"]
    assert (project / "evaluations" / "acme.md").read_text() == "**Verdict:** GO"


AGENT_CALL = ToolCallPart("agent_call", {"agent": "pitch_evaluator", "input": "Evaluate."})
AGENT_CALL_WITH_A_FILE = ToolCallPart(
    "agent_call", {"agent": "pitch_evaluator", "input": "Evaluate.", "attachments": ["input/acme.md"]}
)


@pytest.mark.parametrize(
    ("runtime", "outcomes"),
    [
        ({}, [RAN, RAN]),
        ({"agent_calls_require_approval": True}, [ASKED, ASKED]),
        ({"agent_attachments_require_approval": True}, [RAN, ASKED]),
        ({"agent_approval_overrides": {"pitch_evaluator": {"calls_require_approval": True}}}, [ASKED, ASKED]),
    ],
)
def test_agent_call_asks_where_project_json_asked_for_calls_to_agents(
    runtime: dict[str, Any], outcomes: list[str], tmp_path: Path
) -> None:
    project = copy("bootstrapping", tmp_path)
    edit_manifest(project, **runtime)
    script = tmp_path / "script.json"
    assert run_calls(project, script, [AGENT_CALL, AGENT_CALL_WITH_A_FILE], "--reject-all")[0] == outcomes
    assert llm_do("migrate", project, "--write").returncode == 0
    assert run_calls(project, script, [AGENT_CALL, AGENT_CALL_WITH_A_FILE], "--reject-all")[0] == outcomes


# -- a Python toolset written against the earlier API --------------------------------------------------------


def test_check_names_each_earlier_api_use_with_its_replacement(tmp_path: Path) -> None:
    project = copy("calculator", tmp_path)
    done = llm_do("check", project, "--json")
    assert done.returncode == 1
    problems = [(Path(p["file"]).name, p["line"], p["message"]) for p in json.loads(done.stdout)["problems"]]
    by_line = {(name, line): message for name, line, message in problems}
    assert "llm_do.CallScope" in by_line[("tools.py", 5)]
    assert "llm_do.ToolPolicy" in by_line[("tools.py", 6)]
    assert "TOOLSETS" in by_line[("tools.py", 33)]
    assert (
        "unknown toolset 'calc_tools': tools.py could not be imported and may define it" in by_line[("main.agent", 4)]
    )


def test_migrate_rewrites_the_earlier_python_api_then_the_project_checks_and_runs(tmp_path: Path) -> None:
    project = copy("calculator", tmp_path)
    done = llm_do("migrate", project, "--write")
    assert done.returncode == 0, done.stderr
    assert "-from llm_do.runtime import CallContext\n" in done.stdout and "+class CalcTools(Toolset):\n" in done.stdout
    assert "llm-do: 4 files changed" in done.stderr and "ok: 1 entries (main)" in done.stdout  # checked once written
    assert sorted(files(project)) == ["main.worker", "project.toml", "tools.py"]
    tools = (project / "tools.py").read_text()
    assert 'default_policy = ToolPolicy(default="ask", tools={"factorial": "allow", "add": "allow"})' in tools
    done = llm_do("run", project, "--model", "test", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == '{"factorial":1,"add":0.0}'  # TestModel calls each tool with zeros


@pytest.mark.parametrize("json_output", [False, True])
def test_check_warns_about_a_path_that_moved_in_the_package_and_names_the_new_one(
    tmp_path: Path, json_output: bool
) -> None:
    """Not the earlier llm-do's API: today's llm-do's own paths, deprecated aliases now (docs/migrating.md)."""
    (tmp_path / "tools.py").write_text(
        "from pydantic_ai.toolsets import FunctionToolset\n"
        "from llm_do.attachments import Attachment\n"
        "from llm_do.run import RunResult\n"
        "import llm_do.policy\n\n"
        "files = FunctionToolset()\n"
    )
    (tmp_path / "main.worker").write_text("---\nmodel: test\ntoolsets: [files]\n---\nHi.\n")
    done = llm_do("check", tmp_path, *(["--json"] if json_output else []))
    assert done.returncode == 0, done.stdout + done.stderr
    tools = tmp_path / "tools.py"
    expected = [
        f"{tools}:2: from llm_do.attachments import Attachment: llm_do.attachments is deprecated; "
        "import Attachment from llm_do",
        f"{tools}:3: from llm_do.run import RunResult: llm_do.run no longer gives RunResult; "
        "import RunResult from llm_do.results",
        f"{tools}:4: import llm_do.policy: llm_do.policy is deprecated; import from llm_do.approvals",
    ]
    if json_output:
        document = json.loads(done.stdout)
        assert document["ok"] is True and "problems" not in document
        assert [f"{w['file']}:{w['line']}: {w['message']}" for w in document["warnings"]] == expected
    else:
        assert [line.removeprefix("warning: ") for line in done.stderr.splitlines() if line.startswith("warning:")] == (
            expected
        )
        assert "the earlier llm-do" not in done.stderr


# -- a design-era project: .worker files with project.json ------------------------------------------------------


def test_check_names_the_design_era_keys_and_their_replacements(tmp_path: Path) -> None:
    project = copy("summarizer", tmp_path)
    done = llm_do("check", project)
    assert done.returncode == 1
    assert "main.worker:3: 'entry' is a key of the earlier llm-do" in done.stderr
    assert 'entry = "NAME" in project.toml' in done.stderr
    assert "summarizer.worker:4: 'schema_in_ref' is a key of the earlier llm-do: today's key is input:" in done.stderr
    assert "llm-do: 2 problems found" in done.stderr


def test_migrate_dry_run_prints_a_diff_and_changes_nothing(tmp_path: Path) -> None:
    project = copy("summarizer", tmp_path)
    before = files(project)
    done = llm_do("migrate", project)
    assert done.returncode == 0, done.stderr
    for line in (
        "--- a/main.worker",
        "-entry: true",
        "-  - filesystem_project",
        "+  - filesystem",
        "-schema_in_ref: schemas.py:SummarizerInput",
        "+input: schemas.py:SummarizerInput",
        "+++ b/project.toml",
        '+entry = "main"',
        '+input = "sample_input.txt"',
        '+approval_mode = "approve_all"',
        "+max_depth = 2",  # one less: the earlier llm-do ran the entry agent at depth 1
        "--- a/project.json",
    ):
        assert f"\n{line}\n" in f"\n{done.stdout}", line
    assert "pass --write to apply" in done.stderr
    assert files(project) == before


def test_migrate_write_gives_a_project_that_checks_and_runs(tmp_path: Path) -> None:
    project = copy("summarizer", tmp_path)
    done = llm_do("migrate", project, "--write")
    assert done.returncode == 0, done.stderr
    assert not (project / "project.json").exists()
    assert "entry: true" not in (project / "main.worker").read_text()
    check = llm_do("check", project)
    ok, *ungated = check.stdout.splitlines()
    assert ok == "ok: 2 entries (main, summarizer); default entry: main", check.stderr
    # reads run without asking, as in the earlier project; nothing that writes is among them
    assert [line.split(" runs without")[0] for line in ungated] == [
        "ungated: filesystem.read_text (main)",
        "ungated: filesystem.list_dir (main)",
        "ungated: filesystem.glob (main)",
        "ungated: summarizer.summarizer (main)",
        "ungated: filesystem_readonly.read_text (summarizer)",
        "ungated: filesystem_readonly.list_dir (summarizer)",
        "ungated: filesystem_readonly.glob (summarizer)",
    ]
    run = llm_do("run", project, "--model", "test", "--json")
    assert run.returncode == 0, run.stderr
    [main] = json.loads(run.stdout)["calls"]
    assert [call["entry"] for call in main["calls"]] == ["summarizer"]
    assert llm_do("migrate", project).stderr.strip() == "llm-do: nothing to migrate"


def test_migrate_renames_agent_files_and_writes_agent_approvals_into_callers(tmp_path: Path) -> None:
    project = copy("greeter", tmp_path)
    done = llm_do("migrate", project)
    assert "rename from main.agent\nrename to main.worker\n" in done.stdout
    assert llm_do("migrate", project, "--write").returncode == 0
    assert sorted(files(project)) == ["main.worker", "polisher.worker", "project.toml"]
    assert "approvals:\n  polisher:\n    attachments: ask\n---\n" in (project / "main.worker").read_text()
    assert llm_do("check", project).returncode == 0
    assert llm_do("run", project, "--model", "test").returncode == 0


def test_migrate_translates_server_side_tools_into_native_tools(tmp_path: Path) -> None:
    project = copy("greeter", tmp_path)
    (project / "polisher.agent").write_text(
        "---\nname: polisher\nserver_side_tools:\n  - tool_type: web_search\n    max_uses: 3\n---\nPolish.\n"
    )
    check = llm_do("check", project)
    assert "polisher.agent:3: 'server_side_tools' is a key of the earlier llm-do: today's key is native_tools" in (
        check.stderr
    )
    assert llm_do("migrate", project, "--write").returncode == 0
    assert "native_tools:\n  web_search:\n    max_uses: 3\n" in (project / "polisher.worker").read_text()
    assert llm_do("check", project, "--model", "test").returncode == 0


# -- what check never calls ok --------------------------------------------------------------------------------


def test_both_project_files_are_an_error_naming_both(tmp_path: Path) -> None:
    project = copy("greeter", tmp_path)
    (project / "project.toml").write_text('entry = "main"\n')
    done = llm_do("check", project)
    assert done.returncode == 1
    assert f"both {project / 'project.toml'} and {project / 'project.json'} are project files" in done.stderr


@pytest.mark.parametrize("json_output", [False, True])
def test_check_is_not_ok_when_it_loaded_nothing(tmp_path: Path, json_output: bool) -> None:
    (tmp_path / "notes.txt").write_text("nothing to run here\n")
    done = llm_do("check", tmp_path, *(["--json"] if json_output else []))
    assert done.returncode == 1
    if json_output:
        document = json.loads(done.stdout)
        assert document["ok"] is False and "has no entries" in document["problems"][0]["message"]
    else:
        assert "the project has no entries" in done.stderr and "ok:" not in done.stdout


def test_check_reports_agent_files_it_leaves_out_or_does_not_understand(tmp_path: Path) -> None:
    project = copy("greeter", tmp_path)
    manifest = json.loads((project / "project.json").read_text())
    manifest["agent_files"] = ["main.agent"]
    manifest["runtime"]["agent_attachments_require_approval"] = False
    (project / "project.json").write_text(json.dumps(manifest))
    (project / "main.agent").write_text("---\nname: main\n---\nGreet.\n")
    (project / "helper.agent.md").write_text("---\nmodel: test\ntoolsets: []\n---\nHelp.\n")
    done = llm_do("check", project, "--json")
    assert done.returncode == 1
    problems = {Path(p["file"]).name: p["message"] for p in json.loads(done.stdout)["problems"]}
    assert "an agent file the project leaves out" in problems["polisher.agent"]
    assert "rename it to helper.worker" in problems["helper.agent.md"]


def test_every_problem_is_reported_in_one_pass(tmp_path: Path) -> None:
    (tmp_path / "project.toml").write_text('entry = "mian"\nworker = ["*.worker"]\n')
    (tmp_path / "broken.py").write_text("import no_such_module_anywhere\n")
    (tmp_path / "also_broken.py").write_text("x = 1\nraise RuntimeError('at import')\n")
    (tmp_path / "main.worker").write_text("---\ntoolsets: [nope]\n---\nHi.\n")
    done = llm_do("check", tmp_path, "--json")
    assert done.returncode == 1
    found = {(Path(p["file"]).name, p["line"]) for p in json.loads(done.stdout)["problems"]}
    assert {
        ("project.toml", 1),
        ("project.toml", 2),
        ("broken.py", 1),
        ("also_broken.py", 2),
        ("main.worker", 2),
    } <= found


@pytest.mark.parametrize("json_output", [False, True])
def test_a_worker_file_the_project_leaves_out_is_reported_beside_its_other_problems(
    tmp_path: Path, json_output: bool
) -> None:
    (tmp_path / "project.toml").write_text('workers = ["main.worker"]\n')
    (tmp_path / "main.worker").write_text("---\ntoolsets: [nope]\n---\nHi.\n")
    (tmp_path / "helper.worker").write_text("---\nmodel: test\n---\nHelp.\n")
    (tmp_path / "notes.md").write_text("---\nmodel: test\n---\nLooks like a worker.\n")
    done = llm_do("check", tmp_path, *(["--json"] if json_output else []))
    assert done.returncode == 1
    if json_output:
        found = [(Path(p["file"]).name, p["message"]) for p in json.loads(done.stdout)["problems"]]
    else:
        lines = done.stderr.splitlines()
        assert lines[-1] == "llm-do: 3 problems found", done.stderr
        found = [(Path(line.split(":")[0]).name, line.split(": ", 1)[1]) for line in lines[:-1]]
    assert [(name, message.split(":")[0].split(" (")[0]) for name, message in sorted(found)] == [
        ("helper.worker", "an agent file the project leaves out"),
        ("main.worker", "unknown toolset 'nope'"),
        ("notes.md", "looks like an agent file"),
    ]


def test_check_notes_a_project_file_that_approves_every_call_and_the_setting_wins(tmp_path: Path) -> None:
    project = copy("greeter", tmp_path)
    done = llm_do("check", project)
    assert "note: project.json sets approval_mode approve_all" in done.stderr
    assert json.loads(llm_do("check", project, "--json").stdout)["approval_mode"] == "approve_all"
    edit_manifest(project, agent_calls_require_approval=True)
    asked = llm_do("run", project, "--model", "test", env={"LLM_DO_APPROVAL_MODE": "prompt"})
    assert asked.returncode == 2 and "pass --approve-all or --reject-all" in asked.stderr
    assert "approval_mode" not in json.loads(
        llm_do("check", project, "--json", env={"LLM_DO_APPROVAL_MODE": "prompt"}).stdout
    )


def test_a_migration_that_fails_while_writing_leaves_the_project_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llm_do.project import migrate

    project = copy("greeter", tmp_path)
    before = files(project)
    plan = migrate.plan_migration(project)
    assert len(plan.changes) == 4
    written: list[str] = []
    real = os.fdopen

    def failing_fdopen(fd: int, mode: str, **options: Any) -> IO[str]:
        if len(written) == 2:
            raise OSError(28, "No space left on device")
        written.append(mode)
        return real(fd, mode, **options)

    monkeypatch.setattr(os, "fdopen", failing_fdopen)
    with pytest.raises(OSError, match="No space left"):
        migrate.apply_migration(plan)
    assert files(project) == before  # no new file, no temporary file left, nothing removed
    monkeypatch.undo()
    migrate.apply_migration(plan)
    assert sorted(files(project)) == ["main.worker", "polisher.worker", "project.toml"]


def test_migrate_writes_entry_args_for_an_input_model_as_a_table(tmp_path: Path) -> None:
    import tomllib

    project = copy("greeter", tmp_path)
    manifest = json.loads((project / "project.json").read_text())
    manifest["entry"]["args"] = {"input": "Hi", "tone": 'warm "and" kind', "count": 2}
    (project / "project.json").write_text(json.dumps(manifest))
    (project / "schemas.py").write_text(
        "from pydantic import BaseModel\n\n\nclass Greeting(BaseModel):\n"
        "    input: str\n    tone: str\n    count: int\n"
    )
    main = project / "main.agent"  # the entry takes the table: the migrated project checks
    main.write_text(main.read_text().replace("toolsets:", "input_model_ref: schemas.py:Greeting\ntoolsets:", 1))
    done = llm_do("migrate", project, "--write")
    assert done.returncode == 0, done.stderr
    written = tomllib.loads((project / "project.toml").read_text())
    assert written["input"] == {"input": "Hi", "tone": 'warm "and" kind', "count": 2}
    assert (written["entry"], written["workers"], written["modules"]) == (
        "main",
        ["main.worker", "polisher.worker"],
        [],
    )


def test_migrate_lists_instructions_that_name_the_earlier_filesystem_tools(tmp_path: Path) -> None:
    project = copy("summarizer", tmp_path)
    worker = project / "summarizer.worker"
    worker.write_text(worker.read_text() + "Read the range with read_file, then\nlist_files if the path is a folder.\n")
    done = llm_do("migrate", project)
    assert done.returncode == 1
    assert (
        f"{worker}:9: the instructions name the earlier filesystem tools (list_files, read_file, first on this line)"
        in done.stderr
    )
    assert "read_file is read_text" in done.stderr and "list_files is list_dir or glob" in done.stderr


def test_project_toml_approval_mode_and_max_depth_are_checked_with_their_lines(tmp_path: Path) -> None:
    (tmp_path / "main.worker").write_text("---\nmodel: test\n---\nHi.\n")
    (tmp_path / "project.toml").write_text('approval_mode = "sometimes"\nmax_depth = -1\n')
    done = llm_do("check", tmp_path)
    assert done.returncode == 1
    assert "toml:1: approval_mode must be one of prompt, approve_all, reject_all, got 'sometimes'" in done.stderr
    assert "project.toml:2: max_depth must be 0 or more, got -1" in done.stderr


# -- a project.json migrate cannot read whole -----------------------------------------------------------------

UNREADABLE_MANIFESTS = {
    "not JSON": ('{"agent_files": ["main.agent", "polisher.agent",]}', "project.json:1: not valid JSON"),
    "not an object": ('["main.agent", "polisher.agent"]', "project.json: project.json must be a JSON object"),
    "files not a list": ('{"agent_files": "main.agent"}', "project.json:1: agent_files must be a list"),
    "a missing file": (
        '{"agent_files": ["main.agent", "polisher.agnet"]}',
        "project.json:1: agent_files: 'polisher.agnet' is not a file",
    ),
    "a bad max_depth": (
        '{"agent_files": ["main.agent", "polisher.agent"],\n "runtime": {"max_depth": "five"}}',
        "project.json:2: max_depth must be 1 or more, got 'five'",
    ),
}


@pytest.mark.parametrize("case", UNREADABLE_MANIFESTS)
def test_migrate_leaves_a_project_json_it_cannot_read_whole_as_it_was(case: str, tmp_path: Path) -> None:
    """Translating what could be read would drop the rest with the file it came from: nothing is written."""
    project = copy("greeter", tmp_path)
    text, problem = UNREADABLE_MANIFESTS[case]
    (project / "project.json").write_text(text)
    before = files(project)
    for flags in ((), ("--write",)):
        done = llm_do("migrate", project, *flags)
        assert done.returncode == 1, done.stderr
        assert done.stdout == ""
        assert problem in done.stderr
        assert "fix them, then migrate again" in done.stderr
        assert "llm-do: nothing to migrate" not in done.stderr
        assert files(project) == before


def test_a_project_json_that_is_not_json_leaves_out_no_agent_file(tmp_path: Path) -> None:
    """As with a project.toml that is not TOML, the directory's agent files are the project's meanwhile."""
    project = copy("greeter", tmp_path)
    (project / "project.json").write_text('{"agent_files": ["main.agent", "polisher.agent",]}')
    done = llm_do("check", project, "--json")
    assert done.returncode == 1
    problems = [(Path(p["file"]).name, p["message"]) for p in json.loads(done.stdout)["problems"]]
    assert [name for name, _ in problems] == ["project.json"], problems
    assert problems[0][1].startswith("not valid JSON")


# -- the diff of a dry run ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["greeter", "calculator", "summarizer"])
def test_the_diff_of_a_dry_run_applies_with_git_as_write_would(name: str, tmp_path: Path) -> None:
    """The dry run's diff is what --write does: `git apply` of it (renames, new and removed files, a last line
    without a newline) gives the same files."""
    written, applied = copy(name, tmp_path / "written"), copy(name, tmp_path / "applied")
    for project in (written, applied):  # json.dumps ends the file without a newline
        (project / "project.json").write_text(json.dumps(json.loads((project / "project.json").read_text())))
    diff = llm_do("migrate", applied).stdout
    llm_do("migrate", written, "--write")
    done = subprocess.run(["git", "apply", "-"], input=diff, cwd=applied, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert files(applied) == files(written)


@pytest.mark.parametrize("listed", [False, True])
def test_migrate_never_renames_an_agent_file_over_a_worker_file_of_the_same_name(listed: bool, tmp_path: Path) -> None:
    """`polisher.agent` and `polisher.worker` side by side, the second one a worker of the project or not: the
    rename would replace the worker file. It is left to do by hand, and the rest is migrated."""
    project = copy("greeter", tmp_path)
    (project / "polisher.worker").write_text("---\nname: polisher2\n---\nPolish twice.\n")
    if listed:
        manifest = json.loads((project / "project.json").read_text())
        manifest["agent_files"].append("polisher.worker")
        (project / "project.json").write_text(json.dumps(manifest))
    done = llm_do("migrate", project, "--write")
    assert done.returncode == 1
    assert f"{project / 'polisher.agent'}: polisher.worker exists already: rename one of them" in done.stderr
    assert (project / "polisher.worker").read_text() == "---\nname: polisher2\n---\nPolish twice.\n"
    assert (project / "polisher.agent").is_file() and (project / "main.worker").is_file()


def test_migrate_keeps_the_modes_of_the_files_it_rewrites_and_renames(tmp_path: Path) -> None:
    """A file written in place of another keeps its mode (who may read it, whether it runs); a new one gets the
    mode any new file gets (the umask's)."""
    project = copy("calculator", tmp_path)
    (project / "main.agent").chmod(0o644)
    (project / "tools.py").chmod(0o755)
    umask = os.umask(0o022)
    os.umask(umask)
    done = llm_do("migrate", project, "--write")
    assert done.returncode == 0, done.stderr
    modes = {name: (project / name).stat().st_mode & 0o7777 for name in ("main.worker", "tools.py", "project.toml")}
    assert modes == {"main.worker": 0o644, "tools.py": 0o755, "project.toml": 0o666 & ~umask}


@pytest.mark.parametrize(
    ("name", "rewritten", "renamed"), [("greeter", "main", "polisher"), ("calculator", "tools.py", "main")]
)
def test_migrate_keeps_the_line_endings_of_files_written_on_windows(
    name: str, rewritten: str, renamed: str, tmp_path: Path
) -> None:
    """Files whose lines end in CRLF keep them, what migrate adds included; a file only renamed is unchanged, and
    the dry run's diff still applies with git."""
    written, applied = copy(name, tmp_path / "written"), copy(name, tmp_path / "applied")
    for project in (written, applied):
        for path in project.iterdir():
            path.write_bytes(path.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    before = (written / f"{renamed}.agent").read_bytes()
    done = llm_do("migrate", written, "--write")
    assert done.returncode == 0, done.stderr
    rewritten_file = written / (rewritten if rewritten.endswith(".py") else f"{rewritten}.worker")
    text = rewritten_file.read_bytes()
    assert text.count(b"\n") == text.count(b"\r\n") > 3, text
    assert (written / f"{renamed}.worker").read_bytes() == before  # nothing in it to translate: only renamed
    dry = subprocess.run(command("migrate", applied), capture_output=True, env=environment())  # bytes: CRs kept
    applying = subprocess.run(["git", "apply", "-"], input=dry.stdout, cwd=applied, capture_output=True)
    assert applying.returncode == 0, applying.stderr
    assert files(applied) == files(written)


def test_migrate_renames_the_agent_files_project_toml_names_there_too(tmp_path: Path) -> None:
    """A project.toml that names .agent files (they load today) names the renamed .worker files after migrate, the
    rest of it as it was; the project checked before and checks after."""
    project = copy("greeter", tmp_path)
    (project / "project.json").unlink()
    toml = '# the greeter\nworkers = [\n  "main.agent",  # greets\n  \'polisher.agent\',\n]\nentry = "main"\n'
    (project / "project.toml").write_text(toml)
    assert llm_do("check", project).returncode == 0
    done = llm_do("migrate", project, "--write")
    assert done.returncode == 0, done.stderr
    assert (project / "project.toml").read_text() == toml.replace(".agent", ".worker")
    assert sorted(files(project)) == ["main.worker", "polisher.worker", "project.toml"]
    (project / "main.worker").rename(project / "main.agent")  # a pattern: left to do by hand, with a note
    (project / "project.toml").write_text('workers = ["*.agent", "polisher.worker"]\nentry = "main"\n')
    pattern = llm_do("migrate", project)
    assert pattern.returncode == 1
    assert "project.toml: project.toml names .agent files that are renamed to .worker, by a pattern or a string " in (
        pattern.stderr
    )
    assert "does not rewrite ('*.agent'): write it for the .worker files" in pattern.stderr
