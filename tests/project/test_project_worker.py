"""Parsing `.worker` files: every field, the defaults, and every kind of error with its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_do import ConfigurationError, PolicySettings
from llm_do.project import ProjectError, WorkerSpec, parse_worker, read_worker

FILE = Path("clerk.worker")


def parse(text: str) -> WorkerSpec:
    return parse_worker(text, file=FILE)


def problems(text: str) -> list[tuple[int | None, str]]:
    with pytest.raises(ProjectError) as caught:
        parse(text)
    assert all(problem.file == FILE for problem in caught.value.problems)
    return [(problem.line, problem.message) for problem in caught.value.problems]


def test_every_field_is_read() -> None:
    spec = parse(
        "---\n"
        "name: ledger_clerk\n"
        "description: Moves money between accounts.\n"
        "model: openai:gpt-5.2\n"
        "toolsets: [sql, shell, ledger_clerk]\n"
        "input: schemas:Transfer\n"
        "output: schemas.py:Receipt\n"
        "model_settings: {temperature: 0.2, max_tokens: 500}\n"
        "approvals:\n"
        "  sql: {tools: {commit: allow}}\n"
        "  shell: {default: ask}\n"
        "---\n"
        "# Clerk\n\nYou move money.\n"
    )
    assert spec.name == "ledger_clerk"
    assert spec.description == "Moves money between accounts."
    assert spec.model == "openai:gpt-5.2"
    assert spec.compatible_models == ()
    assert spec.toolsets == ("sql", "shell", "ledger_clerk")
    assert (spec.input, spec.output) == ("schemas:Transfer", "schemas.py:Receipt")
    assert spec.model_settings == {"temperature": 0.2, "max_tokens": 500}
    assert spec.approvals == {
        "sql": PolicySettings(tools={"commit": "allow"}),
        "shell": PolicySettings(default="ask"),
    }
    assert spec.instructions == "# Clerk\n\nYou move money."
    assert spec.file == FILE


def test_lines_of_keys_and_list_items_are_file_lines() -> None:
    spec = parse("---\nmodel: test\ntoolsets:\n  - sql\n  - shell\n---\nGo.\n")
    assert spec.line_of("model") == 2
    assert spec.line_of("toolsets", 1) == 5
    assert spec.line_of("description") == 1  # absent: the top of the file


def test_the_name_defaults_to_the_file_stem_and_compatible_models_may_be_one_pattern() -> None:
    spec = parse("---\ncompatible_models: 'openai:*'\n---\nGo.\n")
    assert spec.name == "clerk"
    assert spec.compatible_models == ("openai:*",)
    assert spec.model is None and spec.toolsets == () and spec.approvals == {}


def test_a_file_without_frontmatter_is_all_instructions() -> None:
    spec = parse("Just do it.\n")
    assert (spec.name, spec.instructions, spec.model) == ("clerk", "Just do it.", None)
    assert parse("---\n---\nBody\n").instructions == "Body"


def test_an_unknown_key_names_its_line_and_the_closest_known_key() -> None:
    [(line, message)] = problems("---\nmodel: test\ntoolset: [sql]\n---\nGo.\n")
    assert line == 3
    assert "unknown key 'toolset'" in message and "did you mean 'toolsets'?" in message


@pytest.mark.parametrize(
    ("frontmatter", "line", "expected"),
    [
        ("name: two words", 2, "'two words' is not a valid name"),
        ("model: gpt", 2, "'gpt' is not a provider:model name"),
        ("toolsets: sql", 2, "toolsets: Input should be a valid list"),
        ("toolsets: [sql, sql]", 2, "'sql' is listed twice"),
        ("input: Question", 2, "'Question' is not a reference to a class"),
        ("description: [a, b]", 2, "description: Input should be a valid string"),
        ("model_settings: {temprature: 1}", 2, "unknown model setting 'temprature' (did you mean 'temperature'?)"),
        (
            "model_settings:\n  seed: 1\n  temperature: hot",
            4,
            "model_settings.temperature: Input should be a valid number",
        ),
        ("model_settings: {tool_choice: required}", 2, "model_settings.tool_choice: 'required' forces a tool call"),
        ("approvals:\n  sql:\n    tools: {commit: maybe}", 4, "approvals.sql.tools.commit: Input should be"),
        ("approvals:\n  sql: {defualt: ask}", 3, "approvals.sql.defualt: Extra inputs are not permitted"),
        ("compatible_models: []", 2, "the list of patterns is empty"),
        ("model: test\ncompatible_models: ['openai:*']", 3, "model and compatible_models exclude each other"),
        ("model: test\nmodel: test", 3, "'model' is given twice (first on line 2)"),
    ],
)
def test_each_bad_value_is_reported_at_its_line(frontmatter: str, line: int, expected: str) -> None:
    [(found_line, message)] = problems(f"---\n{frontmatter}\n---\nGo.\n")
    assert found_line == line
    assert expected in message


def test_all_problems_of_a_file_are_reported_together_in_line_order() -> None:
    found = problems("---\nname: a b\nmodel: nope\ntoolsets: sql\ncolour: red\n---\nGo.\n")
    assert [line for line, _ in found] == [2, 3, 4, 5]
    assert "unknown key 'colour'" in found[3][1]


def test_yaml_syntax_and_shape_errors_name_the_line() -> None:
    [(line, message)] = problems("---\nmodel: test\ntoolsets: [sql\n---\nGo.\n")
    assert line is not None and line >= 3 and "not valid YAML" in message
    assert problems("---\n- a list\n---\nGo.\n") == [
        (2, "the frontmatter must be a mapping of keys, like 'model: test'")
    ]
    assert problems("---\nmodel: test\nGo.\n")[0][0] == 1  # never closed


def test_project_error_is_a_configuration_error_that_lists_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.worker"
    path.write_text("---\nmodel: nope\ncolour: red\n---\nGo.\n")
    with pytest.raises(ConfigurationError) as caught:
        read_worker(path)
    text = str(caught.value)
    assert text.startswith("2 problems:")
    assert f"{path}:2: model: 'nope'" in text and f"{path}:3: unknown key 'colour'" in text
