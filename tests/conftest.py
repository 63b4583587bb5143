from __future__ import annotations

import gc
import os
from collections.abc import AsyncIterator, Iterator

import pytest
from pydantic_ai import models

from .jobs_support import fresh_database
from .postgres import PostgresServer, temporary_postgres

models.ALLOW_MODEL_REQUESTS = False

pytest_plugins = ["pytester"]  # llm_do's own plugin comes from its entry point, like for users


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `long` (several seconds each) run first, spread over the xdist workers.

    xdist's worksteal gives each worker an equal run of the collected tests (in order), and an idle
    worker takes the tail of another's queue. Putting each worker's share of the long tests at the
    front of its run means no worker is left alone with a long test at the end.
    """
    long = [item for item in items if item.get_closest_marker("long") is not None]
    rest = [item for item in items if item.get_closest_marker("long") is None]
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    ordered: list[pytest.Item] = []
    remaining = len(items)
    for worker in range(workers):
        size = remaining // (workers - worker)  # what worksteal sends this worker first
        mine = long[worker::workers]
        taken = max(size - len(mine), 0)
        ordered += mine + rest[:taken]
        rest = rest[taken:]
        remaining -= size
    items[:] = ordered + rest


def pytest_collection_finish(session: pytest.Session) -> None:
    """What the collected modules imported lives for the whole session: freeze it (`gc.freeze`), so that
    the collection after each test (and Python's own) walks only what the tests made, not the ~150,000
    objects of pydantic-ai and the other libraries (about 80 ms a collection otherwise)."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _collect_garbage(request: pytest.FixtureRequest) -> Iterator[None]:
    """Garbage is collected after each test, so that what it left (an unraisable error) shows in it.

    `gc.get_referrers` does not see frozen objects: a test marked `whole_heap` (leak reports name
    the holders of a leaked object, a module's global among them) runs with the heap thawed.
    """
    thawed = request.node.get_closest_marker("whole_heap") is not None
    if thawed:
        gc.unfreeze()
    yield
    gc.collect()
    if thawed:
        gc.freeze()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL server for the whole session (unix socket); fails, never skips, if it cannot start."""
    with temporary_postgres() as server:
        yield server


@pytest.fixture
async def dsn(postgres: PostgresServer) -> AsyncIterator[str]:
    """The URL of a new empty database on the session's PostgreSQL server, dropped after the test."""
    async with fresh_database(postgres) as url:
        yield url


@pytest.fixture
def tools_without_a_policy_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tools whose toolset declares no policy run without asking (`LLM_DO_APPROVAL_DEFAULT=allow`), as they did
    before a tool nobody declared safe asked (tests/approvals/test_undeclared_approvals.py). A module whose tests
    are not about approvals uses it for all its tests:
    `pytestmark = pytest.mark.usefixtures("tools_without_a_policy_run")`."""
    monkeypatch.setenv("LLM_DO_APPROVAL_DEFAULT", "allow")
