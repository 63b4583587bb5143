"""Live runs on the web: a run's events as the Vercel AI data stream (`vercel`), and decisions relayed
between web processes through PostgreSQL (`llm_do.web.relay`, which needs the `postgres` extra when
a relay opens). See docs/streaming.md.

`questions_end_on_signal` ends the questions a web process's runs wait on when it is told to stop.

May import: errors, approvals, results, events, process.
"""

from .stopping import questions_end_on_signal
from .vercel import (
    SSE_HEADERS,
    RunStopped,
    SdkVersion,
    ToolApprovalResponseChunk,
    decision_of,
    sse_response,
    vercel_chunks,
    vercel_sse,
)

__all__ = [
    "SSE_HEADERS",
    "RunStopped",
    "SdkVersion",
    "ToolApprovalResponseChunk",
    "decision_of",
    "questions_end_on_signal",
    "sse_response",
    "vercel_chunks",
    "vercel_sse",
]
