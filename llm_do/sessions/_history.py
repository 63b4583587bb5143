"""Where sessions keep their conversations between runs: the `HistoryStore` protocol and the in-memory store.

A session loads its history from the runtime's store when it opens and as each run starts, passes it
to the run as `message_history`, and saves the top-level call's messages after each run that ends
well, if the store's conversation is still the version the run started from: a store shared by
several processes (several runtimes) may have been given another turn meanwhile, which a save must
not overwrite (`HistoryConflict`). A store outlives sessions: a session that idled out, or a new
runtime after a restart, continues the conversation from it. Deleting a conversation leaves its id
with a new version and no message, so that a session still holding it (here or in another process)
drops its copy instead of saving it back.

A turn costs what it adds, not what the conversation holds: a session tells its store the copy it
holds when it loads (`held`: the store answers with that very copy when its version is still the
store's) and how many messages of what it saves are that copy unchanged (`kept`: the store may write
only the others). `llm_do.PostgresHistoryStore` keeps them in PostgreSQL.
"""

from __future__ import annotations

import inspect
import itertools
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pydantic_ai.messages import ModelMessage

from ..errors import LlmDoError


class HistoryError(LlmDoError):
    """A history store could not load or keep a session's conversation: an id it cannot keep, its database
    unreachable, a load that returned no `StoredHistory`, or another process's turn saved first."""


class HistoryConflict(HistoryError):
    """A run's turn was not saved: the conversation was continued or deleted elsewhere while the run ran."""

    def __init__(self, session_id: str, messages: list[ModelMessage]) -> None:
        self.session_id = session_id
        self.messages = messages
        """The run's conversation that was not saved (its input and answer at the end)."""
        super().__init__(
            f"session {session_id!r} was continued or deleted elsewhere while this run ran: another runtime on "
            "the same history store (another process) saved a turn of it first, or the store deleted it, so this "
            "run's turn was not saved (its messages are on this error, .messages; what the run did, "
            "llm_do.run_report(error)). Send the message again to go on from the conversation as it now is (a "
            "deleted one starts afresh); to avoid this, route each conversation to one process at a time (by "
            "session id)"
        )


@dataclass(frozen=True)
class StoredHistory:
    """A session's conversation as a store keeps it, and the version the store gave it (0: it keeps none)."""

    messages: list[ModelMessage] = field(default_factory=list)
    version: int = 0


@runtime_checkable
class HistoryStore(Protocol):
    """Conversations by session id, each with a version that changes at every save."""

    async def load(self, session_id: str, *, held: StoredHistory | None = None) -> StoredHistory:
        """The conversation of the session, oldest message first, and its version; empty (version 0) when
        there is none; empty with a version when it was deleted. `held` is the copy the caller holds (what
        this store's `load` or `save` gave it for this session): when its version is still the store's,
        `held` itself comes back and nothing is read; a store may also read only what was added since."""
        ...

    async def save(
        self, session_id: str, messages: list[ModelMessage], *, version: int | None = None, kept: int = 0
    ) -> int | None:
        """Replace the conversation of the session if its version is still `version` (what `load` gave), or
        if the store keeps none of it (evicted; `version=None`: whatever it keeps). `kept`: how many of the
        first messages are the conversation as the store kept it at `version`, unchanged (the caller's copy),
        so that a store may write only the messages after them. The new version (one never given before; 0
        when the store keeps no conversation), or None when the stored version is another (another save, or a
        `delete`, came first): nothing was saved."""
        ...

    async def delete(self, session_id: str) -> None:
        """Forget the messages of the session's conversation, keeping its id with a new version as a marker (no
        message): a save over the old version, by a session or a run that still holds the conversation, is then
        refused, and a session that loads the marker starts afresh. Nothing happens when there is none."""
        ...


class InMemoryHistoryStore:
    """Conversations kept in this process, for as long as the store lives (the runtime's default).

    `limit` bounds how many conversations it keeps: past it, the least recently saved (or deleted) is
    forgotten (`None`: no bound; `0`: none is kept, so a history lasts as long as its session). A deleted
    conversation's marker counts as one: once forgotten, a session that still holds the conversation keeps
    its own copy, as after any eviction.
    """

    def __init__(self, *, limit: int | None = None) -> None:
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be None or >= 0, got {limit}")
        self.limit = limit
        self._histories: OrderedDict[str, StoredHistory] = OrderedDict()
        self._versions = itertools.count(1)  # one count for every id: a version is never given twice

    async def load(self, session_id: str, *, held: StoredHistory | None = None) -> StoredHistory:
        stored = self._histories.get(session_id)
        if stored is None:
            return StoredHistory()
        if held is not None and held.version == stored.version:
            return held  # the caller's copy is the store's: nothing to copy
        return StoredHistory(list(stored.messages), stored.version)

    async def save(
        self, session_id: str, messages: list[ModelMessage], *, version: int | None = None, kept: int = 0
    ) -> int | None:
        # It keeps a list of the messages (not their text): keeping the `kept` ones costs nothing to spare.
        if self.limit == 0:
            return 0
        stored = self._histories.get(session_id)
        if stored is not None and version is not None and stored.version != version:
            return None
        saved = self._histories[session_id] = StoredHistory(list(messages), next(self._versions))
        self._histories.move_to_end(session_id)
        while self.limit is not None and len(self._histories) > self.limit:
            self._histories.popitem(last=False)
        return saved.version

    async def delete(self, session_id: str) -> None:
        if session_id in self._histories:  # a marker: no message, a new version (a save over the old one fails)
            self._histories[session_id] = StoredHistory([], next(self._versions))
            self._histories.move_to_end(session_id)

    def __len__(self) -> int:
        return len(self._histories)

    def __repr__(self) -> str:
        return f"InMemoryHistoryStore({len(self._histories)} conversations, limit={self.limit})"


def takes(store: object, method: str, keyword: str) -> bool:
    """Whether the store's `method` takes `keyword`: a store written to the protocol before `held` and `kept`
    is called without them (it reads and writes whole conversations, as it always did)."""
    kind = type(store)
    known = _TAKES.get((kind, method, keyword))
    if known is None:
        try:
            parameters = inspect.signature(getattr(kind, method)).parameters.values()
        except (AttributeError, TypeError, ValueError):  # not a plain method: called without it
            known = False
        else:
            known = any(p.name == keyword or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
        _TAKES[kind, method, keyword] = known
    return known


_TAKES: dict[tuple[type, str, str], bool] = {}
"""Whether a store class's method takes a keyword, by class, method and keyword: read once."""
