"""llm-do: a dependency-injection container for LLM agent resources.

Resources are declared in dependency-injector containers with one of four scopes (global,
per session, per run, per call); a `Runtime` runs pydantic-ai agents with fresh per-call
toolsets and tears down everything a call, run or session opened, on success, error and
cancellation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_imports
from ._moved import install

# The public names, each from the module it lives in: what type checkers read, and the one list of them, which
# `lazy_imports` reads to import each on first use, so that importing the package imports nothing else.
if TYPE_CHECKING:
    from .approvals._policy import (
        Decision as Decision,
        PolicySettings as PolicySettings,
        Rule as Rule,
        ToolPolicy as ToolPolicy,
        Verdict as Verdict,
    )
    from .approvals._requests import (
        Approval as Approval,
        ApprovalChoice as ApprovalChoice,
        ApprovalDenied as ApprovalDenied,
        ApprovalNotPending as ApprovalNotPending,
        ApprovalRequest as ApprovalRequest,
        ApprovalUnavailable as ApprovalUnavailable,
        Approver as Approver,
        NoApproverWarning as NoApproverWarning,
    )
    from .di._config import RuntimeConfig as RuntimeConfig
    from .di._container import CapturablePerRunWarning as CapturablePerRunWarning
    from .di._settings import LlmDoSettings as LlmDoSettings, reveal as reveal
    from .di._singletons import RunLocalSingleton as RunLocalSingleton, SessionLocalSingleton as SessionLocalSingleton
    from .di._specs import ToolsetSpec as ToolsetSpec
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
    from .files._attachments import (
        Attachment as Attachment,
        AttachmentError as AttachmentError,
        AttachmentInfo as AttachmentInfo,
    )
    from .files._limits import AttachmentSettings as AttachmentSettings
    from .guards._guard import ModelUnreachable as ModelUnreachable, RepliesRefused as RepliesRefused
    from .guards._limits import LimitExceeded as LimitExceeded, ModelLimits as ModelLimits, RepeatedCall as RepeatedCall
    from .results import (
        CallRecord as CallRecord,
        LogEntry as LogEntry,
        RunReport as RunReport,
        RunResult as RunResult,
        RunState as RunState,
        run_report as run_report,
    )
    from .run._call_scope import CallScope as CallScope
    from .run._entries import AgentEntry as AgentEntry, FunctionEntry as FunctionEntry, entry as entry
    from .run._entry import Entry as Entry
    from .run._live import LiveRun as LiveRun
    from .run._provider import RuntimeResource as RuntimeResource
    from .run._runtime import Runtime as Runtime
    from .scopes._scope import Scope as Scope
    from .sessions._history import (
        HistoryConflict as HistoryConflict,
        HistoryError as HistoryError,
        HistoryStore as HistoryStore,
        InMemoryHistoryStore as InMemoryHistoryStore,
        StoredHistory as StoredHistory,
    )
    from .sessions._postgres import PostgresHistoryStore as PostgresHistoryStore
    from .sessions._session import Session as Session, SessionBusy as SessionBusy, SessionError as SessionError
    from .toolkit._handles import Handles as Handles, UnknownHandle as UnknownHandle, open_handles as open_handles
    from .toolkit._injection import injected as injected
    from .toolkit._toolset import Toolset as Toolset, tool as tool
    from .tracing import (
        continue_trace as continue_trace,
        current_traceparent as current_traceparent,
        inject_trace_context as inject_trace_context,
    )

__version__ = "0.1.0"
"""The version of llm-do (the package metadata reads it from here)."""

__getattr__, __dir__ = lazy_imports(globals())
install()  # the old import paths, deprecated (llm_do._moved)
del install
