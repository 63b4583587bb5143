"""An evaluation of the assistant with pydantic-evals: five requests, each against a database of its own, all at once.

    python -m webapp.evaluation      # offline: a scripted model stands for the real one

Each case seeds its own SQLite database and its run is given it for that run alone
(`overrides={Container.db: ...}`), so the cases run at once and none reads another's users. Needs the `evals`
extra (pydantic-evals).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import EqualsExpected
from pydantic_evals.reporting import EvaluationReport

from llm_do import Approval
from llm_do.testing import EntryTask, answering, unwired

from .containers import Container
from .database import Database
from .scripts import deactivating


def case(name: str, users: list[str], email: str, expected: str, approve: bool = True) -> Case[str, str, Any]:
    return Case(
        name=name,
        inputs=f"Deactivate {email}",
        expected_output=expected,
        metadata={"users": users, "approve": approve},
    )


DATASET = Dataset(
    name="deactivations",
    cases=[
        case("first", ["ada@example.com"], "ada@example.com", "user 1 is deactivated"),
        case(
            "third", ["a@example.com", "b@example.com", "ada@example.com"], "ada@example.com", "user 3 is deactivated"
        ),
        case("absent", ["bo@example.com"], "ada@example.com", "no user has the email ada@example.com"),
        case("second", ["x@example.com", "grace@example.com"], "grace@example.com", "user 2 is deactivated"),
        case(
            "refused",
            ["ada@example.com"],
            "ada@example.com",
            "I did not deactivate them: that was refused.",
            approve=False,
        ),
    ],
    evaluators=[EqualsExpected()],
)


def seeded(directory: Path, case: Case[str, str, Any]) -> Database:
    """The case's own database, with its users (ids from 1, in order)."""
    db = Database(f"sqlite:///{directory / case.name}.sqlite3")
    db.create_database()
    with db.session() as session:
        for email in case.metadata["users"]:
            session.execute("INSERT INTO users (email, hashed_password) VALUES (?, 'pwd')", (email,))
    return db


def approver_for(case: Case[str, str, Any]) -> Any:
    return lambda request: "approve" if case.metadata["approve"] else Approval.deny("not this one")


async def evaluate(directory: Path) -> EvaluationReport[str, str, Any]:
    """Run the dataset: each case's database in `directory`."""
    container = unwired(Container)  # the application's endpoints stay wired to its own
    container.config.db.url.from_value(f"sqlite:///{directory / 'unused.sqlite3'}")
    await container.init_resources()  # type: ignore[misc]
    try:
        runtime = await container.runtime()
        task: EntryTask[str] = EntryTask(
            runtime,
            "assistant",
            overrides=lambda case: {Container.db: seeded(directory, case)},
            model=answering(deactivating),
            case_approver=approver_for,
        )
        return await task.evaluate(DATASET, max_concurrency=5)
    finally:
        await container.shutdown_resources()  # type: ignore[misc]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as temporary:
        asyncio.run(evaluate(Path(temporary))).print()
