"""llm-do: a dependency-injection container for LLM agent resources.

Resources are declared in dependency-injector containers with one of three scopes (global,
per run, per call); a `Runtime` runs pydantic-ai agents with fresh per-call toolsets and
tears down everything a call or run opened, on success, error and cancellation.
"""

from .call import CallScope
from .entries import AgentEntry, Entry, FunctionEntry, entry
from .errors import ConfigurationError, InvalidSettings, LlmDoError, MaxDepthExceeded, ToolsetError, UnknownHandle
from .handles import Handles, open_handles
from .run import CallRecord, LogEntry, RunResult, RunState
from .runtime import Runtime
from .scopes import Scope, ToolsetSpec
from .settings import LlmDoSettings, RuntimeConfig, reveal
from .toolset import Toolset, tool

__all__ = [
    "AgentEntry",
    "CallRecord",
    "CallScope",
    "ConfigurationError",
    "Entry",
    "FunctionEntry",
    "Handles",
    "InvalidSettings",
    "LlmDoError",
    "LlmDoSettings",
    "LogEntry",
    "MaxDepthExceeded",
    "RunResult",
    "RunState",
    "Runtime",
    "RuntimeConfig",
    "Scope",
    "Toolset",
    "ToolsetError",
    "ToolsetSpec",
    "UnknownHandle",
    "entry",
    "open_handles",
    "reveal",
    "tool",
]
