"""The tests' database: a fresh SQLite file, named through the environment as in production; and a test's own
container (the `llm_do_container` fixture) over a database of its own."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from .containers import Container

os.environ["DATABASE_URL"] = f"sqlite:///{Path(tempfile.mkdtemp()) / 'webapp.db'}"


@pytest.fixture
def llm_do_container(llm_do_container: Container, tmp_path: Path) -> Container:
    llm_do_container.config.db.url.from_value(f"sqlite:///{tmp_path / 'webapp.db'}")
    llm_do_container.db().create_database()
    return llm_do_container
