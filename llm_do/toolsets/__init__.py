"""Built-in toolsets. Their providers are declared in `containers.builtins.BuiltinToolsets`."""

from ..settings import FilesystemSettings
from .confine import ALLOWED_PATHS, ConfinedRoot, PathRefused
from .database import (
    Column,
    Connection,
    Database,
    DatabaseUnavailable,
    Param,
    PoolStats,
    Rows,
    SqlError,
    database_from_url,
    open_database,
)
from .filesystem import FilesystemToolset, ReadOnlyFilesystemToolset
from .sql import SqlToolset, Transaction

__all__ = [
    "ALLOWED_PATHS",
    "Column",
    "ConfinedRoot",
    "Connection",
    "Database",
    "DatabaseUnavailable",
    "FilesystemSettings",
    "FilesystemToolset",
    "Param",
    "PathRefused",
    "PoolStats",
    "ReadOnlyFilesystemToolset",
    "Rows",
    "SqlError",
    "SqlToolset",
    "Transaction",
    "database_from_url",
    "open_database",
]
