"""Built-in toolsets. Their providers are declared in `containers.builtins.BuiltinToolsets`.

May import: errors, scopes, files, approvals, di, toolkit, process.
"""

from ..files import ALLOWED_PATHS, ConfinedRoot, FilesystemSettings, PathRefused
from .connect import database_from_url, open_database
from .database import (
    Column,
    Connection,
    ConnectionLost,
    Database,
    DatabaseUnavailable,
    Param,
    PoolStats,
    Rows,
    SqlError,
)
from .dynamic_agents import DynamicAgents
from .filesystem import FilesystemToolset, ReadOnlyFilesystemToolset
from .settings import ToolsetSettings
from .shell import DEFAULT_PATH, AllowSpec, CommandResult, ShellRule, ShellToolset
from .shell_presets import FileOpsShell, ReadOnlyShell
from .sql import SqlToolset, Transaction

__all__ = [
    "ALLOWED_PATHS",
    "DEFAULT_PATH",
    "AllowSpec",
    "CommandResult",
    "ShellRule",
    "ShellToolset",
    "Column",
    "ConfinedRoot",
    "Connection",
    "ConnectionLost",
    "Database",
    "DynamicAgents",
    "DatabaseUnavailable",
    "FileOpsShell",
    "FilesystemSettings",
    "FilesystemToolset",
    "Param",
    "PathRefused",
    "PoolStats",
    "ReadOnlyShell",
    "ReadOnlyFilesystemToolset",
    "Rows",
    "SqlError",
    "SqlToolset",
    "ToolsetSettings",
    "Transaction",
    "database_from_url",
    "open_database",
]
