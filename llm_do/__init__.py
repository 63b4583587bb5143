"""llm-do: a dependency-injection container for LLM agent resources.

Resources are declared in dependency-injector containers with one of four scopes (global,
per session, per run, per call); a `Runtime` runs pydantic-ai agents with fresh per-call
toolsets and tears down everything a call, run or session opened, on success, error and
cancellation.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

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
        HandleClosed,
        HandleOpened,
        HandleRolledBack,
        ResponseCompleted,
        RunFailed,
        RunFinished,
        StreamEvent,
    )
    from .handles import Handles, open_handles
    from .history import HistoryStore, InMemoryHistoryStore
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
    "CapturablePerRunWarning",
    "ConfigurationError",
    "Decision",
    "Entry",
    "FunctionEntry",
    "HandleClosed",
    "HandleOpened",
    "HandleRolledBack",
    "Handles",
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
    "Session",
    "SessionBusy",
    "SessionError",
    "SessionLocalSingleton",
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
    "AgentEntry": "entries",
    "AgentStarted": "events",
    "Approval": "approval",
    "ApprovalChoice": "approval",
    "ApprovalDecided": "events",
    "ApprovalDenied": "approval",
    "ApprovalNotPending": "live",
    "ApprovalRequest": "approval",
    "ApprovalRequested": "events",
    "ApprovalUnavailable": "approval",
    "Approver": "approval",
    "Attachment": "attachments",
    "AttachmentError": "attachments",
    "AttachmentInfo": "attachments",
    "AttachmentSettings": "settings",
    "CallEnded": "events",
    "CallEvent": "events",
    "CallRecord": "run",
    "CallScope": "call",
    "CallStarted": "events",
    "CallTag": "events",
    "CapturablePerRunWarning": "loading",
    "ConfigurationError": "errors",
    "Decision": "policy",
    "Entry": "entries",
    "FunctionEntry": "entries",
    "HandleClosed": "events",
    "HandleOpened": "events",
    "HandleRolledBack": "events",
    "Handles": "handles",
    "HistoryStore": "history",
    "InMemoryHistoryStore": "history",
    "InvalidSettings": "errors",
    "LiveRun": "live",
    "LlmDoError": "errors",
    "LlmDoSettings": "settings",
    "LogEntry": "run",
    "MaxDepthExceeded": "errors",
    "PolicySettings": "policy",
    "PostgresHistoryStore": "history.postgres",
    "ResponseCompleted": "events",
    "Rule": "policy",
    "RunFailed": "events",
    "RunFinished": "events",
    "RunLocalSingleton": "runlocal",
    "RunReport": "run",
    "RunResult": "run",
    "RunState": "run",
    "Runtime": "runtime",
    "RuntimeConfig": "settings",
    "Scope": "scopes",
    "ScopeError": "errors",
    "Session": "session",
    "SessionBusy": "session",
    "SessionError": "session",
    "SessionLocalSingleton": "runlocal",
    "StreamEvent": "events",
    "ToolPolicy": "policy",
    "Toolset": "toolset",
    "ToolsetError": "errors",
    "ToolsetSpec": "scopes",
    "UnknownHandle": "errors",
    "Verdict": "policy",
    "continue_trace": "tracing",
    "current_traceparent": "tracing",
    "entry": "entries",
    "inject_trace_context": "tracing",
    "open_handles": "handles",
    "reveal": "settings",
    "run_report": "run",
    "tool": "toolset",
}
"""The module of each public name: imported when the name is first used, so that importing `llm_do`
(as the `llm-do` command does for `--help`) does not import pydantic-ai."""


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'llm_do' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
