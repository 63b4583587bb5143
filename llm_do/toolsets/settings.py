"""`ToolsetSettings`: the built-in toolsets' settings (`LLM_DO_SQL_*`, `LLM_DO_SHELL_*`, `LLM_DO_FILESYSTEM__*`),
which `containers.BuiltinToolsets` reads into its `config` beside the application's settings."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BeforeValidator, Field
from pydantic_settings import NoDecode

from ..di import EnvSettings
from ..files import FilesystemSettings

__all__ = ["ToolsetSettings"]


def _comma_list(value: Any) -> Any:
    """`git, ls` or `["git", "ls"]` from the environment; a list given in code passes as is."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        return json.loads(text)
    return [part.strip() for part in text.split(",") if part.strip()]


def _program_names(names: list[str]) -> list[str]:
    for name in names:
        bare = "/" not in name and name not in (".", "..")
        absolute = os.path.isabs(name) and os.path.basename(name) not in ("", ".", "..")
        if not name or any(c.isspace() or c == "\0" for c in name) or not (bare or absolute):
            raise ValueError(f"{name!r} is not a program name or an absolute path")
    return names


class ToolsetSettings(EnvSettings):
    """The built-in `sql`, `filesystem` and `shell` toolsets' settings, read from `LLM_DO_*` variables and `.env`.

    `containers.BuiltinToolsets` reads them into its `config` (`AgentContainer.config.sql_max_rows`, ...) beside
    its `settings_class`; a container of your own reads them by naming this class in its `builtin_settings`.
    Invalid values raise `InvalidSettings`, naming each variable and the form it expects.
    """

    setting_forms: ClassVar[Mapping[str, tuple[str, str]]] = {
        "filesystem": ("JSON, or one variable per limit", '{"max_read_bytes": 262144}'),
        "sql_statement_timeout": ("a number of seconds > 0", "30"),
        "sql_pool_size": ("a whole number >= 1", "5"),
        "sql_max_rows": ("a whole number >= 1", "100"),
        "sql_max_bytes": ("a whole number of bytes >= 256", "65536"),
        "shell_allow": ("program names or absolute paths, separated by commas (or a JSON list)", "git,ls,rg"),
        "shell_timeout": ("a number of seconds > 0", "30"),
    }

    filesystem: FilesystemSettings = FilesystemSettings()
    """Limits of the built-in `filesystem` and `filesystem_readonly` toolsets."""
    sql_statement_timeout: float = Field(default=30.0, gt=0)
    """The `sql` toolset: seconds a statement (or a wait for a free connection) may take before it is cancelled."""
    sql_pool_size: int = Field(default=5, ge=1)
    """The `sql` toolset: connections in the database pool."""
    sql_max_rows: int = Field(default=100, ge=1)
    """The `sql` toolset: rows a `query` returns at most."""
    sql_max_bytes: int = Field(default=65536, ge=256)
    """The `sql` toolset: bytes of JSON rows a `query` returns at most."""
    shell_allow: Annotated[list[str], NoDecode, BeforeValidator(_comma_list), AfterValidator(_program_names)] = Field(
        default_factory=list
    )
    """Programs the built-in `shell` toolset may run, with any arguments (see docs/toolsets.md)."""
    shell_timeout: float = Field(default=30.0, gt=0)
    """Seconds a `shell` command may run before its whole process group is killed."""
