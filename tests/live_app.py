"""The queue live runs park on in tests/jobs/test_live_parking.py and benchmarks/bench_deploy.py; worker
processes run it (`tests.live_app:queue`). The entries are tests/journal_app.py's, whose models note every request
they are sent; sessions keep their history in PostgreSQL (the jobs database), so that a run parked by one process
continues its session's conversation on a worker."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from llm_do import AgentEntry, PostgresHistoryStore, Runtime, ToolPolicy
from llm_do.jobs import JobQueue

from .journal_app import Steps, Till, _agent, double, note, pair, payer

QUEUE = "live"
ENTRIES = ["payer", "pair", "double", "twice", "again", "clerk"]


def _twice(fields: dict[str, Any], index: int, returns: list[Any]) -> ModelResponse:
    """Pays 1, then 2 (two questions, one after the other), then names what the till said."""
    if index < 2:
        return ModelResponse(parts=[ToolCallPart("pay", {"notes": fields["notes"], "amount": index + 1})])
    return ModelResponse(parts=[TextPart("twice: " + ", ".join(map(str, returns)))])


twice = _agent("twice", _twice, ["till"])


def _again(fields: dict[str, Any], index: int, returns: list[Any]) -> ModelResponse:
    """Pays 1, the same 1 again (which the session's grant may answer), then 2, then names what the till said."""
    if index < 3:
        return ModelResponse(parts=[ToolCallPart("pay", {"notes": fields["notes"], "amount": (1, 1, 2)[index]})])
    return ModelResponse(parts=[TextPart("again: " + ", ".join(map(str, returns)))])


again = _agent("again", _again, ["till"])


async def _clerk(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A conversation's clerk: on each turn (the prompt `{"notes", "amount"}`), pays, then says which turn of the
    conversation it is and what the till said; notes `sent clerk <turn>.<request of the turn>` for each request."""
    turns = [
        at
        for at, message in enumerate(messages)
        if isinstance(message, ModelRequest) and any(isinstance(part, UserPromptPart) for part in message.parts)
    ]
    request = messages[turns[-1]]
    assert isinstance(request, ModelRequest)
    prompt = next(part.content for part in request.parts if isinstance(part, UserPromptPart))
    fields = json.loads(str(prompt))
    index = sum(isinstance(message, ModelResponse) for message in messages[turns[-1] :])
    note(fields["notes"], f"sent clerk {len(turns)}.{index}")
    if index == 0:
        return ModelResponse(parts=[ToolCallPart("pay", {"notes": fields["notes"], "amount": fields["amount"]})])
    said = [
        part.content
        for message in messages[turns[-1] :]
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    return ModelResponse(parts=[TextPart(f"turn {len(turns)}: {said[-1]}")])


async def _clerk_stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    response = await _clerk(messages, info)
    for index, part in enumerate(response.parts):
        if isinstance(part, TextPart):
            yield part.content
        elif isinstance(part, ToolCallPart):
            yield {index: DeltaToolCall(part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id)}


clerk = AgentEntry(Agent(FunctionModel(_clerk, stream_function=_clerk_stream)), name="clerk", toolsets=["till"])


@asynccontextmanager
async def live_runtime(dsn: str | None = None) -> AsyncIterator[Runtime]:
    """The runtime of the web process and of the workers alike: journal_app's entries, histories in PostgreSQL."""
    async with (
        PostgresHistoryStore(dsn or os.environ["LLM_DO_JOBS_DATABASE_URL"]) as history,
        Runtime(
            None,
            entries=[payer, pair, double, twice, again, clerk],
            toolsets={"steps": Steps, "till": Till},
            policies={"till": ToolPolicy(tools={"pay": "ask"})},
            history_store=history,
        ) as runtime,
    ):
        yield runtime


queue = JobQueue(entries=ENTRIES, runtime=live_runtime, queue=QUEUE, approvals="park")
"""What `llm-do worker tests.live_app:queue` runs: the jobs live runs parked as."""
