"""Loading projects: toolset names, schemas, models, containers, project.toml, errors together, running."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from pydantic import BaseModel
from pydantic_ai.models.test import TestModel

from llm_do import AgentEntry, RuntimeConfig
from llm_do.project import DeferredModel, Project, load_project
from llm_do.testing import ScriptedModel, answering, tool_call

from .project_files import problems, write

NOTES = """
from llm_do import ToolPolicy, Toolset, tool
from pydantic_ai import Tool
from pydantic_ai.toolsets import FunctionToolset

class NotesToolset(Toolset):
    default_policy = ToolPolicy()  # declared: its calls need no approval

    @tool
    def note(self, text: str) -> str:
        \"\"\"Keep a note.\"\"\"
        return f"noted {text}"

def shout(text: str) -> str:
    \"\"\"Shout a text.\"\"\"
    return text.upper()

loud = FunctionToolset([Tool(shout, metadata={"read_only": True})])  # declared read-only: it runs
"""


async def test_a_loaded_project_runs_end_to_end_with_workers_calling_workers(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "main.worker": """
                ---
                description: The front desk.
                toolsets: [helper, notes]
                ---
                You are the front desk.
            """,
            "helper.worker": """
                ---
                description: Shouts things.
                toolsets: [loud]
                ---
                You shout.
            """,
            "tools.py": NOTES,
        },
    )
    model = ScriptedModel(
        tool_call("helper", input="hello"),  # main asks helper ...
        tool_call("shout", text="hello"),  # ... which shouts
        "HELLO",  # helper's answer
        tool_call("note", text="done"),
        "all done",
    )
    async with load_project(tmp_path, model=model) as project:
        assert isinstance(project, Project)
        assert project.root == tmp_path  # pytest's tmp_path is already resolved
        assert set(project.entries) == {"helper", "main"} and project.default_entry == "main"
        assert project.workers["helper"].description == "Shouts things."
        result = await project.runtime.run("main", "Say hello")
    assert result.output == "all done"
    assert [record.entry for record in result.calls] == ["main", "helper"]


async def test_toolset_names_resolve_to_builtins_providers_project_toolsets_workers_and_itself(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "main.worker": "---\ntoolsets: [filesystem_readonly, notes, loud, helper, main]\n---\nGo.\n",
            "helper.worker": "---\ndescription: Helps.\n---\nHelp.\n",
            "tools.py": NOTES,
            "data.txt": "project data\n",
        },
    )
    seen: list[tuple[str, ...]] = []
    model = ScriptedModel(
        lambda turn: seen.append(turn.offered) or tool_call("read_text", path="data.txt"),  # type: ignore[func-returns-value]
        "read it",
    )
    async with load_project(tmp_path, model=model) as project:
        result = await project.runtime.run("main", "read")
    assert {"read_text", "note", "shout", "helper", "main"} <= set(seen[0])
    assert result.output == "read it"
    assert "project data" in str(result.messages)  # the built-ins are rooted at the project directory


async def test_input_and_output_models_by_module_and_by_path(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "ask.worker": "---\ninput: schemas:Question\noutput: models/answer.py:Answer\n---\nAnswer.\n",
            "schemas.py": "from pydantic import BaseModel\nclass Question(BaseModel):\n    topic: str\n",
            "models/answer.py": "from pydantic import BaseModel\nclass Answer(BaseModel):\n    text: str\n",
        },
    )
    async with load_project(tmp_path, model=TestModel(custom_output_args={"text": "42"})) as project:
        entry = project.entries["ask"]
        assert isinstance(entry, AgentEntry) and entry.schema_in is not None
        assert entry.schema_in.__name__ == "Question"
        result = await project.runtime.run("ask", {"topic": "life"})
    assert isinstance(result.output, BaseModel) and type(result.output).__name__ == "Answer"
    assert result.output.model_dump() == {"text": "42"}


def test_bad_references_are_reported_at_their_lines(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "ask.worker": "---\nmodel: test\ninput: schemas:Missing\noutput: nowhere.py:Answer\n---\nGo.\n",
            "other.worker": "---\nmodel: test\noutput: schemas:helper\n---\nGo.\n",
            "schemas.py": "def helper() -> None: ...\n",
        },
    )
    found = problems(tmp_path)
    assert [(name, line) for name, line, _ in found] == [("ask.worker", 3), ("ask.worker", 4), ("other.worker", 3)]
    assert "schemas has no attribute 'Missing'" in found[0][2]
    assert "nowhere.py is not a file" in found[1][2]
    assert "not a pydantic model class" in found[2][2]


def test_every_problem_of_every_file_is_reported_together(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "a.worker": "---\nmodel: test\ntoolsets: [notes, sqll]\n---\nGo.\n",
            "b.worker": "---\ncolour: red\n---\nGo.\n",
            "c.worker": "---\ntoolsets: [shell]\n---\nNo model.\n",
            "broken.py": "x = 1\nraise RuntimeError('boom')\n",
        },
    )
    found = problems(tmp_path)
    assert [(name, line) for name, line, _ in found] == [
        ("a.worker", 3),
        ("a.worker", 3),
        ("b.worker", 1),
        ("b.worker", 2),
        ("broken.py", 2),
        ("c.worker", 1),
    ]
    assert "unknown toolset 'notes'" in found[0][2]
    assert "unknown toolset 'sqll': did you mean 'sql'?" in found[1][2]
    assert "worker 'b' has no model" in found[2][2]  # found although the file also has an unknown key
    assert "unknown key 'colour'" in found[3][2]
    assert "RuntimeError: boom" in found[4][2]
    assert "worker 'c' has no model" in found[5][2]
    assert "--model" in found[5][2] and "LLM_DO_MODEL" in found[5][2]


def test_a_worker_without_a_model_given_one_when_loaded_or_only_checked_loads_without_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path, {"a.worker": "Go.\n"})
    with caplog.at_level(logging.WARNING, logger="llm_do"):
        load_project(tmp_path, model="test")  # --model: the worker's agent gets it
        load_project(tmp_path, models_required=False)  # llm-do check, which notes workers without a model itself
    assert caplog.records == []


def test_an_unknown_key_does_not_hide_the_files_other_problems(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "a.worker": "---\nmodel: test\ncompatible_models: ['openai:*']\ntoolset: [sql]\ntoolsets: [nope]\n---\n",
            "b.worker": "---\nmodel: gpt\ncolour: red\n---\nGo.\n",
        },
    )
    found = problems(tmp_path)
    assert [(name, line) for name, line, _ in found] == [
        ("a.worker", 3),
        ("a.worker", 4),
        ("a.worker", 5),
        ("b.worker", 2),
        ("b.worker", 3),
    ]
    assert "model and compatible_models exclude each other" in found[0][2]
    assert "unknown key 'toolset': did you mean 'toolsets'?" in found[1][2]
    assert "unknown toolset 'nope'" in found[2][2]
    assert "'gpt' is not a provider:model name" in found[3][2]  # and no second problem saying it has no model
    assert "unknown key 'colour'" in found[4][2]


def test_model_selection_order_worker_then_argument_then_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, {"own.worker": "---\nmodel: anthropic:claude-x\n---\nGo.\n", "any.worker": "Go.\n"})
    monkeypatch.setenv("LLM_DO_MODEL", "openai:from-env")
    project = load_project(tmp_path, model="openai:from-arg")
    assert repr(_model(project, "own")) == "DeferredModel('anthropic:claude-x')"
    assert repr(_model(project, "any")) == "DeferredModel('openai:from-arg')"
    assert repr(_model(load_project(tmp_path), "any")) == "DeferredModel('openai:from-env')"
    config = RuntimeConfig(model="openai:from-config")
    assert repr(_model(load_project(tmp_path, config=config), "any")) == "DeferredModel('openai:from-config')"
    deferred = _model(project, "own")
    assert isinstance(deferred, DeferredModel) and not deferred.built  # no provider, no API key needed yet


def _model(project: Project, name: str) -> object:
    entry = project.entries[name]
    assert isinstance(entry, AgentEntry)
    return entry.agent.model


def test_compatible_models_check_the_model_given_at_load(tmp_path: Path) -> None:
    write(tmp_path, {"picky.worker": "---\ncompatible_models: ['openai:*', 'anthropic:claude-*']\n---\nGo.\n"})
    [(name, line, message)] = problems(tmp_path, model="test")
    assert (name, line) == ("picky.worker", 2)
    assert "needs a model matching 'openai:*', 'anthropic:claude-*'" in message and "'test'" in message
    assert repr(_model(load_project(tmp_path, model="anthropic:claude-4"), "picky")) == (
        "DeferredModel('anthropic:claude-4')"
    )
    [(_, _, message)] = problems(tmp_path, model=TestModel())
    assert "'test:test'" in message  # a Model object is matched as system:model_name


async def test_a_project_with_its_own_container(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "containers.py": """
                from dependency_injector import providers
                from containers import AgentContainer
                from llm_do import Toolset, tool

                class Counter(Toolset):
                    def __init__(self, start: int) -> None:
                        self.start = start

                    @tool(read_only=True)
                    def count(self) -> int:
                        \"\"\"The start value.\"\"\"
                        return self.start

                class App(AgentContainer):
                    counter = providers.Factory(Counter, start=41)
            """,
            "main.worker": "---\ntoolsets: [counter]\n---\nCount.\n",
        },
    )
    model = ScriptedModel(tool_call("count"), "counted")
    async with load_project(tmp_path, model=model) as project:
        assert project.runtime.container is not None
        assert "counter" in project.runtime.container.providers and "sql" not in project.runtime.container.providers
        result = await project.runtime.run("main", "go")
    assert result.output == "counted"
    assert "41" in str(result.messages)
    # the built-ins are not offered by a container that does not declare them
    write(tmp_path, {"other.worker": "---\ntoolsets: [shell]\n---\nGo.\n"})
    [(_, line, message)] = problems(tmp_path, model="test")
    assert line == 2 and "unknown toolset 'shell'" in message


async def test_project_toml_names_files_default_entry_and_input(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "project.toml": 'workers = ["agents/*.worker"]\nmodules = ["lib/flows.py"]\nentry = "flow"\ninput = "hi"\n',
            "agents/echo.worker": "---\nmodel: test\n---\nEcho.\n",
            "ignored.worker": "---\nmodel: nope\n---\nnot loaded\n",
            "lib/flows.py": """
                from llm_do import entry

                @entry(toolsets=["echo"])
                async def flow(scope, text):
                    \"\"\"Calls echo.\"\"\"
                    return "flow got " + text
            """,
        },
    )
    async with load_project(tmp_path / "project.toml") as project:
        assert set(project.entries) == {"echo", "flow"}
        assert (project.default_entry, project.default_input) == ("flow", "hi")
        result = await project.run()
    assert result.output == "flow got hi"


def test_project_toml_problems_name_their_lines(tmp_path: Path) -> None:
    write(tmp_path, {"project.toml": 'workers = ["*.wkr"]\ncolour = "red"\n', "a.worker": "Go.\n"})
    found = problems(tmp_path)
    assert [(name, line) for name, line, _ in found] == [("project.toml", 1), ("project.toml", 2)]
    assert "'*.wkr' matches no file" in found[0][2] and "unknown key 'colour'" in found[1][2]
    write(tmp_path, {"project.toml": 'entry = "nobody"\n'})
    [(name, line, message)] = problems(tmp_path, model="test")
    assert (name, line) == ("project.toml", 1) and "default entry 'nobody'" in message


def test_a_worker_file_path_loads_its_directory_with_it_as_default(tmp_path: Path) -> None:
    write(tmp_path, {"a.worker": "Go.\n", "b.worker": "Go.\n"})
    project = load_project(tmp_path / "b.worker", model="test")
    assert project.default_entry == "b" and set(project.entries) == {"a", "b"}
    assert load_project(tmp_path, model="test").default_entry is None  # two entries, none called main


def test_project_modules_cannot_shadow_other_modules(tmp_path: Path) -> None:
    write(tmp_path, {"tools.py": NOTES, "json.py": "VALUE = 1\n", "a.worker": "---\ntoolsets: [notes]\n---\nGo.\n"})
    load_project(tmp_path, model="test")
    import json

    assert hasattr(json, "dumps")  # the project's json.py did not replace the standard one


def test_name_clashes_and_bad_toolset_classes_are_problems(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "notes.worker": "Go.\n",
            "main.worker": "---\ntoolsets: [needs_args]\n---\nGo.\n",
            "tools.py": NOTES + "\nclass NeedsArgs(Toolset):\n    def __init__(self, x: int) -> None: ...\n",
        },
    )
    found = problems(tmp_path, model="test")
    messages = " | ".join(message for _, _, message in found)
    assert "worker 'notes' has the name of the toolset in tools.py" in messages
    assert "unknown toolset 'needs_args': the toolset class NeedsArgs in tools.py needs arguments (x)" in messages


async def test_worker_approvals_override_the_toolset_policy_for_that_worker_only(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "tools.py": """
                from llm_do import Toolset, ToolPolicy, tool

                class Vault(Toolset):
                    default_policy = ToolPolicy(default="deny")

                    @tool
                    def open_vault(self) -> str:
                        \"\"\"Open the vault.\"\"\"
                        return "opened"
            """,
            "trusted.worker": "---\ntoolsets: [vault]\napprovals: {vault: {tools: {open_vault: allow}}}\n---\nGo.\n",
            "other.worker": "---\ntoolsets: [vault]\n---\nGo.\n",
        },
    )
    async with load_project(
        tmp_path, model=answering(lambda turn: tool_call("open_vault") if turn.step == 0 else "done")
    ) as project:
        trusted = await project.runtime.run("trusted", "open")
    async with load_project(
        tmp_path, model=answering(lambda turn: tool_call("open_vault") if turn.step == 0 else "done")
    ) as project:
        other = await project.runtime.run("other", "open")
    assert "opened" in str(trusted.messages)
    assert "opened" not in str(other.messages)
    write(tmp_path, {"trusted.worker": "---\ntoolsets: [vault]\napprovals:\n  vault: {tools: {close: allow}}\n---\n"})
    [(name, line, message)] = problems(tmp_path, model="test")
    assert (name, line) == ("trusted.worker", 4) and "toolset 'vault' has no tool 'close'" in message


def test_a_worker_replays_a_recording_and_a_missing_one_is_a_clear_problem(tmp_path: Path) -> None:
    from llm_do.models import Recording

    write(tmp_path, {"a.worker": "---\nmodel: replay:session.json\n---\nGo.\n"})
    [(_, line, message)] = problems(tmp_path)
    assert line == 2 and "session.json" in message
    Recording.from_script(["replayed answer"]).save(tmp_path / "session.json")

    async def run() -> str:
        async with load_project(tmp_path) as project:
            return str((await project.run("a", "hello")).output)

    assert asyncio.run(run()) == "replayed answer"


def test_openai_compatible_server_settings_are_validated_and_kept_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_do import InvalidSettings
    from llm_do.project import ProjectSettings, resolve_model

    monkeypatch.setenv("LLM_DO_OPENAI_BASE_URL", "localhost:8000")
    monkeypatch.setenv("LLM_DO_OPENAI_API_KEY", "sk-secret")
    with pytest.raises(InvalidSettings) as caught:
        ProjectSettings()
    assert "LLM_DO_OPENAI_BASE_URL='localhost:8000': expected a URL with a scheme" in str(caught.value)
    monkeypatch.setenv("LLM_DO_OPENAI_BASE_URL", "http://localhost:8000/v1")
    settings = ProjectSettings()
    assert "sk-secret" not in repr(settings)
    model = resolve_model("openai:local-model", root=Path("."), settings=settings.model_dump())
    assert isinstance(model, DeferredModel) and not model.built


def test_a_projects_own_container_leaves_the_server_settings_to_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`LLM_DO_OPENAI_*` are the project's settings, not the container's: a project whose container is a plain
    `AgentContainer` still sends `openai-chat:` models to that server, and a bad value is a problem naming it."""
    write(
        tmp_path,
        {
            "app.py": "from containers import AgentContainer\n\nclass App(AgentContainer):\n    pass\n",
            "ask.worker": "---\nmodel: openai-chat:qwen\n---\nAnswer.\n",
        },
    )
    monkeypatch.setenv("LLM_DO_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("LLM_DO_OPENAI_API_KEY", "sk-local")
    project = load_project(tmp_path)
    entry = project.entries["ask"]
    assert isinstance(entry, AgentEntry) and isinstance(entry.agent.model, DeferredModel)
    assert entry.agent.model.endpoint_setting == "LLM_DO_OPENAI_BASE_URL"
    assert str(entry.agent.model.wrapped.base_url) == "http://127.0.0.1:9/v1/"  # type: ignore[attr-defined]
    monkeypatch.setenv("LLM_DO_OPENAI_BASE_URL", "127.0.0.1:9")
    [(_, line, message)] = problems(tmp_path)
    assert line is None and message.startswith("invalid setting LLM_DO_OPENAI_BASE_URL='127.0.0.1:9': expected a URL")


def test_a_worker_file_that_cannot_be_read_says_what_to_do_about_it(tmp_path: Path) -> None:
    root = write(tmp_path / "desk", {"ok.worker": "---\nmodel: test\n---\nHi.\n"})
    (root / "latin.worker").write_bytes("---\nmodel: test\n---\nCaf\u00e9.\n".encode("latin-1"))
    (root / "folder.worker").mkdir()
    found = sorted(problems(root))
    assert found == [
        (
            "folder.worker",
            None,
            "a directory, not a worker file: rename it, or move it out of the project directory",
        ),
        (
            "latin.worker",
            None,
            "not UTF-8 text: 'utf-8' codec can't decode byte 0xe9 in position 23: invalid continuation byte; "
            "save it as UTF-8",
        ),
    ]
