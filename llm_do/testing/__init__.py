"""A testing kit for llm-do: scripted models, provider overrides, leak checks, call trees.

Everything here works without pytest. Installed, llm-do is also a pytest plugin (entry point
`llm_do`) with the fixtures `llm_do_container`, `llm_do_entries`, `llm_do_runtime`,
`llm_do_script`, `llm_do_override` and `llm_do_leaks`; see docs/testing.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_names

if TYPE_CHECKING:
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

_MODULES: dict[str, str] = {
    "LeakCheck": "leaks",
    "LeakError": "leaks",
    "assert_no_leaks": "leaks",
    "settle": "leaks",
    "track_leaks": "leaks",
    "LifespanError": "lifespan",
    "asgi_client": "lifespan",
    "serve_lifespan": "lifespan",
    "Overrides": "overrides",
    "override": "overrides",
    "Returned": "script",
    "ScriptError": "script",
    "ScriptedModel": "script",
    "Step": "script",
    "ToolCall": "script",
    "Turn": "script",
    "returned": "script",
    "tool_call": "script",
    "call_tree": "tree",
}
"""The module of each public name: imported when the name is first used, so that pytest, which loads
the plugin (`llm_do.testing.plugin`) in every run, imports neither pydantic-ai nor dependency-injector
until a test uses the kit."""


__getattr__, __dir__ = lazy_names(__name__, _MODULES, globals())
