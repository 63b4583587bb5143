"""The queue live runs park on in tests/jobs/test_live_parking.py and benchmarks/bench_deploy.py; worker
processes run it (`tests.live_app:queue`). The entries are tests/journal_app.py's, whose models note every request
they are sent; sessions keep their history in PostgreSQL (the jobs database), so that a run parked by one process
continues its session's conversation on a worker."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

from llm_do import PostgresHistoryStore, Runtime, ToolPolicy
from llm_do.jobs import JobQueue

from .journal_app import Steps, Till, _agent, pair, payer

QUEUE = "live"
ENTRIES = ["payer", "pair", "twice"]


def _twice(fields: dict[str, Any], index: int, returns: list[Any]) -> ModelResponse:
    """Pays 1, then 2 (two questions, one after the other), then names what the till said."""
    if index < 2:
        return ModelResponse(parts=[ToolCallPart("pay", {"notes": fields["notes"], "amount": index + 1})])
    return ModelResponse(parts=[TextPart("twice: " + ", ".join(map(str, returns)))])


twice = _agent("twice", _twice, ["till"])


@asynccontextmanager
async def live_runtime(dsn: str | None = None) -> AsyncIterator[Runtime]:
    """The runtime of the web process and of the workers alike: journal_app's entries, histories in PostgreSQL."""
    async with (
        PostgresHistoryStore(dsn or os.environ["LLM_DO_JOBS_DATABASE_URL"]) as history,
        Runtime(
            None,
            entries=[payer, pair, twice],
            toolsets={"steps": Steps, "till": Till},
            policies={"till": ToolPolicy(tools={"pay": "ask"})},
            history_store=history,
        ) as runtime,
    ):
        yield runtime


queue = JobQueue(entries=ENTRIES, runtime=live_runtime, queue=QUEUE, approvals="park")
"""What `llm-do worker tests.live_app:queue` runs: the jobs live runs parked as."""
