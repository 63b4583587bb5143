"""A testing kit for llm-do: scripted models, provider overrides, leak checks, call trees, cancelled runs, and a
client of a chat's Vercel AI stream that answers its questions (`ChatClient`, `read_vercel_stream`).

Everything here works without pytest. Installed, llm-do is also a pytest plugin (entry point
`llm_do`) with the fixtures `llm_do_container`, `llm_do_entries`, `llm_do_runtime`,
`llm_do_script`, `llm_do_override` and `llm_do_leaks`; see docs/testing.md.

May import: llm_do, scopes, results, toolkit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_imports

if TYPE_CHECKING:
    from .cancel import (
        cancelled_run_report as cancelled_run_report,
    )
    from .chat import (
        AnswerPolicy as AnswerPolicy,
        ChatClient as ChatClient,
        ChatReply as ChatReply,
        ChatResponseError as ChatResponseError,
        Question as Question,
        SeenToolCall as SeenToolCall,
        read_vercel_stream as read_vercel_stream,
    )
    from .evals import (
        EntryTask as EntryTask,
    )
    from .leaks import (
        LeakCheck as LeakCheck,
        LeakError as LeakError,
        assert_no_leaks as assert_no_leaks,
        settle as settle,
        track_leaks as track_leaks,
    )
    from .lifespan import (
        LifespanError as LifespanError,
        asgi_client as asgi_client,
        serve_lifespan as serve_lifespan,
    )
    from .overrides import (
        Overrides as Overrides,
        override as override,
    )
    from .script import (
        Returned as Returned,
        ScriptedModel as ScriptedModel,
        ScriptError as ScriptError,
        Step as Step,
        ToolCall as ToolCall,
        Turn as Turn,
        answering as answering,
        response as response,
        returned as returned,
        tool_call as tool_call,
    )
    from .tree import (
        call_tree as call_tree,
    )
    from .wiring import (
        unwired as unwired,
    )

__getattr__, __dir__ = lazy_imports(globals())
