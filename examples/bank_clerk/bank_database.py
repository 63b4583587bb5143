"""The bank's database: a SQLite file with three accounts, made fresh for each runtime unless configured.

`LLM_DO_DATABASE_URL` (a `sqlite:///...` file) chooses the file; a file without an `accounts`
table gets one, with the opening balances. Without the setting, the clerk works on a temporary
file, removed when the runtime closes, so every run starts from the same balances (which a
replayed recording needs: it answers the conversation it recorded, balances included).
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from dependency_injector import providers

from containers import AgentContainer, BuiltinToolsets
from llm_do import reveal
from llm_do.toolsets import Database, SqlToolset, database_from_url

OPENING_BALANCES = {"alice": 120, "bob": 80, "carol": 0}


def create_accounts(path: Path) -> None:
    """Create the `accounts` table with the opening balances, unless the file already has one."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE IF NOT EXISTS accounts (name TEXT PRIMARY KEY, balance INTEGER NOT NULL)")
        db.executemany("INSERT OR IGNORE INTO accounts VALUES (?, ?)", OPENING_BALANCES.items())


def balances(path: Path) -> dict[str, int]:
    """Every account's balance, by name."""
    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT name, balance FROM accounts ORDER BY name").fetchall())


async def open_bank(url: str | None, *, pool_size: int, statement_timeout: float) -> AsyncIterator[Database]:
    """The pool of the bank's database (see the module docstring), for a `providers.Resource`."""
    with tempfile.TemporaryDirectory(prefix="bank-clerk-") as folder:
        if url is None:
            url = f"sqlite:///{Path(folder) / 'bank.db'}"
        if not url.startswith("sqlite:///"):
            raise ValueError(f"the bank clerk example needs a sqlite:/// database URL, got {url.split(':')[0]}:...")
        create_accounts(Path(url.removeprefix("sqlite:///")))
        database = database_from_url(url, pool_size=pool_size, statement_timeout=statement_timeout)
        try:
            yield database
        finally:
            await database.aclose()


class BankContainer(BuiltinToolsets):
    """The built-in toolsets, with `sql` on the bank's database."""

    sql_database = providers.Resource(
        open_bank,
        url=reveal(AgentContainer.config.database_url),
        pool_size=AgentContainer.config.sql_pool_size,
        statement_timeout=AgentContainer.config.sql_statement_timeout,
    )
    sql = providers.Factory(  # redeclared: the inherited one is wired to the inherited database
        SqlToolset,
        database=sql_database,
        max_rows=AgentContainer.config.sql_max_rows,
        max_bytes=AgentContainer.config.sql_max_bytes,
    )
