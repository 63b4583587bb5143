"""A testing kit for llm-do: scripted models, provider overrides, leak checks, call trees.

Everything here works without pytest. Installed, llm-do is also a pytest plugin (entry point
`llm_do`) with the fixtures `llm_do_container`, `llm_do_entries`, `llm_do_runtime`,
`llm_do_script`, `llm_do_override` and `llm_do_leaks`; see docs/testing.md.
"""

from .leaks import LeakCheck, LeakError, assert_no_leaks, settle, track_leaks
from .lifespan import LifespanError, asgi_client, serve_lifespan
from .overrides import Overrides, override
from .script import Returned, ScriptedModel, ScriptError, Step, ToolCall, Turn, returned, tool_call
from .tree import call_tree

__all__ = [
    "LeakCheck",
    "LeakError",
    "LifespanError",
    "Overrides",
    "Returned",
    "ScriptError",
    "ScriptedModel",
    "Step",
    "ToolCall",
    "Turn",
    "asgi_client",
    "assert_no_leaks",
    "call_tree",
    "override",
    "returned",
    "serve_lifespan",
    "settle",
    "tool_call",
    "track_leaks",
]
