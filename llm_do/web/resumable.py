"""A run in flight written as the AI SDK's resumable stream: from its start, and, for the SDK's own chat, ending at
a question the run still waits on.

The AI SDK's chat sends a question's answer in its next request (`addToolApprovalResponse`), which it sends only once
the stream has ended; a live run keeps running while it waits. So `sdk_lines(run, pause=True)` ends the response
with `finish` after a question that is still open, and the request that brings the answers reads the rest of the run
with `after=` their approval ids: what an earlier response sent, up to those questions, is skipped (but the `start`
chunk, whose message id the SDK continues). A page that answers through a decision endpoint of its own follows the
run to its end (`pause=False`).

Each event carries its chunk's number as its server-sent event id (`id: 12`): a reader that lost its connection
reads on from where it was (`seen=`, from the `Last-Event-ID` header or a query parameter), not from the start.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection

from pydantic_ai.ui.vercel_ai.response_types import DoneChunk, FinishChunk

from .runs import RunInFlight
from .vercel import SdkVersion

__all__ = ["sdk_lines"]

_FINISH = f"data: {FinishChunk().encode(6)}\n\n"
_DONE = f"data: {DoneChunk().encode(6)}\n\n"


async def sdk_lines(
    run: RunInFlight,
    *,
    pause: bool = True,
    after: Collection[str] = (),
    sdk_version: SdkVersion = 6,
    seen: int = -1,
) -> AsyncIterator[str]:
    """The run as server-sent events of the AI SDK's protocol (`vercel_chunks`), each with its chunk's number as its
    id, ending with `data: [DONE]`.

    `pause`: end the stream (`finish`) after a question the run is still waiting on. `after`: approval ids a request
    answers; what precedes their questions (and the questions) is skipped, but for the `start` chunk. `seen`: the
    number of the last chunk the reader had (-1: from the start). `sdk_version=7`: AI SDK 7's `tool-approval-response`
    tells of every answer.
    """
    waiting_for = set(after)
    chunks = run.chunks(seen)
    try:
        async for chunk in chunks:
            if chunk.sdk7 and sdk_version < 7:
                continue
            asked = chunk.asked
            if waiting_for and not chunk.start:
                if asked is not None:
                    waiting_for.discard(asked)
                continue
            yield f"id: {chunk.seq}\ndata: {chunk.data}\n\n"
            if chunk.done:
                return
            if pause and asked is not None and any(request.approval_id == asked for request in run.pending):
                yield _FINISH  # the answer comes in the next request
                yield _DONE
                return
        yield _DONE  # the stream ended before this reader's place: it had it all
    finally:
        closing = getattr(chunks, "aclose", None)  # left at a question: the reading ends now
        if closing is not None:
            await closing()
