"""A project's own model prefixes (`llm_do.project.model_factory` in a project module): `PREFIX:NAME` in worker
files, `load_project(model=...)` and on the command line; held by the project that declares it, never by another
project of the same process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_do import ConfigurationError
from llm_do.project import ModelFactory, ModelNameError, load_project, model_factory

from ..cli_projects import llm_do
from .project_files import problems, write

ACME = """
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.messages import ModelResponse, TextPart

from llm_do.project import model_factory

BUILT: list[str] = []


@model_factory("acme")
def acme(name: str) -> FunctionModel:
    BUILT.append(name)
    return FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart(f"acme {name} answers")]))
"""

OTHER_ACME = """
from pydantic_ai.models.test import TestModel

from llm_do.project import model_factory


def build(name: str) -> TestModel:
    return TestModel(custom_output_text=f"the other acme's {name}")


acme = model_factory("acme", build)
"""


async def test_a_prefix_a_module_declares_names_models_in_worker_files_and_given_to_the_project(tmp_path: Path) -> None:
    root = write(
        tmp_path / "desk",
        {
            "providers.py": ACME,
            "own.worker": "---\nmodel: acme:small\n---\nAnswer.\n",
            "given.worker": "---\ncompatible_models: ['acme:*']\n---\nAnswer.\n",
        },
    )
    async with load_project(root, model="acme:big") as project:
        assert sorted(project.model_factories) == ["acme"]
        module = next(iter(project.model_factories.values())).build.__globals__
        assert module["BUILT"] == []  # built when first used, not at load
        own = await project.run("own", "hi")
        given = await project.run("given", "hi")
    assert (own.output, given.output) == ("acme small answers", "acme big answers")
    assert module["BUILT"] == ["small", "big"]


async def test_a_prefix_holds_only_for_the_project_that_declares_it(tmp_path: Path) -> None:
    declaring = write(tmp_path / "declaring", {"providers.py": ACME, "clerk.worker": "---\nmodel: acme:x\n---\nHi.\n"})
    other = write(tmp_path / "other", {"providers.py": OTHER_ACME, "clerk.worker": "---\nmodel: acme:x\n---\nHi.\n"})
    plain = write(tmp_path / "plain", {"clerk.worker": "---\nmodel: acme:x\n---\nHi.\n"})
    async with load_project(declaring) as first, load_project(other) as second:
        assert (await first.run("clerk", "hi")).output == "acme x answers"
        assert (await second.run("clerk", "hi")).output == "the other acme's x"  # its own factory, same prefix
    [(name, line, message)] = problems(plain)  # loaded after both, in the same process: no such prefix
    assert (name, line) == ("clerk.worker", 2)
    assert "unknown model provider 'acme'" in message
    assert "own prefixes" not in message  # the project declares none
    with pytest.raises(ModelNameError) as caught:
        load_project(plain, model="acme:x")
    assert caught.value.name == "acme:x" and "unknown model provider 'acme'" in caught.value.problem


def test_an_unknown_prefix_names_the_projects_own(tmp_path: Path) -> None:
    root = write(
        tmp_path / "desk",
        {
            "providers.py": ACME,
            "project.toml": '[providers.local]\nbase_url = "http://127.0.0.1:1/v1"\n',
            "clerk.worker": "---\nmodel: acmee:x\n---\nHi.\n",
        },
    )
    [(name, line, message)] = problems(root)
    assert (name, line) == ("clerk.worker", 2)
    assert "unknown model provider 'acmee' (did you mean 'acme'?)" in message
    assert "the project's own prefixes are acme, local" in message
    with pytest.raises(ModelNameError) as caught:
        load_project(root, model="acmee:x")
    assert "the project's own prefixes are acme, local" in caught.value.problem


def test_wrong_declarations_are_problems_with_file_and_line(tmp_path: Path) -> None:
    bad = write(
        tmp_path / "bad",
        {
            "providers.py": "from llm_do.project import model_factory\n\nfast = model_factory('test', print)\n",
            "clerk.worker": "---\nmodel: test\n---\nHi.\n",
        },
    )
    [(name, line, message)] = problems(bad)
    assert (name, line) == ("providers.py", 3)
    assert "a model prefix is letters, digits" in message and "not 'test' or 'replay'" in message
    twice = write(
        tmp_path / "twice",
        {
            "providers.py": ACME,
            "more.py": OTHER_ACME,
            "project.toml": '[providers.acme]\nbase_url = "http://127.0.0.1:1/v1"\n',
            "clerk.worker": "---\nmodel: test\n---\nHi.\n",
        },
    )
    found = problems(twice)
    assert [(name, line) for name, line, _ in found] == [("more.py", 6), ("providers.py", 9)]
    assert "a second model factory of prefix 'acme' (the first is in more.py)" in found[0][2] + found[1][2]
    assert any("has the name of [providers.acme] in project.toml" in message for _, _, message in found)


async def test_a_factory_that_returns_no_model_fails_the_run_naming_itself(tmp_path: Path) -> None:
    root = write(
        tmp_path / "desk",
        {
            "providers.py": """
                from llm_do.project import model_factory


                @model_factory("nope")
                def named(name: str) -> str:
                    return name
            """,
            "clerk.worker": "---\nmodel: nope:x\n---\nHi.\n",
        },
    )
    async with load_project(root) as project:
        refused = r"prefix 'nope' \(\S+\.providers\.named\) returned str, not a pydantic-ai Model"
        with pytest.raises(ConfigurationError, match=refused):
            await project.run("clerk", "hi")


def test_the_decorator_and_the_call_make_the_same_declaration() -> None:
    def build(name: str) -> object:
        return name

    decorated = model_factory("acme")(build)  # type: ignore[arg-type]
    called = model_factory("acme", build)  # type: ignore[arg-type]
    assert decorated == called == ModelFactory("acme", build)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a model prefix is letters"):
        model_factory("two words")


def test_a_projects_prefix_on_the_command_line(tmp_path: Path) -> None:
    root = write(tmp_path / "desk", {"providers.py": ACME, "clerk.worker": "Answer.\n"})
    done = llm_do("run", root, "hi", "-m", "acme:tiny", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["output"] == "acme tiny answers" and document["calls"][0]["model"] == "acme:tiny"
    checked = llm_do("check", root, "-m", "acme:tiny")
    assert checked.returncode == 0, checked.stderr
    unknown = llm_do("run", root, "hi", "-m", "acmee:tiny")
    assert unknown.returncode == 2
    assert "--model acmee:tiny: unknown model provider 'acmee' (did you mean 'acme'?)" in unknown.stderr
    assert "the project's own prefixes are acme" in unknown.stderr
    elsewhere = write(tmp_path / "plain", {"clerk.worker": "Answer.\n"})
    refused = llm_do("run", elsewhere, "hi", "-m", "acme:tiny")
    assert refused.returncode == 2 and "unknown model provider 'acme'" in refused.stderr


def test_the_earlier_register_model_factory_is_a_problem_naming_model_factory_and_migrate_rewrites_it(
    tmp_path: Path,
) -> None:
    from llm_do.project.migrate import plan_migration

    root = write(
        tmp_path / "earlier",
        {
            "providers.py": """
                from llm_do import register_model_factory


                def build(name):
                    return name


                register_model_factory("acme", build)
            """,
            "clerk.agent": "---\nmodel: test\n---\nHi.\n",
        },
    )
    [(name, line, message)] = problems(root)
    assert (name, line) == ("providers.py", 1)
    assert "from llm_do import register_model_factory" in message and "llm_do.project.model_factory" in message
    migration = plan_migration(root)
    assert migration.untranslated == []
    [change] = [change for change in migration.changes if change.path.name == "providers.py"]
    assert change.new is not None
    assert "from llm_do.project import model_factory\n" in change.new
    assert 'acme = model_factory("acme", build)\n' in change.new and "register_model_factory" not in change.new


def test_a_model_of_a_projects_prefix_is_recorded_and_replayed(tmp_path: Path) -> None:
    root = write(tmp_path / "desk", {"providers.py": ACME, "clerk.worker": "Answer.\n"})
    record = tmp_path / "session.json"
    done = llm_do("run", root, "hi", "-m", "acme:tiny", "--record", record, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == "acme tiny answers" and record.is_file()
    replayed = llm_do("run", root, "hi", "-m", f"replay:{record}", "--json")
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["output"] == "acme tiny answers"
    unknown = llm_do("run", root, "hi", "-m", "acmee:tiny", "--record", tmp_path / "other.json")
    assert unknown.returncode == 2 and "--model acmee:tiny: unknown model provider 'acmee'" in unknown.stderr
