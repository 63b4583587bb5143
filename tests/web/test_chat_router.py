"""`llm_do.web.chat_router`: a conversation's live runs as one FastAPI router (messages, the AI SDK's request and
resumable stream, decisions, the conversation read back), who may use it, its limits, the runtime it is given, and
the testing kit's `ChatClient` that reads its stream and answers its questions."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from dependency_injector import containers, providers
from fastapi import FastAPI, HTTPException, Request
from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, UserPromptPart

from llm_do import (
    AgentEntry,
    ConfigurationError,
    LiveRun,
    PostgresHistoryStore,
    Runtime,
    RuntimeConfig,
    RuntimeResource,
    ToolPolicy,
    Toolset,
    tool,
)
from llm_do.testing import (
    ChatClient,
    ChatResponseError,
    Question,
    ScriptedModel,
    Turn,
    asgi_client,
    read_vercel_stream,
    tool_call,
)
from llm_do.web import ChatAction, ChatLimits, ChatRefused, chat_router
from llm_do.web.runs import LocalRuns, RunInFlight

SENT: list[str] = []


class Outbox(Toolset):
    @tool
    def send(self, to: str) -> str:
        """Send the letter to `to`."""
        SENT.append(to)
        return f"sent to {to}"


clerk = AgentEntry(Agent(instructions="Send the person's letters."), name="clerk", toolsets=["outbox"])


@pytest.fixture(autouse=True)
def _forget() -> None:
    SENT.clear()


def make_runtime(container: Any = None, **options: Any) -> Runtime:
    return Runtime(
        container,
        **options,
        entries=[clerk],
        toolsets={"outbox": Outbox},
        policies={"outbox": ToolPolicy(tools={"send": "ask"})},
        config=RuntimeConfig(approval_timeout=30),
    )


def done(turn: Turn) -> str:
    return f"Done: {turn.returns[0]}"


def letter(turn: Turn) -> Any:
    """A `send` to the last word of the person's latest message; once it returned, what it returned."""
    if turn.returns:
        return done(turn)
    said = [
        part.content
        for message in turn.messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]
    return tool_call("send", to=said[-1].split()[-1].lower())


def sending(*names: str) -> ScriptedModel:
    """The clerk's model for one message to each of `names` (in any order, at once): two steps each."""
    return ScriptedModel(*[letter] * (2 * len(names)))


def app_with(runtime: Any, **options: Any) -> FastAPI:
    app = FastAPI()
    app.include_router(chat_router(runtime, entry="clerk", **options))
    return app


@asynccontextmanager
async def serving(model: ScriptedModel, **options: Any) -> AsyncIterator[tuple[httpx.AsyncClient, Runtime]]:
    with clerk.agent.override(model=model):
        async with make_runtime() as runtime, asgi_client(app_with(runtime, **options)) as client:
            yield client, runtime


def approve(question: Question) -> str:
    return "approve"


@pytest.mark.parametrize("via", ["decisions", "sdk"])
async def test_a_message_streams_and_its_question_is_answered_the_pages_way_and_the_sdks(via: str) -> None:
    async with serving(sending("ada"), allow_anyone=True) as (client, _):
        chat = ChatClient(client)
        reply = await chat.send("c1", "write to Ada", answer=approve, via=via)  # type: ignore[arg-type]
        assert reply.text == "Done: sent to ada" and reply.finished and reply.error is None
        [question] = reply.questions
        assert (question.tool, dict(question.args)) == ("send", {"to": "ada"})
        assert "outbox.send" in (question.description or "")
        assert reply.answers == {question.approval_id: "approve"}
        assert reply.decided == {question.approval_id: "approved"}
        assert reply.tool_call("send").state == "done" and reply.tool_call("send").output == "sent to ada"
        assert SENT == ["ada"]
        # read back: the person's message and the answer; nothing in flight, nothing to resume
        saved = await chat.conversation("c1")
        messages = saved["messages"]
        assert messages[0]["role"] == "user" and messages[0]["parts"][0]["text"] == "write to Ada"
        assert messages[-1]["role"] == "assistant" and messages[-1]["parts"][-1]["text"] == "Done: sent to ada"
        assert saved["pending"] == [] and saved["running"] is None
        assert await chat.resume("c1") is None


async def test_a_question_approved_for_the_conversation_is_not_asked_again() -> None:
    asked: list[Question] = []

    def for_the_conversation(question: Question) -> str:
        asked.append(question)
        return "approve_for_session"

    async with serving(sending("ada", "ada"), allow_anyone=True) as (client, _):
        chat = ChatClient(client)
        first = await chat.send("c1", "write to Ada", answer=for_the_conversation)
        again = await chat.send("c1", "again to Ada", answer=for_the_conversation)
    assert (first.text, again.text) == ("Done: sent to ada", "Done: sent to ada")
    assert [question.tool for question in asked] == ["send"] and again.questions == []
    assert again.tool_call("send").state == "done" and SENT == ["ada", "ada"]


async def test_the_ai_sdks_way_refuses_an_approval_for_the_conversation_it_cannot_carry() -> None:
    async with serving(sending("ada"), allow_anyone=True) as (client, runtime):
        chat = ChatClient(client)
        with pytest.raises(ValueError, match="the AI SDK's approval response cannot say 'approve_for_session'"):
            await chat.send("c1", "write to Ada", answer=lambda question: "approve_for_session", via="sdk")
        assert SENT == [] and runtime.stop_asking("the test ends") == 1  # the question was left open


async def test_a_denial_with_its_note_reaches_the_model_and_the_conversation_goes_on() -> None:
    model = sending("bo", "cy")
    async with serving(model, allow_anyone=True) as (client, _):
        chat = ChatClient(client)
        denied = await chat.send("c1", "write to Bo", answer=lambda question: ("deny", "not Bo"))
        assert denied.decided == {denied.questions[0].approval_id: "denied"}
        assert "not Bo" in denied.text and denied.tool_call("send").state == "denied"
        again = await chat.send("c1", "write to Cy", answer=approve, via="sdk")
        assert again.text == "Done: sent to cy"
        assert SENT == ["cy"]
        messages = (await chat.conversation("c1"))["messages"]
        said = [part["text"] for message in messages if message["role"] == "user" for part in message["parts"]]
        assert said == ["write to Bo", "write to Cy"]
    model.assert_done()


async def test_a_reload_mid_question_finds_the_run_its_question_and_the_message_it_answers() -> None:
    async with serving(sending("ada"), allow_anyone=True) as (client, runtime):
        chat = ChatClient(client)
        first = await chat.send("c1", "write to Ada")  # no policy: the reply ends at the question, left open
        [question] = first.open
        saved = await chat.conversation("c1")
        assert saved["running"] == first.message_id
        assert [item["approval_id"] for item in saved["pending"]] == [question.approval_id]
        assert saved["pending"][0]["tool"] == "send" and saved["pending"][0]["args"] == {"to": "ada"}
        assert saved["messages"] == [
            {"id": f"{first.message_id}_prompt", "role": "user", "parts": [{"type": "text", "text": "write to Ada"}]}
        ]
        # a second message while the run waits is refused before its response starts
        with pytest.raises(ChatResponseError) as busy:
            await chat.send("c1", "write to Bo")
        assert busy.value.status == 409 and "conversation 'c1' is still answering" in busy.value.body
        # the resumable stream: the run from its start, to the open question, under the same message
        replayed = await chat.resume("c1")
        assert replayed is not None and replayed.message_id == first.message_id
        assert [item.approval_id for item in replayed.open] == [question.approval_id] and replayed.finished
        # answered the AI SDK's way, in a request carrying the assistant's message: the rest of the run
        rest = await chat.answer_open("c1", replayed, approve)
        assert rest.text == "Done: sent to ada" and rest.message_id == first.message_id
        assert "tool-approval-request" not in [chunk["type"] for chunk in rest.chunks]
        assert runtime.live_run("c1") is None and await chat.resume("c1") is None


async def test_answers_to_a_question_the_run_never_asked_are_refused() -> None:
    async with serving(sending("ada", "bo"), allow_anyone=True) as (client, _):
        chat = ChatClient(client)
        ada = await chat.send("ada-chat", "write to Ada")
        bo = await chat.send("bo-chat", "write to Bo")
        smuggled = _answers_body("bo-chat", bo.message_id, ada.open[0], approved=True)
        refused = await client.post("/chats", json=smuggled)
        assert refused.status_code == 409 and "not a question of the run in flight" in refused.json()["error"]
        nothing = _answers_body("idle", "msg_x", ada.open[0], approved=True)
        assert (await client.post("/chats", json=nothing)).status_code == 409  # no run in flight there
        for conversation, reply in (("ada-chat", ada), ("bo-chat", bo)):
            rest = await chat.answer_open(conversation, reply, approve, via="decisions")
            assert rest.text == f"Done: sent to {conversation.removesuffix('-chat')}"
        assert SENT == ["ada", "bo"]


async def test_decisions_that_cannot_apply_are_refused_saying_why() -> None:
    async with serving(sending("ada"), allow_anyone=True, limits=ChatLimits(note_chars=10)) as (client, _):
        chat = ChatClient(client)
        nobody = await client.post("/chats/c1/decisions", json={"approval_id": "apr_1", "choice": "approve"})
        assert nobody.status_code == 404 and "no live run of session 'c1'" in nobody.json()["error"]
        first = await chat.send("c1", "write to Ada")
        approval_id = first.open[0].approval_id
        wrong = await client.post("/chats/c1/decisions", json={"approval_id": "apr_0000", "choice": "approve"})
        assert wrong.status_code == 409 and approval_id in wrong.json()["error"]  # it says what is pending
        malformed = await client.post("/chats/c1/decisions", json={"approval_id": approval_id})
        assert malformed.status_code == 400 and "choose one of" in malformed.json()["error"]
        not_json = await client.post("/chats/c1/decisions", content=b"approve")
        assert not_json.status_code == 400 and "not JSON" in not_json.json()["error"]
        long_note = {"approval_id": approval_id, "choice": "deny", "note": "because " * 3}
        too_long = await client.post("/chats/c1/decisions", json=long_note)
        assert too_long.status_code == 413
        assert "the note of the decision" in too_long.json()["error"] and "at most 10" in too_long.json()["error"]
        sdk_note = _answers_body("c1", first.message_id, first.open[0], approved=False, reason="because " * 3)
        assert (await client.post("/chats", json=sdk_note)).status_code == 413
        assert [item.approval_id for item in (await chat.resume("c1") or first).open] == [approval_id]  # still open
        assert (await client.post("/chats/c1/decisions", json={"id": approval_id, "approved": True})).status_code == 204


async def test_an_oversize_message_or_body_is_refused_never_cut() -> None:
    limits = ChatLimits(message_chars=20, body_bytes=2_000)
    async with serving(sending(), allow_anyone=True, limits=limits) as (client, runtime):
        long = "write to " + "a" * 20
        for response in (
            await client.post("/chats/c1/messages", json={"text": long}),
            await client.post("/chats", json=_says("c1", long)),
        ):
            assert response.status_code == 413, response.text
            assert response.json()["error"].startswith("the message is 29 characters long; this chat takes messages")
        huge = await client.post("/chats/c1/messages", json={"text": "hi", "pad": "x" * 3_000})
        assert huge.status_code == 413 and "at most 2,000" in huge.json()["error"]
        assert "c1" not in runtime.sessions  # no run started, no session opened
        assert (await client.post("/chats/c1/messages", json={"text": " "})).status_code == 422
        assert (await client.post("/chats/no%20spaces/messages", json={"text": "hi"})).status_code == 400


async def test_a_body_nested_past_what_a_json_reader_takes_is_refused_on_every_endpoint() -> None:
    async with serving(sending(), allow_anyone=True) as (client, runtime):
        for body in (b"[" * 100_000, b'{"text":' * 50_000):  # within the body's bytes; deeper than Python recurses
            for path in ("/chats/c1/messages", "/chats/c1/decisions", "/chats"):
                refused = await client.post(path, content=body)
                assert refused.status_code == 400, (path, refused.text)
                error = refused.json()["error"]
                assert "nests deeper" in error or "recursion limit exceeded" in error, error
        assert "c1" not in runtime.sessions  # no run started


async def test_without_an_access_hook_everyone_is_refused_and_a_hook_decides_who_may_do_what() -> None:
    async with serving(sending()) as (client, _):
        for response in (
            await client.post("/chats"),
            await client.post("/chats/c1/messages", json={"text": "hi"}),
            await client.get("/chats/c1"),
            await client.get("/chats/c1/stream"),
            await client.post("/chats/c1/decisions", json={"approval_id": "apr_1", "choice": "deny"}),
        ):
            assert response.status_code == 401
            assert "access=" in response.json()["error"] and "allow_anyone=True" in response.json()["error"]

    owners: dict[str, str] = {}
    asked: list[tuple[str, ChatAction]] = []

    async def only_its_owner(request: Request, conversation_id: str, action: ChatAction) -> bool:
        user = request.headers.get("x-user")
        asked.append((conversation_id, action))
        if not user:
            raise ChatRefused(401, "say who you are (x-user)")
        if user == "teapot":
            raise HTTPException(418, "FastAPI's own refusal goes through")
        if action in ("open", "send"):
            owners.setdefault(conversation_id, user)
        elif conversation_id not in owners:
            raise ChatRefused(404, f"no conversation {conversation_id!r}")
        return owners[conversation_id] == user

    async with serving(sending("ada"), access=only_its_owner) as (client, _):
        ada, bo = ChatClient(client, headers={"x-user": "ada"}), ChatClient(client, headers={"x-user": "bo"})
        opened = await ada.open()
        assert opened.startswith("chat_") and owners[opened] == "ada"
        first = await ada.send(opened, "write to Ada")
        approval = {"approval_id": first.open[0].approval_id, "choice": "approve"}
        for refused in (
            await client.post(f"/chats/{opened}/decisions", json=approval, headers={"x-user": "bo"}),
            await client.get(f"/chats/{opened}", headers={"x-user": "bo"}),
            await client.get(f"/chats/{opened}/stream", headers={"x-user": "bo"}),
            await client.post(f"/chats/{opened}/messages", json={"text": "hi"}, headers={"x-user": "bo"}),
        ):
            assert refused.status_code == 403 and opened in refused.json()["error"]
        assert (await client.get("/chats/elsewhere", headers={"x-user": "bo"})).status_code == 404
        assert (await client.get(f"/chats/{opened}")).status_code == 401
        teapot = await client.get(f"/chats/{opened}", headers={"x-user": "teapot"})
        assert teapot.status_code == 418 and teapot.json() == {"detail": "FastAPI's own refusal goes through"}
        with pytest.raises(ChatResponseError):
            await bo.conversation(opened)
        assert (
            await client.post(f"/chats/{opened}/decisions", json=approval, headers={"x-user": "ada"})
        ).status_code == 204
        assert (opened, "decide") in asked and (opened, "read") in asked

    with pytest.raises(ConfigurationError, match="not both"):
        chat_router(make_runtime(), entry="clerk", access=only_its_owner, allow_anyone=True)


class Application(containers.DeclarativeContainer):
    __self__ = providers.Self()
    runtime = RuntimeResource(
        __self__,
        entries=[clerk],
        toolsets={"outbox": Outbox},
        policies={"outbox": ToolPolicy(tools={"send": "ask"})},
        config=RuntimeConfig(approval_timeout=30),
    )


async def test_the_runtime_is_a_provider_of_the_applications_container_and_an_override_is_honoured() -> None:
    container = Application()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await container.init_resources()  # type: ignore[misc]
        try:
            yield
        finally:
            await container.shutdown_resources()  # type: ignore[misc]

    app = FastAPI(lifespan=lifespan)
    app.include_router(chat_router(container.runtime, entry="clerk", allow_anyone=True))
    with clerk.agent.override(model=sending("ada", "bo")):
        async with asgi_client(app) as client:
            chat = ChatClient(client)
            assert (await chat.send("c1", "write to Ada", answer=approve)).text == "Done: sent to ada"
            started = await container.runtime()  # type: ignore[misc]
            assert started.sessions["c1"].history  # the container's runtime ran it
            async with make_runtime() as other:
                with container.runtime.override(providers.Object(other)):
                    assert (await chat.send("c2", "write to Bo", answer=approve)).text == "Done: sent to bo"
                assert "c2" in other.sessions and "c2" not in started.sessions


async def test_the_runtime_from_a_fastapi_dependency_and_a_clear_error_for_anything_else() -> None:
    async with make_runtime() as runtime:

        async def from_state(request: Request) -> Runtime:
            found: Runtime = request.state.runtime
            return found

        @asynccontextmanager
        async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
            yield {"runtime": runtime}

        app = FastAPI(lifespan=lifespan)
        app.include_router(chat_router(from_state, entry="clerk", allow_anyone=True))
        with clerk.agent.override(model=sending("ada")):
            async with asgi_client(app) as client:
                assert (await ChatClient(client).send("c1", "to Ada", answer=approve)).text == "Done: sent to ada"

        wrong = FastAPI()
        wrong.include_router(chat_router(lambda: "not a runtime", entry="clerk", allow_anyone=True))
        async with asgi_client(wrong) as client:
            with pytest.raises(ConfigurationError, match="gave str, not a Runtime"):
                await client.get("/chats/c1")
    with pytest.raises(ConfigurationError, match="the class Runtime"):
        chat_router(Runtime, entry="clerk", allow_anyone=True)


async def test_without_its_lifespan_the_router_says_so() -> None:
    async with make_runtime() as runtime:
        app = app_with(runtime, allow_anyone=True)
        transport = httpx.ASGITransport(app=app)  # runs no lifespan
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            with pytest.raises(ConfigurationError, match="start-up has not run"):
                await client.get("/chats/c1")


class Recorded(LocalRuns):
    """A `ChatRuns` seam that records what it is told (where a store shared by processes would write)."""

    def __init__(self) -> None:
        super().__init__()
        self.told: list[tuple[str, str, str]] = []

    async def started(self, conversation_id: str, run: LiveRun, prompt: str) -> RunInFlight:
        self.told.append(("started", conversation_id, prompt))
        return await super().started(conversation_id, run, prompt)

    async def ended(self, conversation_id: str, run: LiveRun) -> None:
        self.told.append(("ended", conversation_id, run.message_id))
        await super().ended(conversation_id, run)


class CountingTurns:
    def __init__(self) -> None:
        self.claims: list[str] = []
        self.releases: list[str] = []

    async def claim(self, conversation_id: str) -> None:
        self.claims.append(conversation_id)

    async def release(self, conversation_id: str) -> None:
        self.releases.append(conversation_id)


async def test_where_runs_are_found_and_turns_claimed_are_the_applications_to_replace() -> None:
    runs, turns = Recorded(), CountingTurns()
    async with serving(sending("ada"), allow_anyone=True, runs=runs, turns=turns) as (client, _):
        reply = await ChatClient(client).send("c1", "write to Ada", answer=approve)
    assert runs.told == [("started", "c1", "write to Ada"), ("ended", "c1", reply.message_id)]
    assert turns.claims == turns.releases == ["c1"]


def test_importing_llm_do_and_its_web_room_imports_no_fastapi() -> None:
    code = "import sys, llm_do, llm_do.web, llm_do.testing; print('fastapi' in sys.modules, 'starlette' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


def _says(chat: str, text: str) -> dict[str, Any]:
    return {"id": chat, "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]} | {
        "trigger": "submit-message"
    }


def _answers_body(
    chat: str, message_id: str | None, question: Question, *, approved: bool, reason: str | None = None
) -> dict[str, Any]:
    part = {
        "type": "dynamic-tool",
        "toolName": question.tool,
        "toolCallId": question.tool_call_id,
        "state": "approval-responded",
        "input": dict(question.args),
        "approval": {"id": question.approval_id, "approved": approved, "reason": reason},
    }
    assistant = {"id": message_id, "role": "assistant", "parts": [{"type": "step-start"}, part]}
    return {"id": chat, "messages": [assistant], "trigger": "submit-message", "messageId": message_id}


async def test_with_a_database_one_message_at_a_time_and_decisions_hold_across_web_processes(dsn: str) -> None:
    """Two web processes (two apps, each its runtime) on one database: a message to the other one while the first
    answers is refused there too, and a decision posted there reaches the run."""
    async with (
        PostgresHistoryStore(dsn) as history,
        make_runtime(history_store=history) as one,
        make_runtime(history_store=history) as two,
    ):
        apps = [app_with(runtime, allow_anyone=True, database_url=dsn) for runtime in (one, two)]
        with clerk.agent.override(model=sending("ada", "bo")):
            async with asgi_client(apps[0]) as first, asgi_client(apps[1]) as other:
                started = await ChatClient(first).send("c1", "write to Ada")  # left at its question
                [question] = started.open
                busy = await other.post("/chats/c1/messages", json={"text": "write to Bo"})
                assert busy.status_code == 409 and "still answering" in busy.json()["error"]
                # the run lives in the first one, and the other one streams it too, its question open
                resumed = await ChatClient(other).resume("c1")
                assert resumed is not None and resumed.message_id == started.message_id
                assert [asked.approval_id for asked in resumed.open] == [question.approval_id]
                listed = (await ChatClient(other).conversation("c1"))["pending"]
                assert [(asked["approval_id"], asked["held"]) for asked in listed] == [(question.approval_id, "live")]
                wrong = await other.post("/chats/c1/decisions", json={"approval_id": "apr_0", "choice": "approve"})
                assert wrong.status_code == 409 and question.approval_id in wrong.json()["error"]

                # a note within the router's characters but past what a NOTIFY carries: 413, saying so, not applied
                heavy = {"approval_id": question.approval_id, "choice": "deny", "note": "\x01" * 400}
                too_large = await other.post("/chats/c1/decisions", json=heavy)
                assert too_large.status_code == 413 and "longer than 2000 bytes" in too_large.json()["error"]
                sdk_heavy = _answers_body("c1", started.message_id, question, approved=False, reason="\x01" * 400)
                assert (await first.post("/chats", json=sdk_heavy)).status_code == 413

                async def decided_elsewhere(asked: Question) -> bool:  # the click reaches the other process
                    decision = {"approval_id": asked.approval_id, "choice": "approve"}
                    assert (await other.post("/chats/c1/decisions", json=decision)).status_code == 204
                    return True

                async with first.stream("GET", "/chats/c1/stream", params={"follow": "true"}) as followed:
                    rest = await read_vercel_stream(followed, on_question=decided_elsewhere)
                assert rest.text == "Done: sent to ada" and rest.message_id == started.message_id
                await eventually_free(first, "c1")
                # the conversation goes on in the other process, from the history the first one saved
                again = await ChatClient(other).send("c1", "write to Bo", answer=approve)
                assert again.text == "Done: sent to bo" and SENT == ["ada", "bo"]
                said = [
                    part["text"]
                    for message in (await ChatClient(first).conversation("c1"))["messages"]
                    if message["role"] == "user"
                    for part in message["parts"]
                ]
                assert said == ["write to Ada", "write to Bo"]


async def eventually_free(client: httpx.AsyncClient, conversation_id: str) -> None:
    """Wait until the conversation's run has ended (its stream answers 204)."""
    for _ in range(200):
        if (await client.get(f"/chats/{conversation_id}/stream")).status_code == 204:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"conversation {conversation_id!r} still has a run in flight")
