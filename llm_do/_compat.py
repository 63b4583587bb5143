"""Every read of a third-party library's internals, in one place, each with the version it was checked on.

pydantic-ai, dependency-injector and fastmcp offer no public way to do what these do; each says what it
reads and why llm-do needs it. When a release moves one, llm-do does a little less (a warning says what)
rather than fail runs, and tests/docs/test_compat.py fails, so that the next release of llm-do follows it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from contextvars import ContextVar
from types import MethodType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.exceptions import UnexpectedModelBehavior
    from pydantic_ai.toolsets import AbstractToolset

CHECKED_ON = {"pydantic-ai-slim": "2.68.0", "dependency-injector": "4.49.1", "fastmcp": "4.2.3"}
"""The versions every read below was checked on."""


class InternalMissing(RuntimeWarning):
    """An internal of a library that llm-do reads is not where it was: llm-do does less (the message says what)."""


def _missing(what: str, consequence: str) -> None:
    warnings.warn(
        f"{what} is not there in the installed version (checked on {CHECKED_ON}): {consequence}. "
        "Upgrade llm-do, or install a version of the library it was checked on.",
        InternalMissing,
        stacklevel=3,
    )


# -- pydantic-ai 2.68 --------------------------------------------------------------------------------------


def _no_run_context() -> None:
    return None


def _run_context_getter() -> Callable[[], Any]:
    """pydantic-ai's getter of the current `RunContext` (`pydantic_ai._run_context.get_current_run_context`), found
    once; a stand-in that finds none, with a warning, when it is not there."""
    global _get_run_context
    try:
        from pydantic_ai._run_context import get_current_run_context
    except ImportError:
        _missing(
            "pydantic_ai._run_context.get_current_run_context",
            "tools cannot find their CallScope outside `deps`, and what a tool's callbacks keep of a call is "
            "not emptied when it ends",
        )
        _get_run_context = _no_run_context
    else:
        _get_run_context = get_current_run_context
    return _get_run_context


_get_run_context: Callable[[], Any] | None = None


def current_run_context() -> RunContext[Any] | None:
    """The `RunContext` pydantic-ai made current around a model request or a tool call, if any (its getter is
    not re-exported)."""
    getter = _get_run_context or _run_context_getter()
    result: RunContext[Any] | None = getter()
    return result


def forget_driving_task(ctx: RunContext[Any]) -> None:
    """An agent run has ended: its cancellation controller (`RunContext._cancellation`) no longer needs the task
    that drove it (`_owner`), which a copy of the context kept by a tool's callback would otherwise keep alive."""
    cancellation = getattr(ctx, "_cancellation", None)
    if cancellation is not None and hasattr(cancellation, "_owner"):
        cancellation._owner = None


def explicit_toolset_id(toolset: AbstractToolset[Any]) -> str | None:
    """The `id` chosen for `toolset` (`_explicit_id`), not one derived (as an `MCPToolset` derives one from its
    URL): what pydantic-ai's `CombinedToolset` stamps on the tools it combines."""
    return toolset._explicit_id


RUN_ALONE: ContextVar[Any] = ContextVar("llm_do.run_alone", default=None)
"""The agent llm-do is starting a run of, with a call's toolsets: see `leaves_out_empty_own_toolset`."""


def _toolset_list_builder() -> Any:
    """`Agent._build_toolset_list` (False when it is not there), and `FunctionToolset`, found once."""
    global _build, _function_toolset
    from pydantic_ai import Agent
    from pydantic_ai.toolsets import FunctionToolset

    _function_toolset, _build = FunctionToolset, getattr(Agent, "_build_toolset_list", False)
    if _build is False:
        _missing("pydantic_ai.Agent._build_toolset_list", "agents list their empty toolset at each model request")
    return _build


_build: Any = None
_function_toolset: Any = None


def leaves_out_empty_own_toolset(agent: Agent[Any, Any]) -> bool:
    """Have the runs of `agent` started while `RUN_ALONE` holds it leave out its own function toolset when empty.

    pydantic-ai lists a run's toolsets beside the agent's own (where `@agent.tool` and `tools=` put theirs) and
    starts a task group per model request to list more than one. `Agent._build_toolset_list` (2.68) puts the
    agent's own first; it is wrapped on this agent alone. False when it moved, or a subclass or someone else
    replaced it: runs then keep the empty toolset, as pydantic-ai does.
    """
    build = _build if _build is not None else _toolset_list_builder()
    if build is False or getattr(type(agent), "_build_toolset_list", None) is not build:
        return False
    installed = vars(agent).get("_build_toolset_list")
    if installed is None or getattr(installed, "__func__", None) is _without_empty_own:
        if getattr(installed, "__self__", None) is not agent:  # (a copy of an agent keeps the original's)
            vars(agent)["_build_toolset_list"] = MethodType(_without_empty_own, agent)
        return True
    return False


def _without_empty_own(agent: Agent[Any, Any], *args: Any, **kwargs: Any) -> list[AbstractToolset[Any]]:
    toolsets: list[AbstractToolset[Any]] = _build(agent, *args, **kwargs)
    if RUN_ALONE.get() is agent and not kwargs.get("ignore_overrides") and toolsets:
        own = toolsets[0]
        if isinstance(own, _function_toolset) and not own.tools and not getattr(own, "_instructions", True):
            del toolsets[0]
    return toolsets


def output_token_limit_exceeded() -> type[UnexpectedModelBehavior]:
    """pydantic-ai's error for a reply that reached its token limit before it held usable output:
    `OutputTokenLimitExceeded` (2.68); before it (2.62 to 2.66) there is no such class, and this is the base of
    the errors raised then, `UnexpectedModelBehavior` (tell them with `is_output_token_limit`)."""
    try:
        from pydantic_ai.exceptions import OutputTokenLimitExceeded
    except ImportError:  # pydantic-ai before 2.68
        from pydantic_ai.exceptions import UnexpectedModelBehavior

        return UnexpectedModelBehavior
    return OutputTokenLimitExceeded


def is_output_token_limit(error: BaseException) -> bool:
    """Whether `error` is pydantic-ai's for a reply cut off at its token limit before it held usable output: an
    `OutputTokenLimitExceeded` (2.68); before it, an `IncompleteToolCall` (a tool call cut off), or the
    `UnexpectedModelBehavior` whose message begins `Model token limit` (no usable output at all)."""
    from pydantic_ai.exceptions import IncompleteToolCall, UnexpectedModelBehavior

    kind = output_token_limit_exceeded()
    if kind is not UnexpectedModelBehavior:
        return isinstance(error, kind)
    return isinstance(error, IncompleteToolCall) or (
        type(error) is UnexpectedModelBehavior and error.message.startswith("Model token limit")
    )


NOT_RUN_RESULTS = frozenset(
    {
        "Final result processed.",
        "Output not used as the final result - addressing tool retries from this round first.",
        "Output tool not used - a final result was already processed.",
        "Output tool processed, but its value will not be the final result of the agent run.",
        "Output tool not used - output function execution failed.",
        "Output tool not used - output failed validation.",
        "Tool not executed - a final result was already processed.",
    }
)
"""What pydantic-ai writes as the successful result of a tool call it did not count as run (an output tool's
call, or a call skipped once a final result was found): the `_FINAL_RESULT...`, `_OUTPUT_...` and
`_TOOL_SKIPPED...` strings of `pydantic_ai._tool_execution`."""


# -- dependency-injector 4.49 --------------------------------------------------------------------------------


def context_local_provide() -> Callable[..., Any]:
    """`ContextLocalSingleton._provide`: how the base class resolves (and caches in its ContextVar), which
    `RunLocalSingleton` runs in a throwaway context and keeps in the run's box instead (an untyped Cython method)."""
    from dependency_injector import providers

    provide: Callable[..., Any] = getattr(providers.ContextLocalSingleton, "_provide")  # noqa: B009
    return provide


def configuration_root(option: Any) -> Any:
    """The `Configuration` an option belongs to (`ConfigurationOption._get_root`): where an override of the
    option is recorded, so that it can be undone."""
    return option._get_root()


def injection_key(value: Any) -> object:
    """What a dependency-injector marker asks for (`Provide[App.db]`: its `provider`, a provider or a name); None for
    anything else. Told by its type's name, so that describing a tool never imports `dependency_injector.wiring`
    (which imports FastAPI whenever it is installed)."""
    kind = type(value)
    if kind.__name__ == "Provide" and kind.__module__ == "dependency_injector.wiring":
        return getattr(value, "provider", None)
    return None


def provider_map(container: Any) -> Callable[[Any], Any]:
    """dependency-injector's `wiring.ProvidersMap(container).resolve_provider`: the provider of `container` that a
    provider of its class (`Container.db`), a nested one, or a name (`"db"`, `"sub.db"`) stands for, as `@inject`
    finds it; None when there is none. Without it, only the container's own providers and their names are found."""
    try:
        from dependency_injector.wiring import ProvidersMap
    except ImportError:
        _missing("dependency_injector.wiring.ProvidersMap", "overrides name providers by the container's own only")
        return lambda key: container.providers.get(key) if isinstance(key, str) else None
    mapped = ProvidersMap(container)

    def resolve(key: Any) -> Any:
        try:
            return mapped.resolve_provider(key)
        except Exception:  # a name that is not there (`_resolve_string_id` raises its own errors)
            return None

    return resolve


# -- fastmcp 4.2 ------------------------------------------------------------------------------------------------


def resolves_per_run(toolset: Any) -> bool:
    """pydantic-ai's `MCPToolset._resolves_per_run`: its `auth` or `headers` is a function of the run context, so
    pydantic-ai makes, enters and exits a copy per agent run (there is no connection for a scope to own)."""
    return bool(getattr(toolset, "_resolves_per_run", False))


def route_logs(toolset: Any, callback: Any) -> bool:
    """Give an `MCPToolset`'s fastmcp client `callback` for the server's log messages, unless its user chose a
    handler (`_client_options.log_handler`); set as the client's session argument (`Client._session_kwargs`),
    which fastmcp reads at each connection. False when the user chose one, or the client keeps none."""
    options = getattr(toolset, "_client_options", None)
    session_kwargs = getattr(toolset.client, "_session_kwargs", None)
    if options is None or getattr(options, "log_handler", None) is not None or not isinstance(session_kwargs, dict):
        return False
    session_kwargs["logging_callback"] = callback
    return True


def handshake_timeout_off(client: Any) -> bool:
    """Turn off the client's own time limit on the MCP handshake (`Client._init_timeout`): the server process's
    start-up counts against it, and llm-do's `startup_timeout` bounds both. False when the client has none."""
    if not hasattr(client, "_init_timeout"):
        return False
    client._init_timeout = None
    return True
