"""A run's stream, encoded once: the AI SDK's protocol chunks of a live run, numbered, kept for every reader.

`record(run, log)` reads a resumable live run from its first event and writes it as the protocol's chunks
(`vercel_chunks`, with AI SDK 7's `tool-approval-response` among them) into a `RunLog`, each as its JSON, numbered
from 0. Any number of readers then read the log (`RunLog.read(after)`), from its start or from after the chunk they
had last, and follow it to its end; none of them encodes the run again, and the run never waits for them.

The log is bounded as the live run's own is: once it holds `keep` chunks, the deltas of each text, reasoning or tool
input that has ended, written one after the other, are merged into one delta (`Sent.cuts` says where each one
ended), so that a reader that comes later gets each of them whole, and a reader whose last chunk was one of them
gets the rest of it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from pydantic_ai.ui.vercel_ai.response_types import (
    BaseChunk,
    DataChunk,
    DoneChunk,
    ErrorChunk,
    FinishChunk,
    ReasoningDeltaChunk,
    StartChunk,
    TextDeltaChunk,
    ToolInputDeltaChunk,
)

from .. import LiveRun
from .vercel import ToolApprovalResponseChunk, vercel_chunks

__all__ = ["DONE", "RunLog", "Sent", "record"]

logger = logging.getLogger("llm_do")

DONE = "[DONE]"
"""The data of the stream's last chunk (`DoneChunk`)."""

_DELTA_KEYS = {"text-delta": "delta", "reasoning-delta": "delta", "tool-input-delta": "inputTextDelta"}
"""The field that holds a delta's text, by chunk type."""
_ENDS = {"text-end": "text-delta", "reasoning-end": "reasoning-delta", "tool-input-available": "tool-input-delta"}
"""The chunk that ends a part, and the type of that part's deltas."""


@dataclass(frozen=True, slots=True)
class Sent:
    """One chunk of a run's stream, as its readers get it."""

    seq: int
    """Its number in the run's stream, from 0 (a merged delta has the number of the last delta it holds)."""
    data: str
    """The chunk as the protocol's JSON (`DONE` for the last one)."""
    asked: str | None = None
    """The approval id, when the chunk is a question's description sent while it was pending."""
    start: bool = False
    """The stream's `start` chunk (with the run's message id)."""
    sdk7: bool = False
    """Only AI SDK 7 reads it (`tool-approval-response`)."""
    part: tuple[str, str] | None = None
    """A delta's type and the id of its part (text, reasoning or tool input)."""
    cuts: tuple[tuple[int, int], ...] = ()
    """A merged delta: the number of each delta it holds, with where that delta's text ends in its own."""

    @property
    def done(self) -> bool:
        return self.data == DONE

    def after(self, seen: int) -> Sent | None:
        """This chunk for a reader whose last chunk was number `seen`: whole, the rest of a merged delta the reader
        had a part of, or None when the reader has it all."""
        if self.seq <= seen:
            return None
        if not self.cuts or self.cuts[0][0] > seen:
            return self
        start = max(offset for number, offset in self.cuts if number <= seen)
        chunk = json.loads(self.data)
        key = _DELTA_KEYS[chunk["type"]]
        chunk[key] = chunk[key][start:]
        return Sent(self.seq, _dumps(chunk), part=self.part)


def sent(seq: int, chunk: BaseChunk) -> Sent:
    """`chunk` as the log keeps it."""
    if isinstance(chunk, DoneChunk):
        return Sent(seq, DONE)
    data = chunk.encode(7)
    if isinstance(chunk, TextDeltaChunk | ReasoningDeltaChunk):
        return Sent(seq, data, part=(chunk.type, chunk.id))
    if isinstance(chunk, ToolInputDeltaChunk):
        return Sent(seq, data, part=(chunk.type, chunk.tool_call_id))
    if isinstance(chunk, StartChunk):
        return Sent(seq, data, start=True)
    if isinstance(chunk, ToolApprovalResponseChunk):
        return Sent(seq, data, sdk7=True)
    if isinstance(chunk, DataChunk) and chunk.type == "data-llm-do-approval" and isinstance(chunk.data, dict):
        approval_id = chunk.data.get("approval_id")
        if chunk.data.get("state") == "pending" and isinstance(approval_id, str):
            return Sent(seq, data, asked=approval_id)
    return Sent(seq, data)


def _dumps(chunk: object) -> str:
    return json.dumps(chunk, separators=(",", ":"), ensure_ascii=False)


def _ended(chunk: Sent) -> tuple[str, str] | None:
    """The part a chunk ends (its deltas' type and its id), if it ends one."""
    if chunk.part is not None or chunk.sdk7 or chunk.asked or chunk.start or chunk.done:
        return None
    for end, delta in _ENDS.items():
        if chunk.data.startswith(f'{{"type":"{end}"'):  # (pydantic writes a chunk's type first)
            found = json.loads(chunk.data)
            return (delta, found["toolCallId" if end == "tool-input-available" else "id"])
    return None


def compacted(chunks: list[Sent]) -> list[Sent]:
    """`chunks` with the deltas of each ended part that follow one another merged into one."""
    ended = {part for part in map(_ended, chunks) if part is not None}
    kept: list[Sent] = []
    run: list[Sent] = []

    def close() -> None:
        if len(run) == 1:
            kept.append(run[0])
        elif run:
            kept.append(_merged(run))
        run.clear()

    for chunk in chunks:
        if chunk.part is not None and chunk.part in ended and (not run or run[0].part == chunk.part):
            run.append(chunk)
            continue
        close()
        if chunk.part is not None and chunk.part in ended:
            run.append(chunk)
        else:
            kept.append(chunk)
    close()
    return kept


def _merged(run: list[Sent]) -> Sent:
    first = json.loads(run[0].data)
    key = _DELTA_KEYS[first["type"]]
    texts: list[str] = []
    cuts: list[tuple[int, int]] = []
    end = 0
    for chunk in run:
        text = json.loads(chunk.data)[key]
        if chunk.cuts:  # merged before: its own cuts, moved along
            cuts.extend((number, end + offset) for number, offset in chunk.cuts)
        else:
            cuts.append((chunk.seq, end + len(text)))
        texts.append(text)
        end += len(text)
    first[key] = "".join(texts)
    return Sent(run[-1].seq, _dumps(first), part=run[0].part, cuts=tuple(cuts))


class RunLog:
    """The protocol chunks of one run, numbered from 0, read by any number of readers (see the module)."""

    def __init__(self, keep: int = 10_000) -> None:
        self.keep = keep
        self.chunks: list[Sent] = []
        """What the log holds, in order (compaction merges deltas)."""
        self.count = 0
        """How many chunks were written (the next one's number)."""
        self.compactions = 0
        """How many times the log was compacted (a mirror of it writes it again then)."""
        self.closed = False
        self._grew = asyncio.Event()
        self._waiting = 0
        """Readers waiting for the next chunk (none: a write wakes nobody, and costs no new event)."""
        self._compact_at = keep
        self._listeners: list[Callable[[Sent], None]] = []

    def listen(self, listener: Callable[[Sent], None]) -> None:
        """Call `listener` with each chunk as it is written."""
        self._listeners.append(listener)

    def write(self, chunk: BaseChunk) -> Sent:
        """Add `chunk`, numbered next; the log is closed after its `DoneChunk`."""
        written = sent(self.count, chunk)
        self.count += 1
        self.chunks.append(written)
        if len(self.chunks) > self._compact_at:
            self.chunks = compacted(self.chunks)
            self.compactions += 1
            self._compact_at = max(self.keep, len(self.chunks) + self.keep // 2)
        if written.done:
            self.closed = True
        for listener in self._listeners:
            listener(written)
        if self._waiting:
            grew, self._grew = self._grew, asyncio.Event()
            grew.set()
        return written

    async def read(self, after: int = -1) -> AsyncIterator[Sent]:
        """The chunks after number `after` (-1: from the start), then each as it is written, to the last."""
        seen = after
        at = 0
        current: list[Sent] | None = None
        while True:
            grew = self._grew
            chunks = self.chunks
            if chunks is not current:  # compacted meanwhile: read it again past what was seen
                current, at = chunks, 0
            if at < len(chunks):
                found = chunks[at].after(seen)
                at += 1
                if found is not None:
                    seen = found.seq
                    yield found
                    if found.done:
                        return
                continue
            if self.closed:
                return
            self._waiting += 1
            try:
                await grew.wait()
            finally:
                self._waiting -= 1

    def __repr__(self) -> str:
        return f"RunLog(written={self.count}, kept={len(self.chunks)}, closed={self.closed})"


async def record(run: LiveRun, log: RunLog) -> None:
    """Write `run`'s stream into `log`, from its first event to its last (the run never waits for the log)."""
    try:
        async for chunk in vercel_chunks(run, message_id=run.message_id, sdk_version=7):
            log.write(chunk)
    except Exception:  # the encoder's own failure: the readers still get a whole stream
        logger.exception("writing a live run's stream failed")
        log.write(ErrorChunk(error_text="the run's stream broke off; the server's log has the details"))
        log.write(FinishChunk())
    finally:
        if not log.closed:
            log.write(DoneChunk())
