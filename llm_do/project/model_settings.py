"""Model settings in worker and project files: each key one of pydantic-ai's `ModelSettings`, each value of
its type, and a `tool_choice` that still lets the agent answer."""

from __future__ import annotations

import difflib
from collections.abc import Collection
from typing import Any, get_type_hints

from pydantic import ConfigDict, TypeAdapter, ValidationError
from pydantic_ai.settings import ModelSettings

from ..errors import listing

__all__ = ["OUTPUT_TOOL", "SETTING_NAMES", "checked_setting", "tool_choice_problem"]

_TYPES: dict[str, Any] = get_type_hints(ModelSettings)
SETTING_NAMES = frozenset(_TYPES)
"""Every key pydantic-ai's `ModelSettings` has."""

OUTPUT_TOOL = "final_result"
"""The name of the tool a worker with an `output` model answers through (pydantic-ai's default)."""

_FORCING = (
    "to have the model call a tool first, say so in the instructions, or set text_tool_calls: true for a "
    "model that writes its calls as text (docs/local-models.md, 'Forcing tool use')"
)


def checked_setting(key: str, value: Any) -> Any:
    """`value` as the model setting `key` takes it; `ValueError` saying what is wrong (without the key's path)."""
    if key not in _TYPES:
        close = difflib.get_close_matches(key, _TYPES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown model setting {key!r}{hint}; known: {listing(_TYPES)}")
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(_TYPES[key], config=ConfigDict(arbitrary_types_allowed=True))
        checked = adapter.validate_python(value, strict=True)
    except ValidationError as error:
        raise ValueError(f"{error.errors()[0]['msg']} (got {value!r})") from None
    if key == "tool_choice" and checked == "required":
        raise ValueError(
            "'required' forces a tool call in every reply, so the agent could never answer (pydantic-ai "
            f"refuses it when the run starts); {_FORCING}"
        )
    return checked


def tool_choice_problem(tool_choice: Any, output_tools: Collection[str]) -> str | None:
    """What is wrong with a list `tool_choice` that names none of the agent's `output_tools`, if it does."""
    if not isinstance(tool_choice, list) or not set(output_tools).isdisjoint(tool_choice):
        return None
    if not output_tools:
        fix = (
            "this worker answers in text, which no list can allow: give it an `output` model and add "
            f"{OUTPUT_TOOL!r} to the list, or leave tool_choice out"
        )
    else:
        fix = f"add its output tool {OUTPUT_TOOL!r} to the list"
    return (
        f"{tool_choice!r} names no output tool, so every reply would have to call one of those "
        f"tools and the agent could never answer (pydantic-ai refuses it when the run starts); {fix}; {_FORCING}"
    )
