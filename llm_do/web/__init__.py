"""Live runs on the web: a run's events as the Vercel AI data stream (`vercel`), and decisions relayed
between web processes through PostgreSQL (`llm_do.web.relay`, which needs the `postgres` extra when
a relay opens). See docs/streaming.md.

May import: errors, approvals, results, events.
"""

from .vercel import SSE_HEADERS, RunStopped, decision_of, sse_response, vercel_chunks, vercel_sse

__all__ = ["SSE_HEADERS", "RunStopped", "decision_of", "sse_response", "vercel_chunks", "vercel_sse"]
