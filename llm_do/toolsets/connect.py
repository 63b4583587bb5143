"""Opening a database from its URL: the backend is chosen by the scheme (`sqlite://`, `postgresql://`)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from ..errors import ConfigurationError
from .database import Database

__all__ = ["database_from_url", "open_database"]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SCHEMES = "sqlite:///path/to/file.db or postgresql://user@host/dbname"


def database_from_url(url: str | None, *, pool_size: int = 5, statement_timeout: float = 30.0) -> Database:
    """A pool for `url` (`sqlite:///...` or `postgresql://...`); opens no connection yet.

    Errors name the setting and never the URL, which may hold a password.
    """
    if not url:
        raise ConfigurationError(f"the sql toolset needs a database: set LLM_DO_DATABASE_URL ({_SCHEMES})")
    scheme = url.partition("://")[0].lower() if _SCHEME.match(url) else None
    if scheme == "sqlite":
        from .sqlite_backend import SqliteDatabase, sqlite_path

        return SqliteDatabase(sqlite_path(url), pool_size=pool_size, statement_timeout=statement_timeout)
    if scheme in ("postgresql", "postgres"):
        try:
            from .postgres_backend import PostgresDatabase
        except ImportError:
            raise ConfigurationError(
                "LLM_DO_DATABASE_URL names a PostgreSQL database, but asyncpg is not installed: "
                "pip install 'llm-do[postgres]'"
            ) from None
        return PostgresDatabase(url, pool_size=pool_size, statement_timeout=statement_timeout)
    what = f"has the scheme {scheme!r}, which the sql toolset does not know" if scheme else "is not a URL"
    raise ConfigurationError(f"LLM_DO_DATABASE_URL {what}; use {_SCHEMES}")


async def open_database(
    url: str | None, *, pool_size: int = 5, statement_timeout: float = 30.0
) -> AsyncIterator[Database]:
    """The pool for a `providers.Resource`: made on first use, closed by `shutdown_resources()`.

    The pool opens connections lazily, so this yields at once; the Resource is async only so that
    closing can wait for the connections to close.
    """
    database = database_from_url(url, pool_size=pool_size, statement_timeout=statement_timeout)
    try:
        yield database
    finally:
        await database.aclose()
