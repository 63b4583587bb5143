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
        ApprovalChoice as ApprovalChoice,
        ApprovalDenied as ApprovalDenied,
        ApprovalNotPending as ApprovalNotPending,
        ApprovalRequest as ApprovalRequest,
        ApprovalUnavailable as ApprovalUnavailable,
        Approver as Approver,
        Decision as Decision,
        NoApproverWarning as NoApproverWarning,
        PolicySettings as PolicySettings,
        Rule as Rule,
        ToolPolicy as ToolPolicy,
        Verdict as Verdict,
    )
    from .di import (
        CapturablePerRunWarning as CapturablePerRunWarning,
        LlmDoSettings as LlmDoSettings,
        RunLocalSingleton as RunLocalSingleton,
        RuntimeConfig as RuntimeConfig,
        SessionLocalSingleton as SessionLocalSingleton,
        ToolsetSpec as ToolsetSpec,
        reveal as reveal,
    )
    from .errors import (
        ConfigurationError as ConfigurationError,
        InvalidSettings as InvalidSettings,
        LlmDoError as LlmDoError,
        MaxDepthExceeded as MaxDepthExceeded,
        RuntimeClosed as RuntimeClosed,
        ScopeError as ScopeError,
        ScopeMismatch as ScopeMismatch,
        ToolsetError as ToolsetError,
    )
    from .events import (
        AgentStarted as AgentStarted,
        ApprovalDecided as ApprovalDecided,
        ApprovalRequested as ApprovalRequested,
        CallEnded as CallEnded,
        CallEvent as CallEvent,
        CallStarted as CallStarted,
        CallTag as CallTag,
        CallWarning as CallWarning,
        HandleClosed as HandleClosed,
        HandleOpened as HandleOpened,
        HandleRolledBack as HandleRolledBack,
        ResponseCompleted as ResponseCompleted,
        RunFailed as RunFailed,
        RunFinished as RunFinished,
        StreamEvent as StreamEvent,
    )
    from .files import (
        Attachment as Attachment,
        AttachmentError as AttachmentError,
        AttachmentInfo as AttachmentInfo,
        AttachmentSettings as AttachmentSettings,
    )
    from .guards import (
        LimitExceeded as LimitExceeded,
        ModelLimits as ModelLimits,
        ModelUnreachable as ModelUnreachable,
        RepeatedCall as RepeatedCall,
        RepliesRefused as RepliesRefused,
    )
    from .results import (
        CallRecord as CallRecord,
        LogEntry as LogEntry,
        RunReport as RunReport,
        RunResult as RunResult,
        RunState as RunState,
        run_report as run_report,
    )
    from .run import (
        AgentEntry as AgentEntry,
        CallScope as CallScope,
        Entry as Entry,
        FunctionEntry as FunctionEntry,
        LiveRun as LiveRun,
        Runtime as Runtime,
        RuntimeResource as RuntimeResource,
        entry as entry,
    )
    from .scopes import (
        Scope as Scope,
    )
    from .sessions import (
        HistoryConflict as HistoryConflict,
        HistoryError as HistoryError,
        HistoryStore as HistoryStore,
        InMemoryHistoryStore as InMemoryHistoryStore,
        PostgresHistoryStore as PostgresHistoryStore,
        Session as Session,
        SessionBusy as SessionBusy,
        SessionError as SessionError,
        StoredHistory as StoredHistory,
    )
    from .toolkit import (
        Handles as Handles,
        Toolset as Toolset,
        UnknownHandle as UnknownHandle,
        injected as injected,
        open_handles as open_handles,
        tool as tool,
    )
    from .tracing import (
        continue_trace as continue_trace,
        current_traceparent as current_traceparent,
        inject_trace_context as inject_trace_context,
    )

__version__ = "0.1.0"
"""The version of llm-do (the package metadata reads it from here)."""

_EXPORTS: dict[str, tuple[str, ...]] = {
    "approvals": (
        "Approval",
        "ApprovalChoice",
        "ApprovalDenied",
        "ApprovalNotPending",
        "ApprovalRequest",
        "ApprovalUnavailable",
        "Approver",
        "Decision",
        "NoApproverWarning",
        "PolicySettings",
        "Rule",
        "ToolPolicy",
        "Verdict",
    ),
    "di": (
        "CapturablePerRunWarning",
        "LlmDoSettings",
        "RunLocalSingleton",
        "RuntimeConfig",
        "SessionLocalSingleton",
        "ToolsetSpec",
        "reveal",
    ),
    "errors": (
        "ConfigurationError",
        "InvalidSettings",
        "LlmDoError",
        "MaxDepthExceeded",
        "RuntimeClosed",
        "ScopeError",
        "ScopeMismatch",
        "ToolsetError",
    ),
    "events": (
        "AgentStarted",
        "ApprovalDecided",
        "ApprovalRequested",
        "CallEnded",
        "CallEvent",
        "CallStarted",
        "CallTag",
        "CallWarning",
        "HandleClosed",
        "HandleOpened",
        "HandleRolledBack",
        "ResponseCompleted",
        "RunFailed",
        "RunFinished",
        "StreamEvent",
    ),
    "guards": (
        "LimitExceeded",
        "ModelLimits",
        "ModelUnreachable",
        "RepeatedCall",
        "RepliesRefused",
    ),
    "files": (
        "Attachment",
        "AttachmentError",
        "AttachmentInfo",
        "AttachmentSettings",
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
        "CallScope",
        "Entry",
        "FunctionEntry",
        "LiveRun",
        "Runtime",
        "RuntimeResource",
        "entry",
    ),
    "scopes": ("Scope",),
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
        "UnknownHandle",
        "injected",
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
imports nothing else (tests/docs/test_facades.py checks this table against the imports above)."""

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
