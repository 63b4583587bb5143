"""llm-do: a dependency-injection container for LLM agent resources.

Resources are declared in dependency-injector containers with one of three scopes (global,
per run, per call); a `Runtime` runs pydantic-ai agents with fresh per-call toolsets and
tears down everything a call or run opened, on success, error and cancellation.
"""

from .approval import Approval, ApprovalChoice, ApprovalDenied, ApprovalRequest, ApprovalUnavailable, Approver
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
from .handles import Handles, open_handles
from .loading import CapturablePerRunWarning
from .policy import Decision, PolicySettings, Rule, ToolPolicy, Verdict
from .run import CallRecord, LogEntry, RunReport, RunResult, RunState, run_report
from .runlocal import RunLocalSingleton
from .runtime import Runtime
from .scopes import Scope, ToolsetSpec
from .settings import LlmDoSettings, RuntimeConfig, reveal
from .toolset import Toolset, tool
from .tracing import continue_trace, current_traceparent, inject_trace_context

__all__ = [
    "AgentEntry",
    "Approval",
    "ApprovalChoice",
    "ApprovalDenied",
    "ApprovalRequest",
    "ApprovalUnavailable",
    "Approver",
    "CallRecord",
    "CallScope",
    "CapturablePerRunWarning",
    "ConfigurationError",
    "Decision",
    "Entry",
    "FunctionEntry",
    "Handles",
    "InvalidSettings",
    "LlmDoError",
    "LlmDoSettings",
    "LogEntry",
    "MaxDepthExceeded",
    "PolicySettings",
    "Rule",
    "RunLocalSingleton",
    "RunReport",
    "RunResult",
    "RunState",
    "Runtime",
    "RuntimeConfig",
    "Scope",
    "ScopeError",
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
