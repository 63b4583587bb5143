"""Tool parameters the container fills per call, hidden from the tool's schema.

A tool asks for one as dependency-injector code does, with its own marker: a default
(`repo: Repo = Provide[App.repo]`) or an annotation (`repo: Annotated[Repo, Provide[App.repo]]`). The model never
sees the parameter; each call of the tool is given the object its call scope resolves (`Injector`).
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pydantic_ai import RunContext

from .._compat import injection_key
from ..errors import ToolsetError
from ._sync import run_sync_tool

_INJECTIONS = "__llm_do_injections__"
_WRAPS = "__llm_do_wraps__"


class Injector(Protocol):
    """What fills a tool's injected parameters: the call's scope (llm-do's `CallScope`, a tool's `ctx.deps`)."""

    async def injected(self, key: object, asked_by: str) -> Any:
        """The object the call's scope has for `key` (a provider, its class's, or its name)."""
        ...


def injected_parameters(func: Callable[..., Any]) -> dict[str, object]:
    """The parameters of `func` the container fills, by name, each with what it asks for (the marker's provider)."""
    known = getattr(func, _INJECTIONS, None)
    if known is not None:
        return dict(known)
    found: dict[str, object] = {}
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception:  # an annotation that does not evaluate: pydantic-ai reports it when it describes the tool
        hints = {}
    for name, parameter in inspect.signature(func).parameters.items():
        key = injection_key(parameter.default)
        hint = hints.get(name)
        if key is None and typing.get_origin(hint) is typing.Annotated:
            key = next((k for k in map(injection_key, typing.get_args(hint)[1:]) if k is not None), None)
        if key is not None:
            found[name] = key
    return found


def visible_signature(func: Callable[..., Any], hidden: Mapping[str, object]) -> inspect.Signature:
    """`func`'s signature without the parameters in `hidden`."""
    signature = inspect.signature(func)
    return signature.replace(parameters=[p for p in signature.parameters.values() if p.name not in hidden])


async def resolve_injections(deps: object, injections: Mapping[str, object], asked_by: str) -> dict[str, Any]:
    """The object for each injected parameter, from the call's scope (`deps`)."""
    injected = getattr(deps, "injected", None)
    if injected is None:
        raise ToolsetError(
            f"tool {asked_by} takes {', '.join(map(repr, injections))} from the container, which only an llm-do "
            "call gives (its CallScope is the agent's deps): run it through a Runtime"
        )
    return {name: await injected(key, f"{asked_by}({name})") for name, key in injections.items()}


def injected(func: Callable[..., Any]) -> Callable[..., Any]:
    """A plain tool function whose parameters marked `Provide[...]` the call's scope fills, as pydantic-ai can
    describe and call it: `FunctionToolset([injected(find)])`, `@toolset.tool` over `@injected`, `Agent(tools=[...])`.

    The model never sees those parameters. The function returned takes pydantic-ai's `RunContext` first (to find
    the call's scope) and passes it on only if `func` takes it; `func` itself is returned when it has none. A sync
    `func` runs on its run's own thread, as a sync `Toolset` method does."""
    injections = injected_parameters(func)
    if not injections:
        return func
    visible = visible_signature(func, injections)
    parameters = list(visible.parameters.values())
    hints = typing.get_type_hints(func, include_extras=True)
    takes_ctx = bool(parameters) and _is_run_context(hints.get(parameters[0].name))
    asked_by = getattr(func, "__qualname__", repr(func))
    is_async = inspect.iscoroutinefunction(func)

    async def call(ctx: RunContext[Any], /, *args: Any, **kwargs: Any) -> Any:
        kwargs.update(await resolve_injections(ctx.deps, injections, asked_by))
        if is_async:
            return await (func(ctx, *args, **kwargs) if takes_ctx else func(*args, **kwargs))
        body = functools.partial(func, ctx, *args, **kwargs) if takes_ctx else functools.partial(func, *args, **kwargs)
        return await run_sync_tool(body, None, f"tool {asked_by!r}")

    for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(call, attribute, getattr(func, attribute, None))
    own = parameters[1:] if takes_ctx else parameters
    ctx_parameter = inspect.Parameter("_llm_do_ctx", inspect.Parameter.POSITIONAL_ONLY, annotation=RunContext[Any])
    call.__signature__ = visible.replace(parameters=[ctx_parameter, *own])  # type: ignore[attr-defined]
    call.__annotations__ = {
        "_llm_do_ctx": RunContext[Any],
        **{p.name: hints[p.name] for p in own if p.name in hints},
        **({"return": hints["return"]} if "return" in hints else {}),
    }
    setattr(call, _INJECTIONS, injections)
    setattr(call, _WRAPS, func)
    return call


def unwrapped(func: Callable[..., Any]) -> Callable[..., Any]:
    """The function `injected` wrapped, or `func`."""
    found: Callable[..., Any] = getattr(func, _WRAPS, func)
    return found


def _is_run_context(hint: object) -> bool:
    return hint is RunContext or typing.get_origin(hint) is RunContext
