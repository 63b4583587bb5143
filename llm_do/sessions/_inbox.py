"""A session's open questions wherever they wait: its live run's in this process, a live run's in another web process,
a parked job's; listed and answered through one `Inbox` per runtime, which asks the places it is given.

A place is a `QuestionSource`: it lists a session's questions it holds (`open_questions`) and answers one of them
(`answer`, False when it is not one of its own). `llm_do.jobs.LiveParking` is one (the questions of a session's
parked runs, in PostgreSQL); the chat router given a database is another (the questions of the live runs of every web
process, from PostgreSQL, answered through the decision relay). The runtime's inbox asks them after its own live runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, TypeAlias

from ..approvals._requests import ApprovalChoice, ApprovalRequest

Held: TypeAlias = Literal["live", "parked"]
"""Where a question waits: in a live run (of this process or another), or in a parked job."""


@dataclass(frozen=True, slots=True)
class OpenQuestion:
    """A question of a session waiting for its person's answer, wherever it waits."""

    request: ApprovalRequest
    """What it asks (`toolset`, `tool`, `args`, `description`, `attachments`), its ids (`approval_id`, `tool_call_id`,
    `call_id`) and whose it is (`session_id`)."""
    held: Held = "live"
    """`live`: a live run waits on it (answered in its process, or relayed there); `parked`: a job waits on it."""
    run: str | None = None
    """The message id of the live run that waits on it (its stream's `start` chunk), where known."""
    job_id: int | None = None
    """The parked job that waits on it."""
    asked_at: datetime | None = None
    """When it was asked, where stored."""
    choices: tuple[ApprovalChoice, ...] = ("approve", "approve_for_session", "deny")
    """What an answer may be: `approve`, `approve_for_session` (the call and identical ones for the rest of the
    session) or `deny`."""

    @property
    def approval_id(self) -> str:
        return self.request.approval_id


class QuestionSource(Protocol):
    """A place where a session's questions wait outside this process's live runs."""

    async def open_questions(self, session_id: str) -> Sequence[OpenQuestion]:
        """The questions of session `session_id` waiting there (none of another session's)."""
        ...

    async def answer(self, session_id: str, approval_id: str, choice: ApprovalChoice, note: str | None) -> bool:
        """Answer question `approval_id` of session `session_id` if it waits there: True; False when it is none of
        its own. Raises when it is its own but cannot be answered (decided already, say)."""
        ...


class Inbox:
    """The places a runtime's sessions' questions wait, besides its own live runs (`add` one)."""

    def __init__(self) -> None:
        self._sources: list[QuestionSource] = []

    def add(self, source: QuestionSource) -> None:
        """Ask `source` too (once, however often it is added)."""
        if not any(known is source for known in self._sources):
            self._sources.append(source)

    def discard(self, source: QuestionSource) -> None:
        self._sources = [known for known in self._sources if known is not source]

    @property
    def sources(self) -> tuple[QuestionSource, ...]:
        return tuple(self._sources)

    async def questions(self, session_id: str, here: Sequence[ApprovalRequest] = ()) -> tuple[OpenQuestion, ...]:
        """Session `session_id`'s open questions: `here` (its live run's in this process), then each place's, in
        the order the places were added, each question once."""
        found = [OpenQuestion(request) for request in here]
        seen = {request.approval_id for request in here}
        for source in self._sources:
            for question in await source.open_questions(session_id):
                if question.approval_id not in seen:
                    seen.add(question.approval_id)
                    found.append(question)
        return tuple(found)

    async def answer(self, session_id: str, approval_id: str, choice: ApprovalChoice, note: str | None) -> bool:
        """Answer question `approval_id` of session `session_id` in the first place that holds it; False when none
        does."""
        for source in self._sources:
            if await source.answer(session_id, approval_id, choice, note):
                return True
        return False

    def __repr__(self) -> str:
        return f"Inbox(sources={len(self._sources)})"
