"""Scopes and toolset specs: which lifetime a toolset has, read from the provider that declares it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dependency_injector import providers

from ..errors import ScopeMismatch
from ..scopes._scope import Scope
from ..scopes._tasks import built
from ._singletons import SessionLocalSingleton

_NOT_TOOLSETS = frozenset({"approval_policies", "config", "run_state"})
"""The providers every `AgentContainer` has that are no toolsets."""


def toolset_names(by_name: Mapping[str, providers.Provider[Any]]) -> list[str]:
    """The names of a container's providers that may build a toolset, as error messages list them: not
    `config`, `approval_policies` or `run_state`, not settings or collections, not a `Resource` (a pool or a
    client that toolsets use) unless it declares a toolset class, and not a provider declared to build a class
    that is no toolset."""
    from pydantic_ai.toolsets import AbstractToolset

    names: list[str] = []
    for name, provider in by_name.items():
        if name in _NOT_TOOLSETS or isinstance(provider, providers.Configuration | providers.Dict | providers.List):
            continue
        declared = getattr(provider, "provides", None)
        if isinstance(provider, providers.Object) and not isinstance(declared, type):
            declared = type(declared)
        if isinstance(declared, type):
            if issubclass(declared, AbstractToolset):
                names.append(name)
        elif not isinstance(provider, providers.Resource):
            names.append(name)  # a factory function: it may build one
    return names


# Order matters: SessionLocalSingleton is a ContextLocalSingleton, which is a BaseSingleton too.
_PROVIDER_SCOPES: tuple[tuple[type[providers.Provider[Any]], Scope], ...] = (
    (SessionLocalSingleton, Scope.PER_SESSION),
    (providers.ContextLocalSingleton, Scope.PER_RUN),
    (providers.Factory, Scope.PER_CALL),
    (providers.Callable, Scope.PER_CALL),
    (providers.Singleton, Scope.GLOBAL),
    (providers.ThreadSafeSingleton, Scope.GLOBAL),
    (providers.Resource, Scope.GLOBAL),
    (providers.Object, Scope.GLOBAL),
)


def scope_of_provider(provider: providers.Provider[Any]) -> Scope:
    """Read the scope from a provider's kind; raise `TypeError` for kinds without a clear lifetime."""
    for kind, scope in _PROVIDER_SCOPES:
        if isinstance(provider, kind):
            return scope
    raise TypeError(
        f"{type(provider).__name__} has no llm-do scope: declare toolsets with Factory (per call), "
        "RunLocalSingleton (per run), SessionLocalSingleton (per session), or "
        "Singleton/ThreadSafeSingleton/Resource/Object (global)"
    )


def injection_scope(provider: providers.Provider[Any]) -> Scope:
    """Where the object a provider gives a tool's parameter lives: a `Factory`'s in the call, a per-run
    provider's in the run, a per-session one's in the session; any other provider (a `Singleton`, a
    `Configuration` option, a `Callable` that is no factory of objects to tear down) gives what it gives."""
    try:
        return scope_of_provider(provider)
    except TypeError:
        return Scope.GLOBAL


@dataclass(frozen=True, slots=True)
class ToolsetSpec:
    """A toolset factory and the scope its instances live in.

    `factory` is called with no arguments and may return an awaitable. Build one from a
    dependency-injector provider with `ToolsetSpec.from_provider` (the scope is read from the
    provider kind) or directly from a plain callable.
    """

    factory: Callable[[], Any]
    scope: Scope = Scope.PER_CALL
    provides: Any = None
    """What the factory is declared to build, when known without calling it: a class, or (for an
    `Object` provider) the object itself. Lets a runtime check toolsets at load time; a class given as the
    factory is what it builds."""
    provider: Any = None
    """The dependency-injector provider the spec was made from, if any: what a run's overrides name."""

    def __post_init__(self) -> None:
        if self.provides is None and isinstance(self.factory, type):
            object.__setattr__(self, "provides", self.factory)

    @property
    def released_by_provider(self) -> bool:
        """Whether the provider releases what it gives (a `Resource`, or a provider overridden by one, which the
        container's `shutdown_resources()` closes): no scope enters, exits or cleans it up then."""
        provider = self.provider
        while isinstance(provider, providers.Provider) and provider.overridden:
            provider = provider.last_overriding
        return isinstance(provider, providers.Resource)

    @classmethod
    def from_provider(cls, provider: providers.Provider[Any], name: str | None = None) -> ToolsetSpec:
        """Spec whose scope is the provider's kind; an override must keep that scope (`name`, the
        toolset's, is given in the error when it does not)."""
        scope = scope_of_provider(provider)
        call = _with_ready_resources(provider)

        def create() -> Any:
            if provider.overridden:
                _check_override(provider, scope, name)
                return provider()
            return call()

        declared = getattr(provider, "provides", None)
        if not isinstance(provider, providers.Object) and not isinstance(declared, type):
            declared = None  # a factory function, or a Resource initializer: known only once called
        return cls(create, scope, declared, provider)

    @classmethod
    def coerce(cls, value: ToolsetSpec | providers.Provider[Any] | Callable[[], Any]) -> ToolsetSpec:
        """Normalize a spec, a provider, or a plain callable (per call) into a spec."""
        if isinstance(value, ToolsetSpec):
            return value
        if isinstance(value, providers.Provider):
            return cls.from_provider(value)
        if callable(value):
            return cls(value, Scope.PER_CALL)
        raise TypeError(f"expected a ToolsetSpec, a provider or a callable, got {type(value).__name__}")

    async def create(self) -> Any:
        """Call the factory and await its result when it is awaitable."""
        return await built(self.factory())


def _with_ready_resources(provider: providers.Provider[Any]) -> Callable[[], Any]:
    """A call of `provider` that hands a `Factory` the objects of its open async `Resource`s.

    dependency-injector resolves an async dependency through a future and two `asyncio.gather`s
    even once the resource is open: 8 event-loop callbacks and about 20 us per toolset built.
    Passing the resource's object as a keyword argument is what it would have injected, built
    without waiting. Only a factory already in async mode qualifies (a mode never changes once
    set), and only a keyword resource that is open, async and not overridden; the rest is left to
    the provider. The keywords are read at each call, so a later `set_kwargs` is seen.
    """
    if not isinstance(provider, providers.Factory):
        return provider

    def call() -> Any:
        if not provider.is_async_mode_enabled():
            return provider()
        ready: dict[str, Any] = {}
        for name, dependency in provider.kwargs.items():
            if (
                isinstance(dependency, providers.Resource)
                and dependency.initialized
                and not dependency.overridden
                and dependency.is_async_mode_enabled()
            ):
                value = dependency()
                if isinstance(value, asyncio.Future) and _settled_with_a_result(value):
                    ready[name] = value.result()
        return provider(**ready)

    return call


def _settled_with_a_result(future: asyncio.Future[Any]) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None


def _check_override(provider: providers.Provider[Any], declared: Scope, name: str | None) -> None:
    overriding = provider.last_overriding
    if overriding is None:
        return
    try:
        actual = scope_of_provider(overriding)
    except TypeError:
        return  # e.g. a Callable-like provider we cannot classify: trust the declaration
    if actual is not declared:
        kind = type(provider).__name__
        raise ScopeMismatch(
            f"{'' if name is None else f'toolset {name!r}: '}{kind} is {declared} but is overridden by "
            f"{type(overriding).__name__} ({actual}); override it with a provider of the same scope "
            f"(a {kind}) so instances keep their lifetime"
        )


ToolsetSource = ToolsetSpec | providers.Provider[Any] | Callable[[], Any]
"""A toolset spec, a provider (scope from its kind), or a plain factory (per call)."""

ToolsetRef = object
"""How an entry names one of its toolsets: a name, a provider of the runtime's container (`App.tools`), a provider
given as a runtime toolset, or another entry."""
