"""Database module: SQLite, one connection per session (the original uses SQLAlchemy's)."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    id INTEGER PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    hashed_password TEXT NOT NULL,
    is_active INTEGER NOT NULL DEFAULT 1
)
"""


class Database:
    def __init__(self, db_url: str) -> None:
        self.path = db_url.removeprefix("sqlite:///")

    def connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)

    def create_database(self) -> None:
        with self.session() as session:
            session.execute(SCHEMA)

    @contextmanager
    def session(self) -> Iterator[sqlite3.Connection]:
        session = self.connect()
        session.execute("BEGIN")
        try:
            yield session
            session.execute("COMMIT")
        except Exception:
            logger.exception("Session rollback because of exception")
            session.execute("ROLLBACK")
            raise
        finally:
            session.close()
