"""llm-do: a dependency-injection container for LLM agent resources.

Resources are declared in dependency-injector containers with one of four scopes (global,
per session, per run, per call); a `Runtime` runs pydantic-ai agents with fresh per-call
toolsets and tears down everything a call, run or session opened, on success, error and
cancellation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_names

if TYPE_CHECKING:
    from .approvals import (
        Approval as Approval,
    )
    from .approvals import (
        ApprovalChoice as ApprovalChoice,
    )
    from .approvals import (
        ApprovalDenied as ApprovalDenied,
    )
    from .approvals import (
        ApprovalRequest as ApprovalRequest,
    )
    from .approvals import (
        ApprovalUnavailable as ApprovalUnavailable,
    )
    from .approvals import (
        Approver as Approver,
    )
    from .approvals import (
        Decision as Decision,
    )
    from .approvals import (
        PolicySettings as PolicySettings,
    )
    from .approvals import (
        Rule as Rule,
    )
    from .approvals import (
        ToolPolicy as ToolPolicy,
    )
    from .approvals import (
        Verdict as Verdict,
    )
    from .di import (
        AttachmentSettings as AttachmentSettings,
    )
    from .di import (
        LlmDoSettings as LlmDoSettings,
    )
    from .di import (
        RunLocalSingleton as RunLocalSingleton,
    )
    from .di import (
        RuntimeConfig as RuntimeConfig,
    )
    from .di import (
        Scope as Scope,
    )
    from .di import (
        SessionLocalSingleton as SessionLocalSingleton,
    )
    from .di import (
        ToolsetSpec as ToolsetSpec,
    )
    from .di import (
        reveal as reveal,
    )
    from .errors import (
        ConfigurationError as ConfigurationError,
    )
    from .errors import (
        InvalidSettings as InvalidSettings,
    )
    from .errors import (
        LlmDoError as LlmDoError,
    )
    from .errors import (
        MaxDepthExceeded as MaxDepthExceeded,
    )
    from .errors import (
        ScopeError as ScopeError,
    )
    from .errors import (
        ScopeMismatch as ScopeMismatch,
    )
    from .errors import (
        ToolsetError as ToolsetError,
    )
    from .errors import (
        UnknownHandle as UnknownHandle,
    )
    from .events import (
        AgentStarted as AgentStarted,
    )
    from .events import (
        ApprovalDecided as ApprovalDecided,
    )
    from .events import (
        ApprovalRequested as ApprovalRequested,
    )
    from .events import (
        CallEnded as CallEnded,
    )
    from .events import (
        CallEvent as CallEvent,
    )
    from .events import (
        CallStarted as CallStarted,
    )
    from .events import (
        CallTag as CallTag,
    )
    from .events import (
        HandleClosed as HandleClosed,
    )
    from .events import (
        HandleOpened as HandleOpened,
    )
    from .events import (
        HandleRolledBack as HandleRolledBack,
    )
    from .events import (
        ResponseCompleted as ResponseCompleted,
    )
    from .events import (
        RunFailed as RunFailed,
    )
    from .events import (
        RunFinished as RunFinished,
    )
    from .events import (
        StreamEvent as StreamEvent,
    )
    from .files import (
        Attachment as Attachment,
    )
    from .files import (
        AttachmentError as AttachmentError,
    )
    from .files import (
        AttachmentInfo as AttachmentInfo,
    )
    from .results import (
        CallRecord as CallRecord,
    )
    from .results import (
        LogEntry as LogEntry,
    )
    from .results import (
        RunReport as RunReport,
    )
    from .results import (
        RunResult as RunResult,
    )
    from .results import (
        RunState as RunState,
    )
    from .results import (
        run_report as run_report,
    )
    from .run import (
        AgentEntry as AgentEntry,
    )
    from .run import (
        ApprovalNotPending as ApprovalNotPending,
    )
    from .run import (
        CallScope as CallScope,
    )
    from .run import (
        CapturablePerRunWarning as CapturablePerRunWarning,
    )
    from .run import (
        Entry as Entry,
    )
    from .run import (
        FunctionEntry as FunctionEntry,
    )
    from .run import (
        LiveRun as LiveRun,
    )
    from .run import (
        Runtime as Runtime,
    )
    from .run import (
        entry as entry,
    )
    from .sessions import (
        HistoryConflict as HistoryConflict,
    )
    from .sessions import (
        HistoryError as HistoryError,
    )
    from .sessions import (
        HistoryStore as HistoryStore,
    )
    from .sessions import (
        InMemoryHistoryStore as InMemoryHistoryStore,
    )
    from .sessions import (
        PostgresHistoryStore as PostgresHistoryStore,
    )
    from .sessions import (
        Session as Session,
    )
    from .sessions import (
        SessionBusy as SessionBusy,
    )
    from .sessions import (
        SessionError as SessionError,
    )
    from .sessions import (
        StoredHistory as StoredHistory,
    )
    from .toolkit import (
        Handles as Handles,
    )
    from .toolkit import (
        Toolset as Toolset,
    )
    from .toolkit import (
        open_handles as open_handles,
    )
    from .toolkit import (
        tool as tool,
    )
    from .tracing import (
        continue_trace as continue_trace,
    )
    from .tracing import (
        current_traceparent as current_traceparent,
    )
    from .tracing import (
        inject_trace_context as inject_trace_context,
    )

__version__ = "0.1.0"
"""The version of llm-do (the package metadata reads it from here)."""

_EXPORTS: dict[str, tuple[str, ...]] = {
    "approvals": (
        "Approval",
        "ApprovalChoice",
        "ApprovalDenied",
        "ApprovalRequest",
        "ApprovalUnavailable",
        "Approver",
        "Decision",
        "PolicySettings",
        "Rule",
        "ToolPolicy",
        "Verdict",
    ),
    "di": (
        "AttachmentSettings",
        "LlmDoSettings",
        "RunLocalSingleton",
        "RuntimeConfig",
        "Scope",
        "SessionLocalSingleton",
        "ToolsetSpec",
        "reveal",
    ),
    "errors": (
        "ConfigurationError",
        "InvalidSettings",
        "LlmDoError",
        "MaxDepthExceeded",
        "ScopeError",
        "ScopeMismatch",
        "ToolsetError",
        "UnknownHandle",
    ),
    "events": (
        "AgentStarted",
        "ApprovalDecided",
        "ApprovalRequested",
        "CallEnded",
        "CallEvent",
        "CallStarted",
        "CallTag",
        "HandleClosed",
        "HandleOpened",
        "HandleRolledBack",
        "ResponseCompleted",
        "RunFailed",
        "RunFinished",
        "StreamEvent",
    ),
    "files": (
        "Attachment",
        "AttachmentError",
        "AttachmentInfo",
    ),
    "results": (
        "CallRecord",
        "LogEntry",
        "RunReport",
        "RunResult",
        "RunState",
        "run_report",
    ),
    "run": (
        "AgentEntry",
        "ApprovalNotPending",
        "CallScope",
        "CapturablePerRunWarning",
        "Entry",
        "FunctionEntry",
        "LiveRun",
        "Runtime",
        "entry",
    ),
    "sessions": (
        "HistoryConflict",
        "HistoryError",
        "HistoryStore",
        "InMemoryHistoryStore",
        "PostgresHistoryStore",
        "Session",
        "SessionBusy",
        "SessionError",
        "StoredHistory",
    ),
    "toolkit": (
        "Handles",
        "Toolset",
        "open_handles",
        "tool",
    ),
    "tracing": (
        "continue_trace",
        "current_traceparent",
        "inject_trace_context",
    ),
}
"""Where each public name lives: imported from there on first use, so that importing the package
imports nothing else (tests/test_facades.py checks this table against the imports above)."""

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
