"""Sessions: one conversation across runs. Per-session objects are shared by a session's runs and by
no other session, and torn down when it closes, idles out or the runtime closes; a session runs
one run at a time; its approvals stay in it; its history continues, from the store after a restart."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import hashlib
import itertools
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from containers import AgentContainer
from llm_do import (
    AgentEntry,
    Approval,
    ApprovalRequest,
    CallScope,
    HistoryConflict,
    HistoryError,
    HistoryStore,
    InMemoryHistoryStore,
    LlmDoError,
    PostgresHistoryStore,
    Runtime,
    RuntimeClosed,
    RuntimeConfig,
    Scope,
    Session,
    SessionBusy,
    SessionError,
    SessionLocalSingleton,
    StoredHistory,
    ToolPolicy,
    Toolset,
    ToolsetSpec,
    entry,
    run_report,
    tool,
)
from llm_do.testing import (
    ScriptedModel,
    Step,
    Turn,
    answering,
    assert_no_leaks,
    response,
    settle,
    tool_call,
    track_leaks,
)

from ..approvals.test_approvals import Shell
from ..jobs_support import fresh_database
from ..postgres import PostgresServer
from ..toolsets.test_sql_faults import Proxy

serials = itertools.count(1)
LOG: list[str] = []


pytestmark = pytest.mark.usefixtures("tools_without_a_policy_run")  # not about approvals: undeclared tools run


class Sandbox:
    """What a person keeps between requests: made once per session, cleaned up when it ends."""

    def __init__(self) -> None:
        self.serial = next(serials)

    def cleanup(self) -> None:
        LOG.append(f"cleanup sandbox {self.serial}")


class Page(Toolset):
    """A per-session toolset: one page per session, kept between its runs."""

    def __init__(self, log: list[str] | None = None) -> None:
        self.serial = next(serials)
        self.log = LOG if log is None else log
        self.visits = 0

    @tool
    def visit(self) -> str:
        """Visit the page."""
        self.visits += 1
        return f"page {self.serial} visit {self.visits}"

    def cleanup(self) -> None:
        self.log.append(f"cleanup page {self.serial}")


class App(AgentContainer):
    sandbox = SessionLocalSingleton(Sandbox)
    page = SessionLocalSingleton(Page)


def browsing(app: App) -> Any:
    @entry(toolsets=["page"])
    async def browse(scope: CallScope, input_data: str) -> str:
        sandbox = app.sandbox()
        visited = await scope.call_tool("visit")
        return f"sandbox {sandbox.serial}, {visited}"

    return browse


def torn_down(sandbox: int, page: int) -> list[str]:
    """The cleanups of a session's sandbox and page: in reverse order of creation (serials count up)."""
    made = sorted([(sandbox, f"cleanup sandbox {sandbox}"), (page, f"cleanup page {page}")])
    return [line for _, line in reversed(made)]


def serials_of(output: str) -> tuple[int, int, int]:
    """(sandbox, page, visit) from `sandbox 3, page 4 visit 2`."""
    words = output.replace(",", "").split()
    return int(words[1]), int(words[3]), int(words[5])


async def test_a_sessions_objects_are_shared_by_its_runs_and_seen_by_no_other_session() -> None:
    LOG.clear()
    app = App()
    async with Runtime(app, entries=[browsing(app)]) as runtime:
        alice = await runtime.session("alice")
        first = serials_of((await alice.run("browse", "go")).output)
        second = serials_of((await runtime.run("browse", "go", session="alice")).output)
        bobs = serials_of((await runtime.run("browse", "go", session="bob")).output)
        assert first[:2] == second[:2] and (first[2], second[2]) == (1, 2), "one sandbox and page per session"
        assert not set(bobs[:2]) & set(first[:2]), "another session never sees them"
        assert LOG == []
        assert set(alice.per_session) == {"sandbox", "page"}
        await alice.aclose()
        sandbox, page, _ = first
        assert torn_down(sandbox, page) == LOG, "torn down in reverse order"
        with pytest.raises(SessionError, match=r"session 'alice' is closed .* runtime\.session\('alice'\)"):
            await alice.run("browse", "go")
        again = serials_of((await runtime.run("browse", "go", session="alice")).output)
        assert again[0] not in (first[0], bobs[0]) and again[2] == 1, "reopened: new objects"
    assert len(LOG) == 6, "closing the runtime tears down the sessions still open"


async def test_runtime_sessions_is_a_read_only_view_of_the_open_sessions() -> None:
    async with Runtime(App(), entries=[browsing(App())]) as runtime:
        open_now = runtime.sessions
        ada = await runtime.session("ada")
        assert dict(open_now) == {"ada": ada}  # a view: what opens later is in it
        with pytest.raises(TypeError):
            open_now["bob"] = ada  # type: ignore[index]
        await ada.aclose()
        assert dict(open_now) == {} and ada.closed
        again = await runtime.session("ada")
        assert again is not ada and open_now["ada"] is again
    assert dict(open_now) == {}


async def test_a_run_given_no_session_is_a_session_of_its_own() -> None:
    LOG.clear()
    app = App()
    async with Runtime(app, entries=[browsing(app)]) as runtime:
        first = serials_of((await runtime.run("browse", "go")).output)
        assert torn_down(first[0], first[1]) == LOG, "gone with the run"
        second = serials_of((await runtime.run("browse", "go")).output)
        assert second[0] != first[0] and second[2] == 1
        assert runtime.sessions == {}


async def test_per_session_toolsets_without_a_container() -> None:
    log: list[str] = []

    @entry(toolsets=["page"])
    async def visit(scope: CallScope, input_data: str) -> str:
        return str(await scope.call_tool("visit"))

    runtime = Runtime(None, entries=[visit], toolsets={"page": ToolsetSpec(lambda: Page(log), Scope.PER_SESSION)})
    async with runtime:
        outputs = [(await runtime.run("visit", "go", session="s")).output for _ in range(3)]
        assert [output.split()[-1] for output in outputs] == ["1", "2", "3"]
        assert len({output.split()[1] for output in outputs}) == 1
        assert log == []
    assert len(log) == 1


async def test_an_idle_session_closes_and_tears_down_its_objects() -> None:
    LOG.clear()
    config = RuntimeConfig(session_idle_timeout=0.01, approval_default="allow")  # not about approvals
    app = App()
    async with Runtime(app, entries=[browsing(app)], config=config) as runtime:
        session = await runtime.session("idle")
        sandbox, page, _ = serials_of((await session.run("browse", "go")).output)
        await session.wait_closed()
        assert torn_down(sandbox, page) == LOG
        assert "idle" not in runtime.sessions


async def test_one_run_at_a_time_and_the_reaper_never_closes_a_busy_session() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    @entry
    async def slow(scope: CallScope, input_data: str) -> str:
        started.set()
        await release.wait()
        return "done"

    async with Runtime(None, entries=[slow], config=RuntimeConfig(session_idle_timeout=0.01)) as runtime:
        session = await runtime.session("conv-42")
        first = asyncio.create_task(session.run("slow", "first"))
        await started.wait()
        with pytest.raises(SessionBusy, match=r"session 'conv-42' is running another run") as refused:
            await runtime.run("slow", "second", session="conv-42")
        assert isinstance(refused.value, LlmDoError)
        await asyncio.sleep(0.05)  # longer than the idle timeout: the session is busy, not idle
        assert not session.closed and session.busy
        release.set()
        assert (await first).output == "done"
        await session.wait_closed()  # idle now: it closes


ASK = ToolPolicy(default="ask")


def rm_then_echo(turn: Turn) -> Step:
    """Remove the file, then say what came back; a session's history has earlier turns before this one."""
    answered = turn.returns
    return str(answered[0]) if answered else tool_call("rm", path="commit.txt")


async def test_approve_for_session_stays_in_its_session() -> None:
    asked: list[str] = []

    def approver_for(person: str) -> Any:
        def approver(request: ApprovalRequest) -> Approval:
            asked.append(person)
            return Approval.for_session()

        return approver

    ran: list[str] = []
    job = AgentEntry(Agent(answering(rm_then_echo)), name="job", toolsets=["shell"])
    async with Runtime(None, entries=[job], toolsets={"shell": lambda: Shell(ran)}, policies={"shell": ASK}) as runtime:
        alice = await runtime.session("alice", approver=approver_for("alice"))
        bob = await runtime.session("bob", approver=approver_for("bob"))
        await alice.run("job", "go")  # asked, approved for Alice's session
        await bob.run("job", "go")  # the identical call in Bob's session: Bob is asked
        await alice.run("job", "go")  # Alice's own approval: not asked
        await bob.run("job", "go")  # Bob's own approval: not asked
        await runtime.run("job", "go", approver=approver_for("carol"))  # a run of its own: asked
    assert asked == ["alice", "bob", "carol"]
    assert len(ran) == 5


async def test_an_identical_question_pending_in_another_session_neither_holds_back_nor_approves_this_one() -> None:
    """Alice and Bob's sessions run the same call at once: Bob is asked while Alice still thinks (her pending
    question is no twin of his), and her "approve for session", given after his denial, approves only hers."""
    alice_asked, bob_answered = asyncio.Event(), asyncio.Event()
    asked: list[str] = []

    async def alice(request: ApprovalRequest) -> Approval:
        asked.append(f"alice:{request.session_id}")
        alice_asked.set()
        await bob_answered.wait()
        return Approval.for_session()

    async def bob(request: ApprovalRequest) -> Approval:
        asked.append(f"bob:{request.session_id}")
        bob_answered.set()
        return Approval.deny("not mine")

    ran: list[str] = []
    job = AgentEntry(Agent(answering(rm_then_echo)), name="job", toolsets=["shell"])
    async with Runtime(None, entries=[job], toolsets={"shell": lambda: Shell(ran)}, policies={"shell": ASK}) as runtime:
        alices_session = await runtime.session("alice", approver=alice)
        bobs_session = await runtime.session("bob", approver=bob)
        alices_run = asyncio.create_task(alices_session.run("job", "go"))
        await alice_asked.wait()
        async with asyncio.timeout(30):  # a guard: Bob waiting on Alice's question would never end
            bobs = await bobs_session.run("job", "go")
        alices = await alices_run
        bobs_again = await bobs_session.run("job", "go")  # Alice's grant is hers: Bob is asked again
    assert asked == ["alice:alice", "bob:bob", "bob:bob"]
    assert ran == ["rm commit.txt"]
    assert alices.output == "removed commit.txt"
    assert "denied it: not mine" in bobs.output and "denied it: not mine" in bobs_again.output


async def test_identical_questions_pending_in_one_session_are_asked_once() -> None:
    asked: list[ApprovalRequest] = []
    first_asked, answer = asyncio.Event(), asyncio.Event()

    async def approver(request: ApprovalRequest) -> Approval:
        asked.append(request)
        first_asked.set()
        await answer.wait()
        return Approval.for_session()

    ran: list[str] = []

    def twice(turn: Turn) -> Step:
        return tool_call("worker", input="go") if turn.step == 0 else "done"

    boss = AgentEntry(Agent(answering(twice)), name="boss", toolsets=["worker"])
    worker = AgentEntry(Agent(answering(rm_then_echo)), name="worker", toolsets=["shell"])

    @entry(toolsets=["boss"])
    async def both(scope: CallScope, input_data: str) -> list[Any]:
        return list(await asyncio.gather(scope.call_agent("boss", "a"), scope.call_agent("boss", "b")))

    async with Runtime(
        None,
        entries=[both, boss, worker],
        toolsets={"shell": lambda: Shell(ran)},
        policies={"shell": ASK},
        approver=approver,
    ) as runtime:
        running = asyncio.create_task(runtime.run("both", "go", session="s"))
        await first_asked.wait()
        for _ in range(100):
            await asyncio.sleep(0)  # time for the twin to reach its own question, if it were to ask
        answer.set()
        await running
    assert len(asked) == 1, "the twin waited for the first answer, which approved it for the session"
    assert ran == ["rm commit.txt", "rm commit.txt"]


def prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]


async def test_a_session_carries_its_conversation_and_its_usage() -> None:
    model = ScriptedModel("Hello, Ada.", "Your name is Ada.", "Hello, Bo.")
    chat = AgentEntry(Agent(model), name="chat")
    async with Runtime(None, entries=[chat]) as runtime:
        session = await runtime.session("ada")
        first = await session.run("chat", "I am Ada.")
        second = await session.run("chat", "What is my name?")
        assert prompts(model.turns[1].messages) == ["I am Ada.", "What is my name?"]
        assert second.output == "Your name is Ada."
        assert session.history == second.messages
        assert session.usage.requests == 2
        assert session.usage.input_tokens == first.usage.input_tokens + second.usage.input_tokens
        other = await runtime.run("chat", "I am Bo.", session="bo")
        assert prompts(model.turns[2].messages) == ["I am Bo."], "another session starts afresh"
        assert other.output == "Hello, Bo."
        with pytest.raises(SessionError, match=r"pass either session= or message_history=, not both"):
            await runtime.run("chat", "hi", session=session, message_history=first.messages)
    model.assert_done()


async def test_a_conversation_continues_from_the_store_after_its_session_closed_and_in_a_new_runtime() -> None:
    store = InMemoryHistoryStore()
    model = ScriptedModel("Noted: blue.", "You like blue.", "Still blue.")
    chat = AgentEntry(Agent(model), name="chat")
    async with Runtime(None, entries=[chat], history_store=store) as runtime:
        session = await runtime.session("conv-7")
        await session.run("chat", "I like blue.")
        await session.aclose()
        reopened = await runtime.session("conv-7")
        assert reopened is not session
        await reopened.run("chat", "What do I like?")
    async with Runtime(None, entries=[chat], history_store=store) as restarted:
        await restarted.run("chat", "And now?", session="conv-7")
    assert prompts(model.turns[2].messages) == ["I like blue.", "What do I like?", "And now?"]
    assert len(store) == 1


async def test_a_session_open_in_two_processes_continues_what_the_other_added() -> None:
    # Two runtimes on one store stand for two web processes behind a load balancer: each message of
    # the conversation may reach either, while both keep the session open.
    store = InMemoryHistoryStore()
    model = ScriptedModel("Noted: Ada.", "Noted: Paris.", "Ada, in Paris.")
    chat = AgentEntry(Agent(model), name="chat")
    async with (
        Runtime(None, entries=[chat], history_store=store) as first,
        Runtime(None, entries=[chat], history_store=store) as second,
    ):
        here = await first.session("conv-9")
        await here.run("chat", "I am Ada.")
        await second.run("chat", "I live in Paris.", session="conv-9")
        answer = await here.run("chat", "Who and where am I?")
        assert here.history == answer.messages == (await store.load("conv-9")).messages
    assert prompts(model.turns[2].messages) == ["I am Ada.", "I live in Paris.", "Who and where am I?"]
    assert answer.output == "Ada, in Paris."


async def kept(kept_in: str, request: pytest.FixtureRequest, stack: contextlib.AsyncExitStack) -> HistoryStore:
    """An empty history store kept in memory or in a fresh PostgreSQL database, for the length of `stack`."""
    if kept_in == "memory":
        return InMemoryHistoryStore()
    dsn = await stack.enter_async_context(fresh_database(request.getfixturevalue("postgres")))
    return await stack.enter_async_context(PostgresHistoryStore(dsn))


@pytest.mark.parametrize("kept_in", ["memory", "postgresql"])
async def test_two_processes_running_one_conversation_at_once_lose_no_turn_silently(
    kept_in: str, request: pytest.FixtureRequest
) -> None:
    """Two web processes each get a message of one conversation at once: both runs start from the same
    history, so the turn saved second would overwrite the first. It is refused with `HistoryConflict`,
    saving nothing, and the conversation goes on from the turn saved first, in either process."""
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if prompts(messages)[-1] == "I am Ada.":
            started.set()
            await release.wait()
        return response(f"Noted {len(messages)}.")

    slow_chat = AgentEntry(Agent(FunctionModel(slow)), name="chat")
    fast_chat = AgentEntry(Agent(ScriptedModel("Noted: Paris.")), name="chat")
    async with contextlib.AsyncExitStack() as stack:
        store = await kept(kept_in, request, stack)
        first = await stack.enter_async_context(Runtime(None, entries=[slow_chat], history_store=store))
        second = await stack.enter_async_context(Runtime(None, entries=[fast_chat], history_store=store))
        late = asyncio.create_task(first.run("chat", "I am Ada.", session="conv"))
        await started.wait()
        await second.run("chat", "I live in Paris.", session="conv")
        release.set()
        with pytest.raises(
            HistoryConflict, match=r"session 'conv' was continued or deleted elsewhere while this run ran"
        ) as lost:
            await late
        assert isinstance(lost.value, LlmDoError)
        assert prompts(lost.value.messages) == ["I am Ada."] and run_report(lost.value).usage.requests == 1
        assert prompts((await store.load("conv")).messages) == ["I live in Paris."]
        again = await first.run("chat", "I am Ada.", session="conv")  # sent again: it sees the other turn
        assert again.output == "Noted 3."
        assert prompts((await store.load("conv")).messages) == ["I live in Paris.", "I am Ada."]


async def test_a_store_that_keeps_nothing_leaves_an_open_session_its_own_history() -> None:
    model = ScriptedModel("Noted: Ada.", "You are Ada.")
    chat = AgentEntry(Agent(model), name="chat")
    async with Runtime(None, entries=[chat], history_store=InMemoryHistoryStore(limit=0)) as runtime:
        session = await runtime.session("conv-0")
        await session.run("chat", "I am Ada.")
        await session.run("chat", "Who am I?")
    assert prompts(model.turns[1].messages) == ["I am Ada.", "Who am I?"]


async def test_an_evicted_conversation_leaves_an_open_session_its_own_history() -> None:
    """A bounded store forgets the least recently saved conversation; the session that has it open goes on with its
    own copy (and deleting what the store no longer keeps leaves the session alone too)."""
    model = ScriptedModel("Noted: Ada.", "Noted: Bo.", "You are Ada.")
    chat = AgentEntry(Agent(model), name="chat")
    store = InMemoryHistoryStore(limit=1)
    async with Runtime(None, entries=[chat], history_store=store) as runtime:
        ada = await runtime.session("ada")
        await ada.run("chat", "I am Ada.")
        await runtime.run("chat", "I am Bo.", session="bo")
        assert await store.load("ada") == StoredHistory([], 0) and len(store) == 1  # evicted
        await store.delete("ada")
        assert len(store) == 1
        answer = await ada.run("chat", "Who am I?")
    assert prompts(model.turns[2].messages) == ["I am Ada.", "Who am I?"]
    assert prompts((await store.load("ada")).messages) == ["I am Ada.", "Who am I?"] == prompts(answer.messages)


@pytest.mark.parametrize("kept_in", ["memory", "postgresql"])
async def test_a_conversation_deleted_while_its_session_is_open_never_comes_back(
    kept_in: str, request: pytest.FixtureRequest
) -> None:
    """The store keeps the deleted conversation's id and a new version, no message: the open session drops its
    copy, and its next message starts a fresh conversation, saved over that version."""
    model = ScriptedModel("Noted: Ada.", "Who are you?", "Noted: Bo.")
    chat = AgentEntry(Agent(model), name="chat")
    async with contextlib.AsyncExitStack() as stack:
        store = await kept(kept_in, request, stack)
        runtime = await stack.enter_async_context(Runtime(None, entries=[chat], history_store=store))
        session = await runtime.session("conv")
        await session.run("chat", "I am Ada.")
        before = (await store.load("conv")).version
        await store.delete("conv")
        marker = await store.load("conv")
        assert marker.messages == [] and marker.version not in (0, before)
        await store.delete("nobody")  # nothing to delete: nothing kept
        assert await store.load("nobody") == StoredHistory([], 0)
        answer = await session.run("chat", "Who am I?")
        assert prompts(model.turns[1].messages) == ["Who am I?"], "the model saw nothing of the deleted conversation"
        assert session.history == answer.messages == (await store.load("conv")).messages
        await session.run("chat", "I am Bo.")
    assert prompts(model.turns[2].messages) == ["Who am I?", "I am Bo."]


@pytest.mark.parametrize("kept_in", ["memory", "postgresql"])
async def test_a_run_in_flight_when_its_conversation_is_deleted_saves_nothing_of_it(
    kept_in: str, request: pytest.FixtureRequest
) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if prompts(messages)[-1] == "And I live in Paris.":
            started.set()
            await release.wait()
        return response(f"Noted {len(messages)}.")

    chat = AgentEntry(Agent(FunctionModel(slow)), name="chat")
    async with contextlib.AsyncExitStack() as stack:
        store = await kept(kept_in, request, stack)
        runtime = await stack.enter_async_context(Runtime(None, entries=[chat], history_store=store))
        session = await runtime.session("conv")
        await session.run("chat", "I am Ada.")
        late = asyncio.create_task(session.run("chat", "And I live in Paris."))
        await started.wait()
        await store.delete("conv")
        release.set()
        with pytest.raises(HistoryConflict, match=r"session 'conv' was continued or deleted elsewhere") as lost:
            await late
        assert prompts(lost.value.messages) == ["I am Ada.", "And I live in Paris."]
        assert (await store.load("conv")).messages == []
        again = await session.run("chat", "And I live in Paris.")  # sent again: a fresh conversation
        assert again.output == "Noted 1."
        assert prompts((await store.load("conv")).messages) == ["And I live in Paris."]


async def test_a_conversation_deleted_by_another_process_is_never_saved_back_by_this_one(
    postgres: PostgresServer,
) -> None:
    """Two runtimes, each with its own store on one database, stand for two web processes: one deletes the
    conversation (a person's "delete" button), the other has it open; the table never holds it again."""
    model = ScriptedModel("Noted: Ada.", "Who are you?")
    chat = AgentEntry(Agent(model), name="chat")
    async with (
        fresh_database(postgres) as dsn,
        PostgresHistoryStore(dsn) as here_store,
        PostgresHistoryStore(dsn) as there_store,
        Runtime(None, entries=[chat], history_store=here_store) as here,
        Runtime(None, entries=[chat], history_store=there_store) as there,
    ):
        session = await there.session("conv")
        await session.run("chat", "I am Ada.")
        assert here.sessions == {}
        await here.history_store.delete("conv")
        await session.run("chat", "Who am I?")
        connection = await asyncpg.connect(dsn)
        try:
            rows = await connection.fetch("SELECT session_id, messages::text FROM llm_do_session_history_turns")
        finally:
            await connection.close()
    assert prompts(model.turns[1].messages) == ["Who am I?"]
    assert [row[0] for row in rows] == ["conv"] and "Ada" not in rows[0][1] and "Who am I?" in rows[0][1]


@pytest.mark.long
async def test_sessions_idled_out_leave_nothing_alive_and_memory_returns_to_its_baseline() -> None:
    log: list[str] = []

    class Memo(Toolset):
        default_policy = ToolPolicy()  # about sessions, not approvals

        def __init__(self) -> None:
            self.notes: list[str] = []

        @tool
        def note(self, text: str) -> str:
            """Keep a note for the session."""
            self.notes.append(text)
            return text

        def cleanup(self) -> None:
            log.append("cleanup")

    @entry(toolsets=["memo"])
    async def remember(scope: CallScope, input_data: str) -> str:
        return str(await scope.call_tool("note", {"text": input_data}))

    config = RuntimeConfig(session_idle_timeout=0.01)
    toolsets = {"memo": ToolsetSpec(Memo, Scope.PER_SESSION)}

    async def sessions(runtime: Runtime, ids: range) -> None:
        opened = []
        for number in ids:
            opened.append(session := await runtime.session(f"user-{number}"))
            await session.run("remember", f"note {number}")
        await asyncio.gather(*(session.wait_closed() for session in opened))  # each closes once idle
        opened.clear()
        await settle()
        assert runtime.sessions == {}

    with track_leaks():
        async with Runtime(None, entries=[remember], toolsets=toolsets, config=config) as runtime:
            await sessions(runtime, range(200))  # warm up: caches and pools reach their size
            assert_no_leaks()  # (which also lets the tracker forget what ended)
            baseline = len(gc.get_objects())
            await sessions(runtime, range(200, 10_200))
            assert_no_leaks()
            grown = len(gc.get_objects()) - baseline
    assert len(log) == 10_200
    assert grown < 1_000, f"{grown} more objects after 10,000 sessions than after 200"


async def test_a_conversation_kept_in_postgresql_continues_in_a_new_runtime(postgres: PostgresServer) -> None:
    model = ScriptedModel("Noted: blue.", "You like blue.")
    chat = AgentEntry(Agent(model), name="chat")
    async with fresh_database(postgres) as dsn:
        async with PostgresHistoryStore(dsn) as store, Runtime(None, entries=[chat], history_store=store) as first:
            session = await first.session("conv-7")
            said = await session.run("chat", "I like blue.")
        async with PostgresHistoryStore(dsn) as store, Runtime(None, entries=[chat], history_store=store) as restarted:
            await restarted.run("chat", "What do I like?", session="conv-7")
            assert (await store.load("conv-7")).messages == restarted.sessions["conv-7"].history
            assert await store.load("nobody") == StoredHistory([], 0)
            await store.delete("conv-7")
            assert (await store.load("conv-7")).messages == []
        connection = await asyncpg.connect(dsn)
        try:
            rows = await connection.fetch("SELECT session_id, length FROM llm_do_session_history")
            turns = await connection.fetch("SELECT session_id FROM llm_do_session_history_turns")
        finally:
            await connection.close()
    assert prompts(model.turns[1].messages) == ["I like blue.", "What do I like?"]
    assert [message.parts for message in said.messages] == [message.parts for message in model.turns[1].messages[:2]]
    assert rows == [("conv-7", 0)] and turns == []  # deleted: the id and its version stay, as a marker, no message


async def test_a_conversation_holding_a_nul_character_is_kept_in_a_table_an_earlier_version_made(
    postgres: PostgresServer,
) -> None:
    """PostgreSQL's jsonb refuses a NUL character; the store keeps the conversation as json text, and turns the
    jsonb column of a table made by an earlier version into json, keeping its rows."""
    model = ScriptedModel("Noted: a\x00b.")
    chat = AgentEntry(Agent(model), name="chat")
    async with fresh_database(postgres) as dsn:
        connection = await asyncpg.connect(dsn)
        try:
            await connection.execute(
                "CREATE TABLE llm_do_session_history (session_id text PRIMARY KEY, messages jsonb NOT NULL,"
                " updated_at timestamptz NOT NULL DEFAULT now())"
            )
            await connection.execute("INSERT INTO llm_do_session_history VALUES ('old', '[]', now())")
        finally:
            await connection.close()
        async with PostgresHistoryStore(dsn) as store, Runtime(None, entries=[chat], history_store=store) as runtime:
            said = await runtime.run("chat", "Say a\x00b.", session="conv-nul")
            assert (await store.load("conv-nul")).messages == said.messages
            assert await store.load("old") == StoredHistory([], 1)  # the version column was added
        assert said.output == "Noted: a\x00b."


async def test_web_processes_starting_together_each_open_the_history_store(postgres: PostgresServer) -> None:
    """Every process of a service starts its store at once on a new database: each creates the table if need
    be, and none fails because another made it at the same moment."""
    async with fresh_database(postgres) as dsn:
        for table in ("history_a", "history_b", "history_c", "history_d", "history_e"):
            stores = [PostgresHistoryStore(dsn, table=table) for _ in range(4)]
            try:
                loaded = await asyncio.gather(*(store.load("conv") for store in stores))
            finally:
                for store in stores:
                    await store.aclose()
            assert loaded == [StoredHistory()] * 4


async def test_a_history_store_that_cannot_reach_postgresql_says_so_and_names_the_session(tmp_path: Path) -> None:
    model = ScriptedModel("Noted.")
    chat = AgentEntry(Agent(model), name="chat")
    nowhere = f"postgresql://app@/app?host={tmp_path}"  # a socket directory where no server listens
    async with PostgresHistoryStore(nowhere) as store, Runtime(None, entries=[chat], history_store=store) as runtime:
        with pytest.raises(
            HistoryError,
            match=r"PostgresHistoryStore \(table 'llm_do_session_history'\) could not load the conversation of "
            r"session 'conv-7': PostgreSQL is unreachable or dropped the connection \(FileNotFoundError: .*\); "
            "check that it runs",
        ):
            await runtime.run("chat", "Remember this.", session="conv-7")
        assert "conv-7" not in runtime.sessions and model.turns == []


async def test_a_run_cancelled_before_it_started_lets_go_of_its_session() -> None:
    @entry
    async def echo(scope: CallScope, input_data: str) -> str:
        return input_data

    async with Runtime(None, entries=[echo]) as runtime:
        session = await runtime.session("s")
        doomed = asyncio.create_task(session.run("echo", "never"))
        await asyncio.sleep(0)  # the run's task exists and holds the session, but has not started
        assert session.busy
        doomed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await doomed
        assert not session.busy
        assert (await session.run("echo", "next")).output == "next"


async def test_a_session_whose_closing_was_cancelled_still_tears_down() -> None:
    LOG.clear()
    app = App()
    started, release = asyncio.Event(), asyncio.Event()

    @entry(toolsets=["page"])
    async def wait(scope: CallScope, input_data: str) -> str:
        app.sandbox()
        started.set()
        await release.wait()
        return "done"

    async with Runtime(app, entries=[wait]) as runtime:
        session = await runtime.session("s")
        running = asyncio.create_task(session.run("wait", "go"))
        await started.wait()
        closing = asyncio.create_task(session.aclose())  # waits for the run in progress
        await asyncio.sleep(0)
        closing.cancel()  # whoever asked stops waiting: the session still closes
        with pytest.raises(asyncio.CancelledError):
            await closing
        release.set()
        await running
    assert len(LOG) == 2, "its sandbox and page were torn down"
    assert session.closed and runtime.sessions == {}


async def test_a_run_in_progress_when_its_session_closes_ends_well_and_its_history_is_kept() -> None:
    """And one run at a time per conversation, across the close: the id opened meanwhile waits until the run
    in progress has ended and its history is saved, so the next message sees its turn."""
    started, release = asyncio.Event(), asyncio.Event()

    async def slow_first(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if prompts(messages)[-1] == "I like blue.":
            started.set()
            await release.wait()
        return response(f"Noted {len(messages)}.")

    store = InMemoryHistoryStore()
    chat = AgentEntry(Agent(FunctionModel(slow_first)), name="chat")
    async with Runtime(None, entries=[chat], history_store=store) as runtime:
        session = await runtime.session("conv")
        first = asyncio.create_task(session.run("chat", "I like blue."))
        await started.wait()
        closing = asyncio.create_task(session.aclose())
        await asyncio.sleep(0)  # the session is closing, waiting for its run
        second = asyncio.create_task(runtime.run("chat", "And green.", session="conv"))
        try:
            for _ in range(5):
                await asyncio.sleep(0)
            assert not second.done() and not runtime.sessions  # the id waits for its closing session
        finally:
            release.set()
        result = await first
        await closing
        assert (await second).output == "Noted 3."  # it saw the first run's turn
    assert result.output == "Noted 1."
    assert prompts((await store.load("conv")).messages) == ["I like blue.", "And green."]


class SlowToClean:
    """A per-session object whose cleanup takes a while (closes a remote sandbox, say)."""

    async def cleanup(self) -> None:
        await asyncio.sleep(0.2)
        LOG.append("cleaned slowly")


class SlowApp(AgentContainer):
    slow = SessionLocalSingleton(SlowToClean)


async def test_a_runtime_close_cancelled_while_sessions_tear_down_finishes_them_then_is_cancelled() -> None:
    """Teardown comes first, and the cancellation is not lost: a shutdown deadline still ends `aclose` as a
    timeout once the session's objects are cleaned up."""
    LOG.clear()
    app = SlowApp()

    @entry()
    async def use(scope: CallScope, input_data: str) -> str:
        app.slow()
        return "used"

    runtime = Runtime(app, entries=[use])
    session = await runtime.session("s")
    assert (await session.run("use", "go")).output == "used"
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await runtime.aclose()
    assert LOG == ["cleaned slowly"], "the session's object was cleaned up before aclose gave up"
    assert session.closed and runtime.sessions == {}


async def test_a_session_id_postgresql_cannot_keep_is_refused_when_the_session_opens(postgres: PostgresServer) -> None:
    """A NUL character, a lone surrogate, or an id too long for the table's primary key: refused before any
    run does work whose conversation could not be kept, and the refused session does not stay open."""
    model = ScriptedModel("Noted.")
    chat = AgentEntry(Agent(model), name="chat")
    long_id = "".join(hashlib.sha256(bytes([number])).hexdigest() for number in range(100))  # like a random token
    async with (
        fresh_database(postgres) as dsn,
        PostgresHistoryStore(dsn) as store,
        Runtime(None, entries=[chat], history_store=store) as runtime,
    ):
        for session_id, why in [
            ("conv\x00nul", "it holds a NUL character"),
            ("conv\ud800", "it holds a lone surrogate"),
            (long_id, "it is 6400 bytes long"),
        ]:
            with pytest.raises(LlmDoError, match=f"cannot keep the conversation of session .*: {why}"):
                await runtime.run("chat", "Remember this.", session=session_id)
            assert session_id not in runtime.sessions
        assert model.turns == []  # no run started
        said = await runtime.run("chat", "Remember this.", session="Zoë's \"☃\" ' OR 1=1 --")
        assert (await store.load("Zoë's \"☃\" ' OR 1=1 --")).messages == said.messages


async def test_a_session_closed_from_within_its_own_run_closes_when_the_run_ends() -> None:
    """A tool that ends the conversation: waiting for the run in progress would wait for itself."""
    log: list[str] = []
    sessions: list[Session] = []

    @entry(toolsets=["page"])
    async def goodbye(scope: CallScope, input_data: str) -> str:
        visited = str(await scope.call_tool("visit"))
        await sessions[0].aclose()
        log.append(f"still running after aclose: {visited}")
        with pytest.raises(SessionBusy):  # its id opens again once this run has ended
            await runtime.session("leaving")
        return "bye"

    runtime = Runtime(None, entries=[goodbye], toolsets={"page": ToolsetSpec(lambda: Page(log), Scope.PER_SESSION)})
    async with runtime:
        session = await runtime.session("leaving")
        sessions.append(session)
        async with asyncio.timeout(10):  # a guard: before, the run waited for itself forever
            result = await session.run("goodbye", "go")
            await session.wait_closed()
        assert "leaving" not in runtime.sessions
    assert result.output == "bye"
    assert [line.split()[0] for line in log] == ["still", "cleanup"]  # torn down after the run, not during it


class RemoteStore:
    """A history store whose loads take their time, as a remote database's do (here: until `answer` is set)."""

    def __init__(self) -> None:
        self.loading, self.answer = asyncio.Event(), asyncio.Event()

    async def load(self, session_id: str) -> StoredHistory:
        self.loading.set()
        await self.answer.wait()
        return StoredHistory()

    async def save(self, session_id: str, messages: list[ModelMessage], *, version: int | None = None) -> int | None:
        return 1

    async def delete(self, session_id: str) -> None:
        pass


async def test_a_history_store_on_a_silent_network_fails_the_run_and_frees_its_session(
    postgres: PostgresServer,
) -> None:
    """Nothing comes back, not even a reset: the save gives up after the store's timeout with a `HistoryError`,
    instead of holding the session busy for good, and the conversation goes on once the network flows again."""
    proxy = Proxy(postgres)
    await proxy.start()

    def silenced(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        proxy.flowing = prompts(messages)[-1] != "I am Ada."  # silent from the answer on: the save gets no reply
        return response(f"Noted {len(messages)}.")

    chat = AgentEntry(Agent(FunctionModel(silenced)), name="chat")
    try:
        async with fresh_database(postgres) as dsn:
            database = dsn.split("@/", 1)[1].split("?", 1)[0]
            async with (
                PostgresHistoryStore(proxy.dsn(database), timeout=0.5) as store,
                Runtime(None, entries=[chat], history_store=store) as runtime,
            ):
                session = await runtime.session("conv")
                with pytest.raises(
                    HistoryError,
                    match=r"could not save the conversation of session 'conv' .*: "
                    r"PostgreSQL did not answer within 0.5 s",
                ):
                    await asyncio.wait_for(session.run("chat", "I am Ada."), 30)  # (before: it hung)
                assert not session.busy
                proxy.flowing = True
                answer = await session.run("chat", "Who am I?")
                assert answer.output == "Noted 1." and (await store.load("conv")).messages == answer.messages
            proxy.cut()
    finally:
        await proxy.close()


class ListStore:
    """A store written to an older protocol, whose load returned the bare messages."""

    async def load(self, session_id: str) -> list[ModelMessage]:
        return []

    async def save(self, session_id: str, messages: list[ModelMessage], *, version: int | None = None) -> int | None:
        return 1

    async def delete(self, session_id: str) -> None:
        pass


async def test_a_store_whose_load_returns_bare_messages_is_refused_with_what_to_return() -> None:
    chat = AgentEntry(Agent(ScriptedModel()), name="chat")
    async with Runtime(None, entries=[chat], history_store=ListStore()) as runtime:  # type: ignore[arg-type]
        with pytest.raises(HistoryError, match=r"load\('conv'\) returned list, not a StoredHistory"):
            await runtime.session("conv")
        assert runtime.sessions == {}


async def test_a_run_whose_session_was_loading_when_the_runtime_closed_never_starts() -> None:
    log: list[str] = []

    @entry(toolsets=["page"])
    async def visit(scope: CallScope, input_data: str) -> str:
        log.append("the run's body ran")
        return str(await scope.call_tool("visit"))

    store = RemoteStore()
    runtime = Runtime(
        None, entries=[visit], toolsets={"page": ToolsetSpec(lambda: Page(log), Scope.PER_SESSION)}, history_store=store
    )
    late = asyncio.ensure_future(runtime.run("visit", "go", session="late"))
    await store.loading.wait()
    await runtime.aclose()  # nothing in flight yet: it closes at once
    store.answer.set()
    with pytest.raises(RuntimeError, match="this Runtime is closed") as raised:
        await late
    assert isinstance(raised.value, RuntimeClosed) and isinstance(raised.value, LlmDoError)
    assert log == [] and dict(runtime.sessions) == {}


REQUEST: contextvars.ContextVar[Any] = contextvars.ContextVar("request", default=None)
"""What the application keeps in its context for the request that starts a run (a web request's user, say)."""


class Request:
    def __init__(self, user: str) -> None:
        self.user = user


class Poller:
    """A per-session object with a background task of its own, which answers each `ask` when it gets to it."""

    def __init__(self, sandbox: Callable[[], Sandbox]) -> None:
        self.sandbox = sandbox
        self.asks: asyncio.Queue[asyncio.Future[str]] = asyncio.Queue()
        self.task = asyncio.get_running_loop().create_task(self._serve())

    async def _serve(self) -> None:
        while True:
            answer = await self.asks.get()
            try:
                request = REQUEST.get()
                answer.set_result(
                    f"request of {request.user if request else 'nobody'}, sandbox {self.sandbox().serial}"
                )
            except Exception as error:  # (the run that asked fails with it)
                answer.set_exception(error)

    async def ask(self) -> str:
        answer = asyncio.get_running_loop().create_future()
        await self.asks.put(answer)
        return await answer

    async def cleanup(self) -> None:
        self.task.cancel()
        await asyncio.wait((self.task,))


class Polling(AgentContainer):
    sandbox = SessionLocalSingleton(Sandbox)
    poller = SessionLocalSingleton(Poller, sandbox=sandbox.provider)


class PollingToolset(Poller, Toolset):
    """The same as a per-session toolset, made when a call first uses it."""

    def __init__(self) -> None:
        sandbox = Sandbox()
        super().__init__(lambda: sandbox)

    @tool
    async def poll(self) -> str:
        """Ask the poller."""
        return await self.ask()


@pytest.mark.parametrize("made_by", ["provider", "toolset"])
async def test_a_per_session_objects_tasks_keep_nothing_of_the_run_that_made_it(made_by: str) -> None:
    """Its background task serves the session's later runs: it must not act for the first run's request."""
    app = Polling()

    @entry(toolsets=["polling"])
    async def poll(scope: CallScope, input_data: str) -> str:
        if made_by == "provider":
            return await app.poller().ask()
        return str(await scope.call_tool("poll"))

    toolsets = {"polling": ToolsetSpec(PollingToolset, Scope.PER_SESSION)}
    async with Runtime(app, entries=[poll], toolsets=toolsets) as runtime:
        first = Request("alice")
        REQUEST.set(first)
        first_request = weakref.ref(first)
        first_output = (await runtime.run("poll", "go", session="s")).output
        REQUEST.set(Request("bob"))
        del first
        await settle()
        assert first_request() is None, "the first run's request is collectable once the run has ended"
        second_output = (await runtime.run("poll", "go", session="s")).output
    assert first_output.startswith("request of nobody, sandbox ")
    assert second_output == first_output  # the session's own sandbox, reached from the task


def requester() -> str:
    """Whose request the current context belongs to."""
    request = REQUEST.get()
    return request.user if request is not None else "nobody"


class WitnessStore(InMemoryHistoryStore):
    """An in-memory store that notes whose request each load and save runs for."""

    def __init__(self, seen: list[str]) -> None:
        super().__init__()
        self.seen = seen

    async def load(self, session_id: str) -> StoredHistory:
        self.seen.append(f"load for {requester()}")
        return await super().load(session_id)

    async def save(self, session_id: str, messages: list[ModelMessage], *, version: int | None = None) -> int | None:
        self.seen.append(f"save for {requester()}")
        return await super().save(session_id, messages, version=version)


class Farewell(Toolset):
    """A per-session toolset whose tool ends its session, and whose cleanup notes whose request it runs for."""

    def __init__(self, seen: list[str], sessions: list[Session]) -> None:
        self.seen, self.sessions = seen, sessions

    @tool
    async def leave(self) -> str:
        """End the conversation."""
        await self.sessions[0].aclose()  # from within the run: it closes once the run has ended
        return "left"

    def cleanup(self) -> None:
        self.seen.append(f"cleanup for {requester()}")


async def test_a_sessions_history_and_teardown_run_for_no_request() -> None:
    """The store's work and the session's teardown run in a context of their own: a pool's timers would keep
    the request that asked (and its run) for minutes, and the teardown would act for it."""
    seen: list[str] = []
    sessions: list[Session] = []
    chat = AgentEntry(
        Agent(answering(lambda turn: tool_call("leave") if turn.step == 0 else "bye")),
        name="chat",
        toolsets=["farewell"],
    )
    toolsets = {"farewell": ToolsetSpec(lambda: Farewell(seen, sessions), Scope.PER_SESSION)}
    async with Runtime(None, entries=[chat], toolsets=toolsets, history_store=WitnessStore(seen)) as runtime:
        REQUEST.set(Request("alice"))
        sessions.append(await runtime.session("s"))
        assert (await sessions[0].run("chat", "Goodbye.")).output == "bye"
        await sessions[0].wait_closed()
        REQUEST.set(None)
    assert seen == ["load for nobody", "load for nobody", "save for nobody", "cleanup for nobody"]
