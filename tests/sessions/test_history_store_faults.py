"""A `PostgresHistoryStore` whose server stops under a run, on a real PostgreSQL server of the module's own: the run
fails with a `HistoryError` naming the session, nothing hangs, and the session carries on once the server is back."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import UserPromptPart

from llm_do import AgentEntry, HistoryError, PostgresHistoryStore, Runtime, ToolPolicy, Toolset, tool
from llm_do.testing import Turn, answering, tool_call

from ..postgres import PostgresServer, temporary_postgres


@pytest.fixture(scope="module")
def own() -> Iterator[PostgresServer]:
    """A throwaway server for this module alone: stopping it disturbs no other test."""
    with temporary_postgres() as server:
        yield server


async def test_a_server_stopped_under_a_run_fails_its_turn_and_the_session_goes_on_once_it_is_back(
    own: PostgresServer,
) -> None:
    class Admin(Toolset):
        @tool
        async def stop_the_server(self) -> str:
            """Stop the database server."""
            await asyncio.to_thread(own.stop)
            return "stopped"

    def model(turn: Turn) -> object:
        prompts = [
            part.content for message in turn.messages for part in message.parts if isinstance(part, UserPromptPart)
        ]
        if turn.returns == [] and prompts[-1] == "stop the server":
            return tool_call("stop_the_server")
        return f"noted {prompts[-1]}"

    note = AgentEntry(Agent(answering(model)), name="note", toolsets=["admin"])

    async with (
        PostgresHistoryStore(own.dsn(), timeout=5) as store,
        Runtime(
            None, entries=[note], toolsets={"admin": Admin}, policies={"admin": ToolPolicy()}, history_store=store
        ) as runtime,
    ):
        assert (await runtime.run("note", "first", session="conv")).output == "noted first"
        with pytest.raises(HistoryError, match=r"session 'conv'") as caught:
            await runtime.run("note", "stop the server", session="conv")
        assert "check that it runs" in str(caught.value)
        own.start()
        assert (await runtime.run("note", "after", session="conv")).output == "noted after"
        saved = (await store.load("conv")).messages
    said = [getattr(part, "content", None) for message in saved for part in message.parts]
    assert [text for text in said if isinstance(text, str) and text.startswith(("first", "after", "noted"))] == [
        "first",
        "noted first",
        "after",
        "noted after",
    ]
