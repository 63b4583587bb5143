"""`JournalModel`: writes each response of a run to a journal as it arrives, and answers a run made again from it.

A journal entry is keyed by the call that asked (its call path: the entry chain, each child call named
by the parent's tool call that started it) and the request's position in that call, and holds the
response with the request's key (`request_key`, model settings included). When the run is made again,
each request is answered from the entry at its place while its key matches exactly; from the first
request that differs, or the first place with no entry, that call goes live for the rest of the run,
and new responses replace what the journal held there.

Replayed tool calls keep their recorded ids, so the child calls they start get the same call paths
as before and replay too. Handles are mapped to the live conversation's, as `ReplayModel` does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol
from weakref import WeakKeyDictionary

from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.settings import ModelSettings

from .. import CallScope, tracing
from ..errors import LlmDoError
from ..run import current_scope
from ..scopes import system_task, system_timer
from .keys import KeyCache, RequestKey, changed_tools, current_chain, request_key
from .observed import ObservedModel
from .recording import RecordedResponse
from .replay import replayed

__all__ = [
    "WRITE_DELAY",
    "Journal",
    "JournalEntry",
    "JournalModel",
    "JournalStore",
    "JournalUnreachable",
    "Unwritten",
    "WentLive",
]

logger = logging.getLogger("llm_do.journal")

WRITE_DELAY = 0.002
"""Seconds between the arrival of a response that calls no tool (usually a run's last) and the start of its write
when no write is under way: a run that ends meanwhile hands it to its job's result (`Journal.unwritten`), one
statement for both. A response that calls tools is written at once, while the run goes on to them."""

OUTSIDE = "-"
"""The call path of a request made outside any llm-do call (an agent run without a `CallScope`)."""


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One journaled response: where it was asked (call path, position in the call) and the request it answers."""

    call: str
    position: int
    recorded: RecordedResponse
    """The response, with its request's key (`recorded.key`), chain, handles and what it asked."""


class JournalStore(Protocol):
    """Where a journal's entries go (the jobs' PostgreSQL table, or anything that keeps them)."""

    async def write(self, entries: Sequence[JournalEntry], stale: Sequence[tuple[str, int]] = ()) -> None:
        """Forget the entries of each `(call, position)` of `stale` from that position on (the run went live
        there: they answer another conversation), then keep `entries`, in order, each replacing an entry at
        the same call and position. Best in one round trip: `entries` are the responses that arrived while
        the previous write was under way."""
        ...


class JournalUnreachable(LlmDoError):
    """Raised by a `JournalStore` that cannot reach where it keeps entries (its database is away): the journal
    counts the write's responses as unsaved at once, rather than trying them again one at a time."""


@dataclass(frozen=True, slots=True)
class WentLive:
    """Where a run made again stopped replaying a call and sent its requests to the model."""

    call: str
    position: int
    reason: Literal["differs", "ends"]
    """`differs`: the request is not the recorded one (a tool's result, a prompt, the tools or the settings
    changed); `ends`: the journal holds nothing there (the request in flight when the earlier attempt stopped)."""
    tools: tuple[str, ...] = ()
    """For `differs`: the tools whose results the request carries and that changed since they were recorded (as
    far as the recorded request shows them); empty when none did (the prompt, instructions, tools or settings)."""

    def to_json(self) -> dict[str, Any]:
        return {"call": self.call, "position": self.position, "reason": self.reason}


@dataclass(slots=True)
class _Call:
    path: str
    next_position: int = 0
    children: int = 0
    """Children started from Python (no tool call id), numbered in the order they first ask the model."""
    live: bool = False
    replayed: int = 0
    stale_from: int | None = None
    """Where this call went live on a request that differs: the journal's rows from there on are dropped."""
    keys: KeyCache = field(default_factory=KeyCache)
    """Its requests' keys hash only the messages the one before did not have."""


@dataclass(frozen=True, slots=True)
class _Place:
    call: _Call
    position: int


@dataclass(frozen=True, slots=True)
class _Asked:
    """A request sent to the model, as it was sent: enough to compute its key later (`request_key`)."""

    messages: list[ModelMessage]
    params: ModelRequestParameters
    settings: ModelSettings | None
    chain: tuple[str, ...]
    keys: KeyCache

    def key(self) -> RequestKey:
        return request_key(self.messages, self.params, self.chain, settings=self.settings, cache=self.keys)


@dataclass(frozen=True, slots=True)
class _Kept:
    """A response waiting to be written, with the request it answers and where it was asked."""

    place: _Place
    request: RequestKey | _Asked
    response: ModelResponse
    went_live: bool
    """Whether its call went live on this request (the journal's rows from here on answer another conversation)."""
    calls_tools: bool
    """Whether the response calls tools (the run goes on): it is written at once, not `WRITE_DELAY` later."""

    def entry(self) -> JournalEntry:
        request = self.request if isinstance(self.request, RequestKey) else self.request.key()
        return JournalEntry(
            self.place.call.path, self.place.position, RecordedResponse.answering(request, self.response)
        )


@dataclass(frozen=True, slots=True)
class Unwritten:
    """Responses a journal kept and has not handed to its store (`Journal.unwritten`): its entries, in order, and the
    `(call, position)` from which each call's earlier entries are stale (as `JournalStore.write` takes them)."""

    entries: list[JournalEntry]
    stale: list[tuple[str, int]]
    kept: list[_Kept]

    def __bool__(self) -> bool:
        return bool(self.kept)


class Journal:
    """One run's journal: what earlier attempts recorded (`entries`), and what this attempt replays and sends.

    Share one between every `JournalModel` of the run (one per model its agents use)."""

    def __init__(self, store: JournalStore, entries: Iterable[JournalEntry] = (), *, source: str = "the journal"):
        self.store = store
        self.recorded: dict[tuple[str, int], JournalEntry] = {(item.call, item.position): item for item in entries}
        self.source = source
        self.replayed = 0
        """Requests answered from the journal."""
        self.sent = 0
        """Requests sent to the model."""
        self.live_from: list[WentLive] = []
        """Where calls that had journaled responses went live, in the order it happened."""
        self.unsaved = 0
        """Responses the store failed to keep (logged): a later attempt sends them again."""
        self._pending: list[_Kept] = []
        """Responses kept and not yet handed to the store, in order."""
        self._timer: asyncio.TimerHandle | None = None
        """Starts the writer `WRITE_DELAY` after a response that calls no tool is kept while none runs (or after a
        write, when only such responses were kept meanwhile)."""
        self._writer: asyncio.Task[None] | None = None
        """Writes what is pending, a batch at a time, until nothing is (or `unwritten` takes it)."""
        self._holding = False
        """While `unwritten` waits for the write under way: the writer stops after it."""
        self._all_due = False
        """Every pending response is written now (`WRITE_DELAY` is over, or the run's end waits for them), even when
        none of them calls tools."""
        self._calls: WeakKeyDictionary[CallScope, _Call] = WeakKeyDictionary()
        self._outside = _Call(OUTSIDE)
        self._paths = frozenset(call for call, _ in self.recorded)

    def summary(self) -> dict[str, Any]:
        """`{"replayed": n, "sent": m, "live_from": [{"call", "position", "reason"}, ...]}` (plus `unsaved`
        when some responses could not be kept)."""
        found: dict[str, Any] = {
            "replayed": self.replayed,
            "sent": self.sent,
            "live_from": [point.to_json() for point in self.live_from],
        }
        if self.unsaved:
            found["unsaved"] = self.unsaved
        return found

    # -- where a request is ------------------------------------------------------

    def place(self) -> _Place:
        """The call asking now and this request's position in it (taken before anything awaits)."""
        scope = current_scope()
        call = self._outside if scope is None else self._call(scope)
        position = call.next_position
        call.next_position += 1
        return _Place(call, position)

    def _call(self, scope: CallScope) -> _Call:
        found = self._calls.get(scope)
        if found is not None:
            return found
        parent = scope.parent
        if parent is None:
            path = scope.entry.name
        else:
            above = self._call(parent)
            if scope.tool_call_id is not None:
                step = f"{scope.entry.name}@{scope.tool_call_id}"
            else:
                step = f"{scope.entry.name}#{above.children}"
                above.children += 1
            path = f"{above.path}/{step}"
        found = self._calls[scope] = _Call(path)
        return found

    # -- answering ---------------------------------------------------------------

    def answer(
        self,
        place: _Place,
        messages: list[ModelMessage],
        params: ModelRequestParameters,
        settings: ModelSettings | None,
    ) -> tuple[ModelResponse | None, RequestKey | _Asked]:
        """The journaled answer at `place` if it is for exactly this request (None: the request goes to the
        model), and the request, for `keep`. Its key is computed here only to compare it with a journaled one;
        otherwise the write computes it, while the run waits for the model."""
        call = place.call
        request: RequestKey | None = None
        if not call.live:
            entry = self.recorded.get((call.path, place.position))
            if entry is not None:
                request = request_key(messages, params, settings=settings, cache=call.keys)
                if entry.recorded.key == request.key:
                    self.replayed += 1
                    call.replayed += 1
                    span = tracing.current_span()
                    if span is not None:
                        span.set_attribute("llm_do.journal.replayed", call.replayed)
                    return replayed(entry.recorded, request, self.source, keep_ids=True), request
                call.stale_from = place.position
            call.live = True
            if entry is not None:
                tools = changed_tools(messages, entry.recorded.asked)
                self._went_live(WentLive(call.path, place.position, "differs", tools))
            elif call.path in self._paths:
                self._went_live(WentLive(call.path, place.position, "ends"))
        self.sent += 1
        if request is not None:
            return None, request
        return None, _Asked(list(messages), params, settings, current_chain(), call.keys)

    def _went_live(self, point: WentLive) -> None:
        self.live_from.append(point)
        logger.info("journal: call %s goes live at request %d (%s)", point.call, point.position, point.reason)
        span = tracing.current_span()
        if span is not None:
            span.add_event(
                "llm_do.journal.live",
                {
                    "llm_do.journal.call": point.call,
                    "llm_do.journal.position": point.position,
                    "llm_do.journal.reason": point.reason,
                },
            )

    def keep(self, place: _Place, request: RequestKey | _Asked, response: ModelResponse) -> None:
        """Write a response the model sent, after those kept before it (in order): at once if it calls tools
        (the write's work is done in the same turn of the event loop as the run's, which goes on to its tools), a
        moment later (`WRITE_DELAY`) if not, or if a write is under way, with the responses kept meanwhile in the
        next one. The run goes on meanwhile; the end of the job waits for them (`settled`, `unwritten`). A failed
        write is logged (the responses are then paid again on a later attempt), never raised into the run."""
        if response.state != "complete":
            return
        calls_tools = any(isinstance(part, ToolCallPart) for part in response.parts)
        self._pending.append(_Kept(place, request, response, place.call.stale_from == place.position, calls_tools))
        if self._writer is not None and not self._writer.done():
            return
        if calls_tools:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._writer = system_task(self._write_pending)
        elif self._timer is None:
            self._timer = system_timer(WRITE_DELAY, self._delay_over)  # the run's context is not kept meanwhile

    def _delay_over(self) -> None:
        self._timer = None
        self._all_due = True
        if self._writer is None or self._writer.done():
            self._writer = system_task(self._write_pending)

    async def settled(self) -> None:
        """Wait until every response kept so far is written (or its write failed)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._pending:
            self._all_due = True
            if self._writer is None or self._writer.done():
                self._writer = system_task(self._write_pending)
        writer = self._writer
        if writer is not None:
            await asyncio.wait((writer,))

    async def unwritten(self) -> Unwritten:
        """Take the responses kept and not written yet, for the caller to write with statements of its own (a job's
        result: one round trip at the run's end instead of two); the write under way is waited for first, so they
        come after it. Give them back with `restore` if they could not be written."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        writer = self._writer
        if writer is not None and not writer.done():
            self._holding = True
            try:
                await asyncio.wait((writer,))
            finally:
                self._holding = False
        kept, self._pending, self._all_due = self._pending, [], False
        entries = [item.entry() for item in kept]
        stale = [(entry.call, entry.position) for entry, item in zip(entries, kept, strict=True) if item.went_live]
        return Unwritten(entries, stale, kept)

    def restore(self, unwritten: Unwritten) -> None:
        """Give back responses `unwritten` took that the caller did not write: the journal writes them at once
        (before any kept since), as it writes any; `settled` waits for them."""
        self._pending[:0] = unwritten.kept
        if self._timer is not None:
            self._timer.cancel()
        self._delay_over()

    async def _write_pending(self) -> None:
        while self._pending and not self._holding:
            if not self._all_due and not any(kept.calls_tools for kept in self._pending):
                if self._timer is None:  # only responses that call no tool: they wait `WRITE_DELAY`
                    self._timer = system_timer(WRITE_DELAY, self._delay_over)
                return
            batch, self._pending = self._pending, []
            try:
                await self._write(batch)
            except JournalUnreachable as error:
                self._lost(batch, error)
            except Exception as error:
                if len(batch) == 1:
                    self._lost(batch, error)
                    continue
                for index, one in enumerate(batch):  # alone, so a response the store refuses costs no other
                    try:
                        await self._write([one])
                    except JournalUnreachable as away:
                        self._lost(batch[index:], away)
                        break
                    except Exception as alone:
                        self._lost([one], alone)
        if not self._pending:
            self._all_due = False

    async def _write(self, batch: list[_Kept]) -> None:
        entries = [kept.entry() for kept in batch]
        stale = [(entry.call, entry.position) for entry, kept in zip(entries, batch, strict=True) if kept.went_live]
        await self.store.write(entries, stale)

    def _lost(self, batch: list[_Kept], error: Exception) -> None:
        self.unsaved += len(batch)
        for kept in batch:
            logger.warning(
                "journal: the response to request %d of call %s was not kept (%s: %s)",
                kept.place.position,
                kept.place.call.path,
                type(error).__name__,
                error,
            )


class JournalModel(ObservedModel):
    """Wraps `wrapped`: each request is answered from `journal` when it can be, else sent and its response
    journaled before it is returned. Both `request` and `request_stream` are journaled."""

    def __init__(self, wrapped: Model | str, journal: Journal) -> None:
        super().__init__(wrapped)
        self.journal = journal

    def answer(
        self, messages: list[ModelMessage], settings: ModelSettings | None, params: ModelRequestParameters
    ) -> tuple[ModelResponse | None, tuple[_Place, RequestKey | _Asked]]:
        place = self.journal.place()
        given, request = self.journal.answer(place, messages, params, settings)
        return given, (place, request)

    def responded(
        self,
        messages: list[ModelMessage],
        params: ModelRequestParameters,
        response: ModelResponse,
        note: tuple[_Place, RequestKey | _Asked],
    ) -> None:
        self.journal.keep(*note, response)
