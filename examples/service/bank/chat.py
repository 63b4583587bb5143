"""The chat desk: a person writes to the banker, watches it work, and approves each commit.

Offline, as the rest of the example: the banker and its cashier are scripted models that stream
their answers word by word. The banker reads the latest message; "move 10 from A to B" becomes a
call of the `cashier` agent (a child call: begin, transfer, commit), whose `commit` needs the
customer's approval (the `counter` toolset's policy). Anything else is answered from the
conversation so far: each conversation is an llm-do session, whose history the runtime keeps in
PostgreSQL (`PostgresHistoryStore`), so that the next message, served by any web process, continues
it. `ChatStore` keeps who owns each conversation.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Callable
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

from llm_do import AgentEntry, HistoryStore

from . import ledger
from .model import teller

__all__ = ["ChatStore", "banker", "cashier", "streamed"]

_TRANSFER = re.compile(r"\b(?:move|send|transfer|pay)\s+(\d+)\s+from\s+(\w+)\s+to\s+(\w+)", re.IGNORECASE)

Respond = Callable[[list[ModelMessage], AgentInfo], Any]


def streamed(respond: Respond) -> Callable[[list[ModelMessage], AgentInfo], AsyncIterator[str | DeltaToolCalls]]:
    """A stream function for `FunctionModel` that streams what `respond` answers: text word by word."""

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        response: ModelResponse = await respond(messages, info)
        for index, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                for word in re.findall(r"\S+\s*", part.content):
                    yield word
            elif isinstance(part, ToolCallPart):
                yield {index: DeltaToolCall(part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id)}

    return stream


def _since_last_prompt(messages: list[ModelMessage]) -> tuple[str, list[ToolReturnPart], list[ModelMessage]]:
    """The latest user message, the tool results that answered it so far, and the conversation before it."""
    for at in range(len(messages) - 1, -1, -1):
        message = messages[at]
        if isinstance(message, ModelRequest):
            prompts = [part.content for part in message.parts if isinstance(part, UserPromptPart)]
            if prompts and isinstance(prompts[-1], str):
                results = [
                    part
                    for later in messages[at:]
                    if isinstance(later, ModelRequest)
                    for part in later.parts
                    if isinstance(part, ToolReturnPart)
                ]
                return prompts[-1], results, messages[:at]
    raise ValueError("the banker's conversation has no message from the customer")


def _transfers_before(history: list[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for message in history
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart) and part.tool_name == "cashier" and str(part.content).endswith("committed")
    ]


async def _banker(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    text, results, history = _since_last_prompt(messages)
    if results:
        result = results[-1]
        if result.outcome == "success" and str(result.content).endswith("committed"):
            return ModelResponse(parts=[TextPart(f"Done: {result.content}")])
        return ModelResponse(parts=[TextPart(f"The transfer was not made: {result.model_response_str()}")])
    asked = _TRANSFER.search(text)
    if asked is not None:
        amount, source, target = asked.groups()
        request = {
            "reference": f"chat-{uuid.uuid4().hex[:12]}",
            "source": source,
            "target": target,
            "amount": int(amount),
        }
        return ModelResponse(parts=[ToolCallPart("cashier", {"input": json.dumps(request)})])
    made = _transfers_before(history)
    if made:
        listed = "; ".join(made)
        return ModelResponse(parts=[TextPart(f"In this conversation you made {len(made)} transfer(s): {listed}.")])
    return ModelResponse(parts=[TextPart("Hello! Ask me to move money, for example: move 10 from A to B.")])


banker = AgentEntry(
    Agent(FunctionModel(_banker, stream_function=streamed(_banker), model_name="scripted-banker")),
    name="banker",
    toolsets=["cashier"],
    description="Talks with the customer; hands each transfer to the cashier.",
)

cashier = AgentEntry(
    Agent(
        FunctionModel(teller, stream_function=streamed(teller), model_name="scripted-cashier"),
        instructions="Carry out the transfer described in the JSON request, then commit it.",
    ),
    name="cashier",
    toolsets=["counter"],
    description="Makes one transfer (a JSON request) in one database transaction; its commit needs approval.",
)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS chat_sessions (
    id text PRIMARY KEY,
    owner text NOT NULL
)
"""


class ChatStore:
    """Who owns each chat session, in PostgreSQL (its conversation is in the runtime's history store)."""

    def __init__(self, pool: ledger.Pool) -> None:
        self.pool = pool

    async def create_schema(self, history: HistoryStore) -> None:
        """Create the owners' table, once for all processes, and the history store's (its first use creates it)."""
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(7261630312)")  # CREATE TABLE IF NOT EXISTS races itself
            await conn.execute(_SCHEMA)
        await history.load("")  # at start-up rather than at the first message (it locks against other processes)

    async def claim(self, session_id: str, owner: str) -> str:
        """Open `session_id` for `owner` unless it exists (a new conversation's id, or one the AI SDK chose); returns
        its owner."""
        await self.pool.execute(
            "INSERT INTO chat_sessions (id, owner) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING", session_id, owner
        )
        found = await self.owner(session_id)
        assert found is not None
        return found

    async def owner(self, session_id: str) -> str | None:
        found = await self.pool.fetchval("SELECT owner FROM chat_sessions WHERE id = $1", session_id)
        return None if found is None else str(found)
