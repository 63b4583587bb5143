"""Tests module."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from fastapi.testclient import TestClient

from llm_do import Runtime
from llm_do.testing import ChatClient, Question, Step, Turn, answering, asgi_client, tool_call

from .application import app
from .containers import Container
from .models import User
from .repositories import UserNotFoundError, UserRepository
from .scripts import deactivating


@pytest.fixture
def client() -> Any:
    yield TestClient(app)


# -- dependency-injector's own tests of the users endpoints, unchanged ----------------------------------------


def test_get_list(client: TestClient) -> None:
    repository_mock = mock.Mock(spec=UserRepository)
    repository_mock.get_all.return_value = [
        User(id=1, email="test1@email.com", hashed_password="pwd", is_active=True),
        User(id=2, email="test2@email.com", hashed_password="pwd", is_active=False),
    ]

    with app.container.user_repository.override(repository_mock):  # type: ignore[attr-defined]
        response = client.get("/users")

    assert response.status_code == 200
    data = response.json()
    assert data == [
        {"id": 1, "email": "test1@email.com", "hashed_password": "pwd", "is_active": True},
        {"id": 2, "email": "test2@email.com", "hashed_password": "pwd", "is_active": False},
    ]


def test_get_by_id_404(client: TestClient) -> None:
    repository_mock = mock.Mock(spec=UserRepository)
    repository_mock.get_by_id.side_effect = UserNotFoundError(1)

    with app.container.user_repository.override(repository_mock):  # type: ignore[attr-defined]
        response = client.get("/users/1")

    assert response.status_code == 404


# -- the assistant ---------------------------------------------------------------------------------------------


def failing_after_the_write(turn: Turn) -> Any:
    if turn.steps_since_prompt < 2:
        return deactivating(turn)
    raise RuntimeError("the model's server went away")


def new_user(email: str) -> int:
    return int(app.container.user_repository().add(email=email, password="pwd").id)  # type: ignore[attr-defined]


def is_active(user_id: int) -> bool:
    return bool(app.container.user_repository().get_by_id(user_id).is_active)  # type: ignore[attr-defined]


async def ask(conversation: str, text: str, answer: Any, model: Any) -> Any:
    assistant = app.container.assistant()  # type: ignore[attr-defined]
    with assistant.agent.override(model=answering(model)):
        async with asgi_client(app) as http:
            return await ChatClient(http, headers={"x-user": "ada"}).send(conversation, text, answer=answer)


async def test_the_assistant_deactivates_a_user_once_the_person_approves() -> None:
    user_id = new_user("grace@example.com")
    reply = await ask("grace", "Deactivate grace@example.com", lambda question: "approve", deactivating)
    assert [(question.tool, question.args) for question in reply.questions] == [
        ("deactivate_user", {"user_id": user_id})
    ]
    assert reply.text == f"user {user_id} is deactivated"
    assert not is_active(user_id)  # committed: the request ended well


async def test_each_message_of_a_conversation_is_answered() -> None:
    alan, ada = new_user("alan@example.com"), new_user("lovelace@example.com")
    assistant = app.container.assistant()  # type: ignore[attr-defined]
    with assistant.agent.override(model=answering(deactivating)):
        async with asgi_client(app) as http:  # one application: the conversation goes on
            chat = ChatClient(http, headers={"x-user": "ada"})
            first = await chat.send("pair", "Deactivate alan@example.com", answer=lambda question: "approve")
            second = await chat.send("pair", "Deactivate lovelace@example.com", answer=lambda question: "approve")
    assert (first.text, second.text) == (f"user {alan} is deactivated", f"user {ada} is deactivated")
    assert not is_active(alan) and not is_active(ada)


async def test_a_refused_deactivation_changes_nothing() -> None:
    user_id = new_user("linus@example.com")
    reply = await ask("linus", "Deactivate linus@example.com", lambda question: ("deny", "not today"), deactivating)
    assert reply.tool_call("deactivate_user").state == "denied"
    assert is_active(user_id)


async def test_a_request_that_fails_after_the_write_rolls_it_back() -> None:
    user_id = new_user("ken@example.com")
    reply = await ask("ken", "Deactivate ken@example.com", lambda question: "approve", failing_after_the_write)
    assert reply.tool_call("deactivate_user").output == f"user {user_id} is deactivated"  # it ran...
    assert reply.error is not None
    assert is_active(user_id)  # ...in the request's transaction, rolled back when the request failed


async def test_what_a_request_wrote_stays_in_its_transaction_while_the_next_question_waits() -> None:
    first, second = new_user("barbara@example.com"), new_user("edsger@example.com")
    steps: list[Step] = [
        tool_call("deactivate_user", user_id=first),
        tool_call("deactivate_user", user_id=second),
        "both done",
    ]
    seen: list[tuple[int, bool]] = []
    async with asgi_client(app) as http:

        async def approve_once_the_first_is_still_active(question: Question) -> str:
            response = await http.get(f"/users/{first}")  # the application's own endpoint, while the run waits
            seen.append((question.args["user_id"], response.json()["is_active"]))
            return "approve"

        assistant = app.container.assistant()  # type: ignore[attr-defined]
        with assistant.agent.override(model=answering(lambda turn: steps[turn.step])):
            chat = ChatClient(http, headers={"x-user": "ada"})
            reply = await chat.send("both", "Deactivate both", answer=approve_once_the_first_is_still_active)
    assert reply.text == "both done"
    assert seen == [(first, True), (second, True)]  # the first deactivation was not committed yet
    assert not is_active(first) and not is_active(second)  # both were, when the request ended well


async def test_a_fresh_container_per_test(llm_do_container: Container, llm_do_runtime: Runtime) -> None:
    """`llm_do_runtime` is the test's own container's runtime, over the test's own database (conftest.py)."""
    user = llm_do_container.user_repository().add(email="ada@example.com", password="pwd")
    with llm_do_container.assistant().agent.override(model=answering(deactivating)):
        result = await llm_do_runtime.run("assistant", "Deactivate ada@example.com", approver=lambda ask: "approve")
    assert result.output == f"user {user.id} is deactivated"
    assert not llm_do_container.user_repository().get_by_id(user.id).is_active
    application_users = app.container.user_repository().get_all()  # type: ignore[attr-defined]
    assert "ada@example.com" not in [user.email for user in application_users]  # not the application's database
