"""Built-in toolsets. Their providers are declared in `containers.builtins.BuiltinToolsets`."""

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
from .sql import SqlToolset, Transaction

__all__ = [
    "Column",
    "Connection",
    "Database",
    "DatabaseUnavailable",
    "Param",
    "PoolStats",
    "Rows",
    "SqlError",
    "SqlToolset",
    "Transaction",
    "database_from_url",
    "open_database",
]
