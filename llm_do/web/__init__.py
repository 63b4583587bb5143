"""Live runs on the web: a run's events as the Vercel AI data stream (`vercel`), decisions relayed between web
processes through PostgreSQL (`llm_do.web.relay`, which needs the `postgres` extra when a relay opens), and a
conversation's live runs as one FastAPI router (`chat_router`, in `llm_do.web.chat`, which needs the `service`
extra; its parts: `llm_do.web.turns`, `llm_do.web.runs`, `llm_do.web.chunklog`, `llm_do.web.postgres_runs`,
`llm_do.web.resumable`). See docs/streaming.md.

`questions_end_on_signal` ends the questions a web process's runs wait on when it is told to stop.

Names are imported on first use: importing the package imports neither FastAPI nor Starlette.

May import: errors, files, approvals, results, events, process, di, sessions, run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from .chat import (
        Access as Access,
        ChatAction as ChatAction,
        ChatLimits as ChatLimits,
        ChatRefused as ChatRefused,
        chat_router as chat_router,
    )
    from .resumable import (
        sdk_lines as sdk_lines,
    )
    from .stopping import (
        questions_end_on_signal as questions_end_on_signal,
    )
    from .vercel import (
        SSE_HEADERS as SSE_HEADERS,
        RunStopped as RunStopped,
        SdkVersion as SdkVersion,
        ToolApprovalResponseChunk as ToolApprovalResponseChunk,
        decision_of as decision_of,
        sse_response as sse_response,
        vercel_chunks as vercel_chunks,
        vercel_sse as vercel_sse,
    )

_EXPORTS: dict[str, tuple[str, ...]] = {
    "chat": (
        "Access",
        "ChatAction",
        "ChatLimits",
        "ChatRefused",
        "chat_router",
    ),
    "resumable": ("sdk_lines",),
    "stopping": ("questions_end_on_signal",),
    "vercel": (
        "SSE_HEADERS",
        "RunStopped",
        "SdkVersion",
        "ToolApprovalResponseChunk",
        "decision_of",
        "sse_response",
        "vercel_chunks",
        "vercel_sse",
    ),
}
"""Where each public name lives: imported from there on first use (tests/docs/test_facades.py checks this table
against the imports above)."""

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
