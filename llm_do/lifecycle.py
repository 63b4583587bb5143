"""Deprecated: `llm_do.lifecycle` moved to `llm_do.scopes`; import its names from there (docs/migrating.md)."""

from typing import Any

from ._moved import moved_name


def __getattr__(name: str) -> Any:
    return moved_name(__name__, name, globals())
