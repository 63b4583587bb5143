"""Where sessions keep their conversations between runs: the `HistoryStore` protocol and the in-memory store.

A session loads its history from the runtime's store when it opens, passes it to each run as
`message_history`, and saves the top-level call's messages after each run that ends well. A
store outlives sessions: a session that idled out, or a new runtime after a restart, continues
the conversation from it. `llm_do.history.postgres.PostgresHistoryStore` keeps them in PostgreSQL.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol, runtime_checkable

from pydantic_ai.messages import ModelMessage

from ..errors import LlmDoError

__all__ = ["HistoryError", "HistoryStore", "InMemoryHistoryStore"]


class HistoryError(LlmDoError):
    """A history store cannot keep a conversation under the session id it was given."""


@runtime_checkable
class HistoryStore(Protocol):
    """Conversations by session id."""

    async def load(self, session_id: str) -> list[ModelMessage]:
        """The conversation of the session, oldest message first; empty when there is none."""
        ...

    async def save(self, session_id: str, messages: list[ModelMessage]) -> None:
        """Replace the conversation of the session."""
        ...

    async def delete(self, session_id: str) -> None:
        """Forget the conversation of the session (nothing happens when there is none)."""
        ...


class InMemoryHistoryStore:
    """Conversations kept in this process, for as long as the store lives (the runtime's default).

    `limit` bounds how many conversations it keeps: past it, the least recently saved is forgotten
    (`None`: no bound; `0`: none is kept, so a history lasts as long as its session).
    """

    def __init__(self, *, limit: int | None = None) -> None:
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be None or >= 0, got {limit}")
        self.limit = limit
        self._histories: OrderedDict[str, list[ModelMessage]] = OrderedDict()

    async def load(self, session_id: str) -> list[ModelMessage]:
        return list(self._histories.get(session_id, ()))

    async def save(self, session_id: str, messages: list[ModelMessage]) -> None:
        if self.limit == 0:
            return
        self._histories[session_id] = list(messages)
        self._histories.move_to_end(session_id)
        while self.limit is not None and len(self._histories) > self.limit:
            self._histories.popitem(last=False)

    async def delete(self, session_id: str) -> None:
        self._histories.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._histories)

    def __repr__(self) -> str:
        return f"InMemoryHistoryStore({len(self._histories)} conversations, limit={self.limit})"
