"""A run in flight written as the AI SDK's resumable stream: from its start, and, for the SDK's own chat, ending at
a question the run still waits on.

The AI SDK's chat sends a question's answer in its next request (`addToolApprovalResponse`), which it sends only once
the stream has ended; a live run keeps running while it waits. So `sdk_lines(run, pause=True)` ends the response
with `finish` after a question that is still open, and the request that brings the answers reads the rest of the run
with `after=` their approval ids: what an earlier response sent, up to those questions, is skipped (but the `start`
chunk, whose message id the SDK continues). A page that answers through a decision endpoint of its own follows the
run to its end (`pause=False`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from typing import Any

from pydantic_ai.ui.vercel_ai.response_types import BaseChunk, DataChunk, DoneChunk, FinishChunk, StartChunk

from .runs import RunInFlight
from .vercel import SdkVersion, vercel_chunks

__all__ = ["sdk_lines"]


def _asked(chunk: BaseChunk) -> str | None:
    """The approval id of a question's description (`data-llm-do-approval`, still pending when it was sent)."""
    if not isinstance(chunk, DataChunk) or chunk.type != "data-llm-do-approval" or not isinstance(chunk.data, dict):
        return None
    data: dict[str, Any] = chunk.data
    approval_id = data.get("approval_id")
    return approval_id if data.get("state") == "pending" and isinstance(approval_id, str) else None


async def sdk_lines(
    run: RunInFlight,
    *,
    pause: bool = True,
    after: Collection[str] = (),
    sdk_version: SdkVersion = 6,
) -> AsyncIterator[str]:
    """The run as server-sent events of the AI SDK's protocol (`vercel_chunks`), from its start, ending with
    `data: [DONE]`.

    `pause`: end the stream (`finish`) after a question the run is still waiting on. `after`: approval ids a request
    answers; what precedes their questions (and the questions) is skipped, but for the `start` chunk.
    `sdk_version=7`: AI SDK 7's `tool-approval-response` tells of every answer.
    """
    waiting_for = set(after)
    chunks = vercel_chunks(run.events(), message_id=run.message_id, sdk_version=sdk_version)
    try:
        async for chunk in chunks:
            asked = _asked(chunk)
            if waiting_for and not isinstance(chunk, StartChunk):
                if asked is not None:
                    waiting_for.discard(asked)
                continue
            yield f"data: {chunk.encode(sdk_version)}\n\n"
            if pause and asked is not None and any(request.approval_id == asked for request in run.pending):
                yield f"data: {FinishChunk().encode(sdk_version)}\n\n"  # the answer comes in the next request
                yield f"data: {DoneChunk().encode(sdk_version)}\n\n"
                return
    finally:
        closing = getattr(chunks, "aclose", None)  # the encoder's generator, left at a question: closed now
        if closing is not None:
            await closing()
