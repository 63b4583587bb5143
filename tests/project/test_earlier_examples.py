"""The earlier llm-do's 41 example projects (tests/project/earlier_projects/zby-llm-do, as their authors left them):
each is migrated, loaded as `llm-do check` loads it, and run offline under reject-all and approve-all, where each
tool call must run, ask or be refused as it did in the earlier llm-do.

What the earlier llm-do did with a call is read here from the original project, not from what `migrate` wrote: a
tool of a Python toolset ran when the toolset's `set_toolset_approval_config` pre-approved it and asked otherwise;
the earlier built-in toolsets ran and asked as the tables below say; a call to an agent ran.
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from llm_do import AgentEntry
from llm_do.project import Project, ProjectError, load_project
from llm_do.project.migrate import apply_migration, plan_migration
from llm_do.project.strays import stray_problems

EXAMPLES = Path(__file__).with_name("earlier_projects") / "zby-llm-do"
PROJECTS = [
    (commit.name, project.name)
    for commit in sorted(EXAMPLES.iterdir())
    if commit.is_dir()
    for project in sorted(commit.iterdir())
    if project.is_dir()
]

NEEDS_A_PACKAGE = {  # each imports a package of its own choice at import time, and names it
    ("8d2109a", "pitchdeck_eval_code_entry"): "python-slugify",
    ("8d2109a", "pitchdeck_eval_direct"): "python-slugify",
    ("8d2109a", "pitchdeck_eval_stabilized"): "python-slugify",
    ("8d2109a", "rlm_repl"): "RestrictedPython",
    ("d4de36a", "pitchdeck_eval_code_entry"): "python-slugify",
    ("d4de36a", "pitchdeck_eval_direct"): "python-slugify",
    ("d4de36a", "pitchdeck_eval_stabilized"): "python-slugify",
    ("d4de36a", "rlm_repl"): "RestrictedPython",
}
SCRIPTS = {  # no project: a script run with `python run.py`, on the earlier llm-do's programmatic API and UI
    ("8d2109a", "undeclared_tool_test"): "run.py:20: from llm_do.runtime import AgentSpec",
}

RAN, ASKED, REFUSED = "ran", "asked", "refused"

FILESYSTEM = {"read_text": RAN, "list_dir": RAN, "glob": RAN, "write_text": ASKED}
"""`filesystem_project` (today's `filesystem`): reads ran, writes asked (read_file, list_files; write_file)."""
BUILTIN_CALLS: dict[str, list[tuple[ToolCallPart, str]]] = {
    "filesystem": [
        (ToolCallPart("read_text", {"path": "project.toml"}), RAN),
        (ToolCallPart("list_dir", {"path": "."}), RAN),
        (ToolCallPart("glob", {"pattern": "*.worker"}), RAN),
        (ToolCallPart("write_text", {"path": "written.txt", "text": "x"}), ASKED),
    ],
    "shell_readonly": [
        (ToolCallPart("run", {"command": ["ls"]}), RAN),
        (ToolCallPart("run", {"command": ["find", ".", "-name", "nothing", "-delete"]}), ASKED),
        (ToolCallPart("run", {"command": ["rm", "project.toml"]}), REFUSED),
    ],
    "shell_file_ops": [
        (ToolCallPart("run", {"command": ["ls"]}), RAN),
        (ToolCallPart("run", {"command": ["mv", "project.toml", "project.toml"]}), ASKED),
        (ToolCallPart("run", {"command": ["mkdir", "new"]}), REFUSED),
    ],
    "dynamic_agents": [
        (ToolCallPart("agent_create", {"name": "helper", "instructions": "Help."}), ASKED),
        (ToolCallPart("agent_call", {"agent": "helper", "input": "Go."}), RAN),
    ],
}
TOOL_ARGS: dict[str, dict[str, Any]] = {  # arguments that keep each Python tool offline
    "factorial": {"n": 5},
    "fibonacci": {"n": 10},
    "add": {"a": 1, "b": 2},
    "multiply": {"a": 2, "b": 3},
    "format_output": {"data": "a\tb"},
    "calculate_stats": {"numbers": "1, 2, 3"},
    "send_notification": {"message": "hi"},
    "sanitize_filename": {"name": "Meeting Notes (2).docx"},
    "analyze_dataset": {"path": "input/monthly_metrics.csv"},
    "deep_research": {"question": "Why is the sky blue?"},
    "search_web": {"query": ""},  # an empty query returns no results without searching
    "fetch_page": {"url": "http://127.0.0.1:9/"},  # refused at once; the tool returns an empty text
    "generate_slug": {"topic": "LLM agents"},
    "kb_read": {"path": "no-such-note.md"},
    "snapshot": {"text": "A pasted note.", "title": "note"},  # saved as it is, nothing fetched
}
NOT_RUN_HERE = {"fetch_notifications": "runs the gh program", "kb_search": "runs the qmd program"}
AGENT_INPUTS = {  # the agents that take an input model: its fields
    "summarizer": {"path": "sample_input.txt", "start": 0, "end": 40},
    "planner": {"task": "Plan a workshop."},
    "analyze_dataset": {"path": "input/monthly_metrics.csv"},
}


def copy(commit: str, name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(EXAMPLES / commit / name, target)
    return target


def checked(root: Path) -> Project:
    """The project at `root` loaded as `llm-do check` loads it: models need not be given, their packages are
    looked for (a missing one is to install, no problem), and a worker file it leaves out is a problem."""
    project = load_project(root, models_required=False, models_installed=True)
    assert project.layout is not None
    problems = stray_problems(project.layout, project.entries)
    if problems:
        raise ProjectError(problems)
    return project


def migrated(commit: str, name: str, tmp_path: Path) -> Path:
    root = copy(commit, name, tmp_path)
    apply_migration(plan_migration(root))
    return root


@pytest.mark.parametrize(("commit", "name"), PROJECTS, ids=[f"{c}-{n}" for c, n in PROJECTS])
def test_an_earlier_example_loads_once_migrated_unless_it_needs_a_package_it_names(
    commit: str, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    root = migrated(commit, name, tmp_path)
    if (commit, name) in NEEDS_A_PACKAGE or (commit, name) in SCRIPTS:
        with pytest.raises(ProjectError) as raised:
            checked(root)
        named = NEEDS_A_PACKAGE.get((commit, name)) or SCRIPTS[(commit, name)]
        assert named in str(raised.value)
        return
    project = checked(root)
    assert project.entries and project.default_entry in project.entries


def test_there_are_41_and_the_earlier_llm_do_loads_6_of_them_as_they_are(tmp_path: Path) -> None:
    assert len(PROJECTS) == 41
    loaded = []
    for commit, name in PROJECTS:
        try:
            checked(copy(commit, name, tmp_path / commit))
        except ProjectError:
            continue
        loaded.append(f"{commit}-{name}")
    # design-era projects (d4de36a) use earlier frontmatter keys or module API; six of the head's load as they are
    assert loaded == [
        "8d2109a-approvals_demo",
        "8d2109a-bootstrapping",
        "8d2109a-code_analyzer",
        "8d2109a-greeter",
        "8d2109a-pitchdeck_eval",
        "8d2109a-whiteboard_planner",
    ]


# -- offline, tool by tool ------------------------------------------------------------------------------------

RUNNABLE = [item for item in PROJECTS if item not in NEEDS_A_PACKAGE and item not in SCRIPTS]


def earlier_python_tools(original: Path) -> dict[str, dict[str, str]]:
    """Each Python toolset of the original project (by the name its registry gave it): its tools, and what the
    earlier llm-do did with a call (ran when `set_toolset_approval_config` pre-approved it, else asked)."""
    found: dict[str, dict[str, str]] = {}
    for path in original.glob("*.py"):
        tree = ast.parse(path.read_text())
        factories = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
        registered: dict[str, str] = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                target, value = node.targets[0].id, node.value
                if target == "TOOLSETS" and isinstance(value, ast.Dict):
                    registered.update(
                        {ast.literal_eval(k): v.id for k, v in zip(value.keys, value.values, strict=True)}  # type: ignore[arg-type,attr-defined]
                    )
                elif isinstance(value, ast.Call) and getattr(value.func, "id", None) == "ToolsetSpec":
                    registered[target] = value.keywords[0].value.id  # type: ignore[attr-defined]
        for toolset, factory in registered.items():
            tools: dict[str, str] = {}
            for node in ast.walk(factories[factory]):
                if isinstance(node, ast.FunctionDef) and node is not factories[factory]:
                    tools[node.name] = ASKED
                elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "tool" and node.args:
                    tools[node.args[0].id] = ASKED  # type: ignore[attr-defined]
            for node in ast.walk(factories[factory]):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "set_toolset_approval_config":
                    for tool, options in ast.literal_eval(node.args[1]).items():
                        tools[tool] = RAN if options.get("pre_approved") else ASKED
            found[toolset] = tools
    return found


def calls_of(project: Project, original: Path) -> list[tuple[ToolCallPart, str]]:
    """One call of each tool the default entry's worker has, with what the earlier llm-do did with it."""
    python = earlier_python_tools(original)
    calls: list[tuple[ToolCallPart, str]] = []
    entry = project.default_entry
    assert entry is not None
    for toolset in project.runtime.toolsets_of(entry):
        name = project.declared_toolset(toolset)
        if name in BUILTIN_CALLS:
            calls.extend(BUILTIN_CALLS[name])
        elif name in python:
            for tool, outcome in python[name].items():
                if tool not in NOT_RUN_HERE:
                    calls.append((ToolCallPart(tool, TOOL_ARGS[tool]), outcome))
        elif name in project.entries:  # an agent called as a tool
            calls.append((ToolCallPart(name, AGENT_INPUTS.get(name, {"input": "Go."})), RAN))
        else:
            raise AssertionError(f"no calls known for toolset {name!r}")
    return calls


def scripted(calls: list[ToolCallPart]) -> FunctionModel:
    """A model that makes `calls` one response at a time, then answers."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        made = sum(isinstance(message, ModelResponse) for message in messages)
        if made < len(calls):
            return ModelResponse(parts=[calls[made]])
        return ModelResponse(parts=[TextPart("Done.")])

    return FunctionModel(respond)


def answering() -> FunctionModel:
    return FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("Done.")]))


def outcomes(messages: list[ModelMessage]) -> list[str]:
    found = []
    for message in messages:
        for part in message.parts if isinstance(message, ModelRequest) else ():
            if isinstance(part, ToolReturnPart):
                text = str(part.content)
                found.append(
                    ASKED
                    if "was not run: it needs approval" in text
                    else REFUSED
                    if "was not run: denied by policy" in text
                    else RAN
                )
    return found


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for variable in ("SERPAPI_API_KEY", "LLM_DO_MODEL", "LLM_DO_APPROVAL_MODE"):
        monkeypatch.delenv(variable, raising=False)
    yield


async def run_offline(root: Path, calls: list[ToolCallPart], mode: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("LLM_DO_APPROVAL_MODE", mode)
    project = load_project(root, models_required=False)
    with ExitStack() as stack:
        for name, entry in project.entries.items():
            if isinstance(entry, AgentEntry):
                model = scripted(calls) if name == project.default_entry else answering()
                stack.enter_context(entry.agent.override(model=model))
        async with project:
            return await project.run(input_data=project.default_input or "Hello.")


@pytest.mark.parametrize(("commit", "name"), RUNNABLE, ids=[f"{c}-{n}" for c, n in RUNNABLE])
async def test_a_ported_example_runs_offline_and_asks_where_the_original_asked(
    commit: str, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offline: None
) -> None:
    monkeypatch.chdir(tmp_path)
    root = migrated(commit, name, tmp_path / "rejected")
    again = migrated(commit, name, tmp_path / "approved")
    calls = calls_of(load_project(root, models_required=False), EXAMPLES / commit / name)
    rejected = await run_offline(root, [call for call, _ in calls], "reject_all", monkeypatch)
    approved = await run_offline(again, [call for call, _ in calls], "approve_all", monkeypatch)
    if not rejected.messages:  # an @entry function: the agent it called ran
        assert [call.entry for call in rejected.calls[1:]] == ["main"] and not calls
        return
    assert outcomes(rejected.messages) == [outcome for _, outcome in calls]
    assert outcomes(approved.messages) == [REFUSED if outcome == REFUSED else RAN for _, outcome in calls]
