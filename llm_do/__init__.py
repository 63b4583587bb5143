"""llm-do: a dependency-injection container for LLM agent resources.

Resources are declared in dependency-injector containers with one of four scopes (global,
per session, per run, per call); a `Runtime` runs pydantic-ai agents with fresh per-call
toolsets and tears down everything a call, run or session opened, on success, error and
cancellation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_names

if TYPE_CHECKING:
    from .approval import Approval, ApprovalChoice, ApprovalDenied, ApprovalRequest, ApprovalUnavailable, Approver
    from .attachments import Attachment, AttachmentError, AttachmentInfo
    from .call import CallScope
    from .entries import AgentEntry, Entry, FunctionEntry, entry
    from .errors import (
        ConfigurationError,
        InvalidSettings,
        LlmDoError,
        MaxDepthExceeded,
        ScopeError,
        ScopeMismatch,
        ToolsetError,
        UnknownHandle,
    )
    from .events import (
        AgentStarted,
        ApprovalDecided,
        ApprovalRequested,
        CallEnded,
        CallEvent,
        CallStarted,
        CallTag,
        CallWarning,
        HandleClosed,
        HandleOpened,
        HandleRolledBack,
        ResponseCompleted,
        RunFailed,
        RunFinished,
        StreamEvent,
    )
    from .handles import Handles, open_handles
    from .history import HistoryConflict, HistoryError, HistoryStore, InMemoryHistoryStore, StoredHistory
    from .history.postgres import PostgresHistoryStore
    from .live import ApprovalNotPending, LiveRun
    from .loading import CapturablePerRunWarning
    from .policy import Decision, PolicySettings, Rule, ToolPolicy, Verdict
    from .run import CallRecord, LogEntry, RunReport, RunResult, RunState, run_report
    from .runlocal import RunLocalSingleton, SessionLocalSingleton
    from .runtime import Runtime
    from .scopes import Scope, ToolsetSpec
    from .session import Session, SessionBusy, SessionError
    from .settings import AttachmentSettings, LlmDoSettings, RuntimeConfig, reveal
    from .toolset import Toolset, tool
    from .tracing import continue_trace, current_traceparent, inject_trace_context

__version__ = "0.1.0"
"""The version of llm-do (the package metadata reads it from here)."""

__all__ = [
    "AgentEntry",
    "AgentStarted",
    "Approval",
    "ApprovalChoice",
    "ApprovalDecided",
    "ApprovalDenied",
    "ApprovalNotPending",
    "ApprovalRequest",
    "ApprovalRequested",
    "ApprovalUnavailable",
    "Approver",
    "Attachment",
    "AttachmentError",
    "AttachmentInfo",
    "AttachmentSettings",
    "CallEnded",
    "CallEvent",
    "CallRecord",
    "CallScope",
    "CallStarted",
    "CallTag",
    "CallWarning",
    "CapturablePerRunWarning",
    "ConfigurationError",
    "Decision",
    "Entry",
    "FunctionEntry",
    "HandleClosed",
    "HandleOpened",
    "HandleRolledBack",
    "Handles",
    "HistoryConflict",
    "HistoryError",
    "HistoryStore",
    "InMemoryHistoryStore",
    "InvalidSettings",
    "LiveRun",
    "LlmDoError",
    "LlmDoSettings",
    "LogEntry",
    "MaxDepthExceeded",
    "PolicySettings",
    "PostgresHistoryStore",
    "ResponseCompleted",
    "Rule",
    "RunFailed",
    "RunFinished",
    "RunLocalSingleton",
    "RunReport",
    "RunResult",
    "RunState",
    "Runtime",
    "RuntimeConfig",
    "Scope",
    "ScopeError",
    "ScopeMismatch",
    "Session",
    "SessionBusy",
    "SessionError",
    "SessionLocalSingleton",
    "StoredHistory",
    "StreamEvent",
    "ToolPolicy",
    "Toolset",
    "ToolsetError",
    "ToolsetSpec",
    "UnknownHandle",
    "Verdict",
    "continue_trace",
    "current_traceparent",
    "entry",
    "inject_trace_context",
    "open_handles",
    "reveal",
    "run_report",
    "tool",
]

_MODULES: dict[str, str] = {
    name: module
    for module, names in {
        "approval": (
            "Approval",
            "ApprovalChoice",
            "ApprovalDenied",
            "ApprovalRequest",
            "ApprovalUnavailable",
            "Approver",
        ),
        "attachments": ("Attachment", "AttachmentError", "AttachmentInfo"),
        "call": ("CallScope",),
        "entries": ("AgentEntry", "Entry", "FunctionEntry", "entry"),
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
            "CallWarning",
            "HandleClosed",
            "HandleOpened",
            "HandleRolledBack",
            "ResponseCompleted",
            "RunFailed",
            "RunFinished",
            "StreamEvent",
        ),
        "handles": ("Handles", "open_handles"),
        "history": ("HistoryConflict", "HistoryError", "HistoryStore", "InMemoryHistoryStore", "StoredHistory"),
        "history.postgres": ("PostgresHistoryStore",),
        "live": ("ApprovalNotPending", "LiveRun"),
        "loading": ("CapturablePerRunWarning",),
        "policy": ("Decision", "PolicySettings", "Rule", "ToolPolicy", "Verdict"),
        "run": ("CallRecord", "LogEntry", "RunReport", "RunResult", "RunState", "run_report"),
        "runlocal": ("RunLocalSingleton", "SessionLocalSingleton"),
        "runtime": ("Runtime",),
        "scopes": ("Scope", "ToolsetSpec"),
        "session": ("Session", "SessionBusy", "SessionError"),
        "settings": ("AttachmentSettings", "LlmDoSettings", "RuntimeConfig", "reveal"),
        "toolset": ("Toolset", "tool"),
        "tracing": ("continue_trace", "current_traceparent", "inject_trace_context"),
    }.items()
    for name in names
}
"""The module of each public name: imported when the name is first used, so that importing `llm_do`
(as the `llm-do` command does for `--help`) does not import pydantic-ai."""


__getattr__, __dir__ = lazy_names(__name__, _MODULES, globals())
