"""Opening a database from its URL: the backend is chosen by the scheme (`sqlite://`, `postgresql://`)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlsplit

from ..errors import ConfigurationError
from .database import Database

__all__ = ["database_from_url", "open_database"]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SCHEMES = "sqlite:///path/to/file.db or postgresql://user@host/dbname"
_POSTGRES_FORM = "postgresql://user:password@host:5432/dbname (the port is optional, 5432 by default)"


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
        _check_postgres_url(url)
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


def _check_postgres_url(url: str) -> None:
    """Refuse a PostgreSQL URL asyncpg could not read, naming LLM_DO_DATABASE_URL and never quoting it.

    Checked: the ports (after each host, and in `?port=`), which asyncpg would only find wrong at the
    first connection, with a bare `ValueError`.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ConfigurationError(f"LLM_DO_DATABASE_URL is not a valid URL; write it like {_POSTGRES_FORM}") from None
    hosts = parts.netloc.rpartition("@")[2]
    ports = [_port_of(host) for host in hosts.split(",") if host]
    ports += [port for value in parse_qs(parts.query).get("port", []) for port in value.split(",")]
    for port in ports:
        if port is not None and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
            raise ConfigurationError(
                "LLM_DO_DATABASE_URL has a port that is not a number from 1 to 65535; write it like "
                f"{_POSTGRES_FORM}, or with ?host=/socket/dir&port=5432 for a unix socket"
            )


def _port_of(host: str) -> str | None:
    """The port written after `host` (`db:5432`, `[::1]:5432`), or None when there is none."""
    if host.startswith("["):
        rest = host.partition("]")[2]
        return rest[1:] if rest.startswith(":") else None
    return host.rpartition(":")[2] if ":" in host else None


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
