"""A conversation kept turn by turn: a saved turn writes only the messages it adds, a session that holds the
stored version reads nothing, a conversation continued elsewhere is read from where the copy held ends, and
what the application reads of an open session is the store's. Conflicts and deletions are refused as
before; a run that changed its history (compacted it) saves the whole of it; a table an earlier version
made (one row per conversation) is moved to this layout without losing a message. On real PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from llm_do import (
    AgentEntry,
    HistoryConflict,
    HistoryStore,
    InMemoryHistoryStore,
    PostgresHistoryStore,
    Runtime,
    StoredHistory,
)
from llm_do.testing import ScriptedModel, answering, response

from ..jobs_support import fresh_database
from ..postgres import PostgresServer


def prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]


def turn(text: str) -> list[ModelMessage]:
    """A turn of two messages: the person's `text`, and the model's answer."""
    return [ModelRequest(parts=[UserPromptPart(text)]), ModelResponse(parts=[TextPart(text.upper())])]


def echo() -> AgentEntry:
    """A chat that answers each message with the number of messages it was sent."""
    return AgentEntry(Agent(answering(lambda turn: f"Noted {len(turn.messages)}.")), name="chat")


@pytest.fixture(params=["memory", "postgresql"])
async def stores(request: pytest.FixtureRequest) -> AsyncIterator[tuple[HistoryStore, HistoryStore]]:
    """Two stores on one place, as two processes have: the same `InMemoryHistoryStore`, or two
    `PostgresHistoryStore`s (each its own pool) on one fresh database."""
    if request.param == "memory":
        store = InMemoryHistoryStore()
        yield store, store
        return
    postgres: PostgresServer = request.getfixturevalue("postgres")
    async with fresh_database(postgres) as dsn, PostgresHistoryStore(dsn) as here, PostgresHistoryStore(dsn) as there:
        yield here, there


@pytest.fixture
async def database(postgres: PostgresServer) -> AsyncIterator[str]:
    async with fresh_database(postgres) as dsn:
        yield dsn


async def query(dsn: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    connection = await asyncpg.connect(dsn)
    try:
        return [tuple(row) for row in await connection.fetch(sql, *args)]
    finally:
        await connection.close()


# -- writing ---------------------------------------------------------------------------------------


async def test_each_turn_writes_only_the_messages_it_adds(database: str) -> None:
    async with PostgresHistoryStore(database) as store, Runtime(None, entries=[echo()], history_store=store) as runtime:
        session = await runtime.session("conv")
        for text in ("one", "two", "three"):
            await session.run("chat", text)
        assert prompts((await store.load("conv")).messages) == ["one", "two", "three"]
    turns = await query(
        database,
        "SELECT start, json_array_length(messages), version, messages::text FROM llm_do_session_history_turns "
        "WHERE session_id = 'conv' ORDER BY start",
    )
    assert [(start, length) for start, length, _, _ in turns] == [(0, 2), (2, 2), (4, 2)]
    assert [prompts(ModelMessagesTypeAdapter.validate_json(text)) for *_, text in turns] == [
        ["one"],
        ["two"],
        ["three"],
    ], "each row holds its own turn, nothing of the ones before"
    versions = [version for _, _, version, _ in turns]
    assert versions == sorted(versions) and len(set(versions)) == 3
    head = await query(database, "SELECT length, version FROM llm_do_session_history WHERE session_id = 'conv'")
    assert head == [(6, versions[-1])]


async def test_a_stale_save_is_refused_and_changes_nothing(stores: tuple[HistoryStore, HistoryStore]) -> None:
    """A save over a version that is no longer the stored one is refused, an added turn as a whole conversation,
    and a deleted conversation's marker refuses a save over the version before it."""
    store, _ = stores
    first = await store.save("conv", turn("a"))
    assert first
    second = await store.save("conv", turn("a") + turn("b"), version=first, kept=2)
    assert second not in (None, first)
    assert await store.save("conv", turn("a") + turn("x"), version=first, kept=2) is None
    assert await store.save("conv", turn("y"), version=first) is None
    assert await store.save("conv", turn("z"), version=0) is None, "version 0: the store was said to keep none"
    stored = await store.load("conv")
    assert (prompts(stored.messages), stored.version) == (["a", "b"], second)
    third = await store.save("conv", turn("a") + turn("b") + turn("c"), version=second, kept=4)
    assert prompts((await store.load("conv")).messages) == ["a", "b", "c"]
    await store.delete("conv")
    marker = await store.load("conv")
    assert marker.messages == [] and marker.version not in (0, first, second, third)
    assert await store.save("conv", turn("a") + turn("b") + turn("c") + turn("d"), version=third, kept=6) is None
    assert await store.load("conv") == marker
    again = await store.save("conv", turn("fresh"), version=marker.version)
    assert again not in (None, marker.version)
    assert prompts((await store.load("conv")).messages) == ["fresh"]


async def test_of_two_turns_added_to_one_version_at_once_one_is_kept(
    stores: tuple[HistoryStore, HistoryStore],
) -> None:
    """Two processes add a turn to the same version at the same moment: the conversation's row orders them, and the
    second finds another version there; only the first turn is kept, whole."""
    here, there = stores
    first = await here.save("conv", turn("a"))
    for attempt in range(5):
        saved = await asyncio.gather(
            here.save("conv", turn("a") + turn(f"here {attempt}"), version=first, kept=2),
            there.save("conv", turn("a") + turn(f"there {attempt}"), version=first, kept=2),
        )
        [won] = [version for version in saved if version is not None]
        winner = "here" if saved[0] is not None else "there"
        stored = await there.load("conv")
        assert (prompts(stored.messages), stored.version) == (["a", f"{winner} {attempt}"], won)
        first = await here.save("conv", turn("a"), version=won)  # back to one turn for the next attempt
        assert first


async def test_a_save_that_adds_nothing_is_a_new_version_and_a_copy_behind_it_reads_the_conversation(
    stores: tuple[HistoryStore, HistoryStore],
) -> None:
    store, other = stores
    first = await store.save("conv", turn("a"))
    assert first
    same = await store.save("conv", turn("a"), version=first, kept=2)
    assert same not in (None, first)
    behind = StoredHistory(turn("a"), first)
    loaded = await other.load("conv", held=behind)
    assert (prompts(loaded.messages), loaded.version) == (["a"], same)
    assert await store.save("conv", turn("a") + turn("b"), version=first, kept=2) is None
    assert prompts((await other.load("conv")).messages) == ["a"]


async def test_deleting_a_conversation_deletes_its_turns_and_keeps_its_row_as_a_marker(database: str) -> None:
    async with PostgresHistoryStore(database) as store:
        version = await store.save("conv", turn("a"))
        await store.save("conv", turn("a") + turn("b"), version=version, kept=2)
        await store.save("other", turn("kept"))
        await store.delete("conv")
        marker = await store.load("conv")
    assert await query(database, "SELECT DISTINCT session_id FROM llm_do_session_history_turns") == [("other",)]
    assert await query(database, "SELECT length, version FROM llm_do_session_history WHERE session_id = 'conv'") == [
        (0, marker.version)
    ]


@pytest.mark.parametrize("kept_in", ["memory", "postgresql"])
async def test_a_run_that_compacts_its_history_saves_the_whole_of_it(
    kept_in: str, request: pytest.FixtureRequest
) -> None:
    """A capability that drops old messages (here: all but the newest) changes the history the run was given: its
    messages no longer start with it, and the store replaces the conversation with them, over the same version
    check; another process reads the compacted conversation."""

    def newest(messages: list[ModelMessage]) -> list[ModelMessage]:
        return messages[-1:]

    model = answering(lambda turn: f"Noted {len(turn.messages)}.")
    chat = AgentEntry(Agent(model, capabilities=[ProcessHistory(newest)]), name="chat")
    async with contextlib.AsyncExitStack() as stack:
        if kept_in == "memory":
            here = there = InMemoryHistoryStore()
        else:
            dsn = await stack.enter_async_context(fresh_database(request.getfixturevalue("postgres")))
            here = await stack.enter_async_context(PostgresHistoryStore(dsn))
            there = await stack.enter_async_context(PostgresHistoryStore(dsn))
        runtime = await stack.enter_async_context(Runtime(None, entries=[chat], history_store=here))
        session = await runtime.session("conv")
        await session.run("chat", "one")
        await session.run("chat", "two")
        last = await session.run("chat", "three")
        assert prompts(last.messages) == ["three"] and last.output == "Noted 1."
        assert (await there.load("conv")).messages == last.messages == session.history
        if kept_in == "postgresql":
            rows = await query(dsn, "SELECT start, json_array_length(messages) FROM llm_do_session_history_turns")
            assert rows == [(0, 2)]


# -- reading ---------------------------------------------------------------------------------------


async def test_a_store_given_the_copy_it_holds_reads_nothing(stores: tuple[HistoryStore, HistoryStore]) -> None:
    store, _ = stores
    version = await store.save("conv", turn("a"))
    assert version
    held = StoredHistory(turn("a"), version)
    assert await store.load("conv", held=held) is held
    stale = StoredHistory(turn("a"), version + 1)  # a version the store does not have: it reads
    assert prompts((await store.load("conv", held=stale)).messages) == ["a"]
    assert await store.load("nobody", held=held) == StoredHistory()


async def test_a_session_holding_the_stored_version_reads_nothing_again(
    stores: tuple[HistoryStore, HistoryStore],
) -> None:
    """A run's start, and opening the session again, check the version: the session keeps its own copy (the same
    list, not one parsed anew) while the store's version is the one it holds."""
    store, _ = stores
    async with Runtime(None, entries=[echo()], history_store=store) as runtime:
        session = await runtime.session("conv")
        await session.run("chat", "one")
        history = session.history
        await session.refresh()
        assert session.history is history
        assert await runtime.session("conv") is session and session.history is history
        second = await session.run("chat", "two")
        assert second.output == "Noted 3." and second.messages[:2] == history


async def test_a_turn_added_elsewhere_is_read_alone(database: str) -> None:
    """Two processes on one database: a turn the other one saved is read from where this one's copy ends; the
    messages this one held are kept as they were, not parsed again."""
    async with (
        PostgresHistoryStore(database) as here_store,
        PostgresHistoryStore(database) as there_store,
        Runtime(None, entries=[echo()], history_store=here_store) as here,
        Runtime(None, entries=[echo()], history_store=there_store) as there,
    ):
        session = await here.session("conv")
        await session.run("chat", "one")
        held = list(session.history)
        await there.run("chat", "two", session="conv")
        await session.refresh()
        assert prompts(session.history) == ["one", "two"]
        assert all(mine is kept for mine, kept in zip(held, session.history[:2], strict=True))
        assert session.history == (await there_store.load("conv")).messages
        third = await session.run("chat", "three")
        assert third.output == "Noted 5."
        # rewritten elsewhere: no longer an addition to the copy held, so read whole
        await there_store.save("conv", turn("new"), version=(await there_store.load("conv")).version)
        await session.refresh()
        assert prompts(session.history) == ["new"]


# -- what the application reads of an open session ----------------------------------------------


async def test_an_open_session_read_again_has_the_turn_another_process_saved(
    stores: tuple[HistoryStore, HistoryStore],
) -> None:
    """A web process keeps a session open after its run (a run that parked, say); another process (a worker)
    saves the next turn. Reading the session again (`runtime.session(id)`, as `GET /chat/sessions/{id}` does)
    gives the conversation with that turn, not the copy held since."""
    here_store, there_store = stores
    async with (
        Runtime(None, entries=[echo()], history_store=here_store) as here,
        Runtime(None, entries=[echo()], history_store=there_store) as there,
    ):
        session = await here.session("conv")
        await session.run("chat", "one")
        await there.run("chat", "two", session="conv")
        read = await here.session("conv")
        assert read is session
        assert prompts(read.history) == ["one", "two"]
        await there_store.delete("conv")
        assert (await here.session("conv")).history == []


async def test_reading_a_session_while_its_run_is_in_flight_keeps_the_history_the_run_started_from(
    stores: tuple[HistoryStore, HistoryStore],
) -> None:
    """Reading the session during its run does not move the version the run saves over: a turn another process
    saved meanwhile still makes the run's save a conflict, not an overwrite."""
    here_store, there_store = stores
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if prompts(messages)[-1] == "late":
            started.set()
            await release.wait()
        return response(f"Noted {len(messages)}.")

    slow_chat = AgentEntry(Agent(FunctionModel(slow)), name="chat")
    async with (
        Runtime(None, entries=[slow_chat], history_store=here_store) as here,
        Runtime(None, entries=[echo()], history_store=there_store) as there,
    ):
        session = await here.session("conv")
        await session.run("chat", "one")
        late = asyncio.create_task(session.run("chat", "late"))
        await started.wait()
        await there.run("chat", "meanwhile", session="conv")
        read = await here.session("conv")
        assert prompts(read.history) == ["one"], "during its run: the history the run started from"
        release.set()
        with pytest.raises(HistoryConflict):
            await late
        assert prompts((await there_store.load("conv")).messages) == ["one", "meanwhile"]
        assert prompts((await here.session("conv")).history) == ["one", "meanwhile"]


class WholeStore:
    """A store written to the protocol before `held` and `kept`: it reads and writes whole conversations."""

    def __init__(self) -> None:
        self.kept: dict[str, StoredHistory] = {}
        self.loads = 0

    async def load(self, session_id: str) -> StoredHistory:
        self.loads += 1
        return self.kept.get(session_id, StoredHistory())

    async def save(self, session_id: str, messages: list[ModelMessage], *, version: int | None = None) -> int | None:
        stored = self.kept.get(session_id)
        if stored is not None and version is not None and stored.version != version:
            return None
        self.kept[session_id] = StoredHistory(list(messages), (stored.version if stored else 0) + 1)
        return self.kept[session_id].version

    async def delete(self, session_id: str) -> None:
        self.kept.pop(session_id, None)


async def test_a_store_written_to_the_earlier_protocol_still_keeps_conversations() -> None:
    store = WholeStore()
    async with Runtime(None, entries=[echo()], history_store=store) as runtime:  # type: ignore[arg-type]
        session = await runtime.session("conv")
        await session.run("chat", "one")
        await session.run("chat", "two")
        assert await runtime.session("conv") is session
    assert prompts(store.kept["conv"].messages) == ["one", "two"] and store.loads == 4


# -- a table an earlier version made --------------------------------------------------------------


async def test_a_table_an_earlier_version_made_is_moved_to_turns_without_losing_a_message(database: str) -> None:
    """One row per session with all its messages (`json`, with a version), as the earlier store kept them: the first
    stores to open it (several at once) move each conversation to one turn, keeping its version and every
    character (a NUL too); a deleted conversation's marker stays a marker; the conversation goes on turn by turn."""
    async with Runtime(None, entries=[AgentEntry(Agent(ScriptedModel("Noted: a\x00b.")), name="chat")]) as earlier:
        first = await earlier.run("chat", "Say a\x00b.")
    document = ModelMessagesTypeAdapter.dump_json(first.messages).decode()
    connection = await asyncpg.connect(database)
    try:
        await connection.execute(
            "CREATE TABLE llm_do_session_history (session_id text PRIMARY KEY, messages json NOT NULL,"
            " updated_at timestamptz NOT NULL DEFAULT now(), version bigint NOT NULL DEFAULT 1)"
        )
        await connection.execute(
            "INSERT INTO llm_do_session_history (session_id, messages, version) VALUES ('conv', $1::json, 7),"
            " ('gone', '[]', 9)",
            document,
        )
    finally:
        await connection.close()
    stores = [PostgresHistoryStore(database) for _ in range(3)]
    try:
        loaded = await asyncio.gather(*(store.load("conv") for store in stores))
        assert all(each == StoredHistory(first.messages, 7) for each in loaded)
        assert await stores[0].load("gone") == StoredHistory([], 9)
        async with Runtime(None, entries=[echo()], history_store=stores[0]) as runtime:
            session = await runtime.session("conv")
            assert session.history == first.messages and session.version == 7
            second = await session.run("chat", "And now?")
        assert (await stores[1].load("conv")).messages == second.messages
        assert prompts(second.messages) == ["Say a\x00b.", "And now?"]
    finally:
        for store in stores:
            await store.aclose()
    columns = await query(
        database,
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'llm_do_session_history' ORDER BY 1",
    )
    assert columns == [("length",), ("session_id",), ("updated_at",), ("version",)]
    turns = await query(
        database,
        "SELECT session_id, start, json_array_length(messages) FROM llm_do_session_history_turns ORDER BY 1, 2",
    )
    assert turns == [("conv", 0, 2), ("conv", 2, 2)]
