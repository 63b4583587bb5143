from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from pydantic_ai import models

from .postgres import PostgresServer, temporary_postgres

models.ALLOW_MODEL_REQUESTS = False

pytest_plugins = ["pytester"]  # llm_do's own plugin comes from its entry point, like for users


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    yield
    gc.collect()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL server for the whole session (unix socket); fails, never skips, if it cannot start."""
    with temporary_postgres() as server:
        yield server
