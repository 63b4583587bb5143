"""An entry's input checked before it runs: against its input model, or as the text prompt an agent takes."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from .. import AgentEntry, Entry
from .build import Project
from .problems import Problem

__all__ = ["InputMismatch", "checked_input", "default_input_problem"]


class InputMismatch(ValueError):
    """An input the entry does not take; the message says what does not match and what to give."""


def checked_input(entry: Entry, name: str, input_data: Any, source: str) -> Any:
    """`input_data` as entry `name` takes it (an instance of its input model, else as given); `source` says where
    the input came from (`--input-json`, `the input in project.toml`). Raises `InputMismatch`."""
    schema = entry.schema_in
    if schema is not None:
        return _validated(schema, input_data, name, source)
    if isinstance(entry, AgentEntry) and not isinstance(input_data, str):
        raise InputMismatch(
            f"entry {name!r} takes a text prompt, but {source} is {type(input_data).__name__}; "
            "give a PROMPT, or give the worker an input model (input: module:Class)"
        )
    return input_data


def _validated(schema: type[BaseModel], input_data: Any, name: str, source: str) -> BaseModel:
    try:
        if isinstance(input_data, str):
            return schema.model_validate_json(input_data)
        return schema.model_validate(input_data)
    except ValidationError as error:
        fields = ", ".join(sorted(schema.model_fields))
        if isinstance(input_data, str) and [item["type"] for item in error.errors()] == ["json_invalid"]:
            first = next(iter(sorted(schema.model_fields)), "field")
            hint = (
                f"write them as a table (input = {{{first} = ...}})"
                if source.startswith("the input in ")
                else f'type them as JSON ({{"{first}": ...}})'
                if source == "your line"
                else f"give them as JSON (--input-json '{{\"{first}\": ...}}')"
            )
            raise InputMismatch(
                f"{source} is not JSON, and entry {name!r} takes {schema.__name__}, JSON of its fields ({fields}): "
                + hint
            ) from None
        problems = "; ".join(
            f"{'.'.join(map(str, item['loc'])) or 'the input'}: {item['msg']}" for item in error.errors()
        )
        raise InputMismatch(
            f"{source} does not match {schema.__name__}, the input of entry {name!r}: {problems} (its fields: {fields})"
        ) from None


def default_input_problem(project: Project) -> Problem | None:
    """The project file's `input` checked as a run of the default entry would check it: a problem on its line when
    the entry would refuse it, else None."""
    layout, name = project.layout, project.default_entry
    entry = project.entries.get(name) if name is not None else None
    if layout is None or layout.config_file is None or project.default_input is None or entry is None:
        return None
    assert name is not None
    try:
        checked_input(entry, name, project.default_input, f"the input in {layout.config_name}")
    except InputMismatch as error:
        return Problem(layout.config_file, layout.line_of("input") or layout.line_of("args"), str(error))
    return None
