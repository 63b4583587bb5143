"""What a runtime reads of a dependency-injector container once, at load: its per-run and per-session providers,
its `run_state`, its approval policies and its `Resource`s, which the runtime shuts down when it closes."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from dependency_injector import containers, providers

from .._compat import provider_map
from ..errors import ConfigurationError
from ..scopes._bus import Sink
from ..scopes._teardown import Teardown
from ._singletons import RunLocalSingleton, SessionLocalSingleton

Container = containers.Container
"""A dependency-injector container, as the runtime takes it (the other rooms never import dependency-injector)."""

_NONE: Mapping[str, providers.Provider[Any]] = MappingProxyType({})


class CapturablePerRunWarning(UserWarning):
    """Per-run providers declared as plain `ContextLocalSingleton`: a context snapshot can keep their instances."""


@dataclass(frozen=True, slots=True)
class ContainerParts:
    """The parts of a container a runtime works with, read once (a runtime without a container has none)."""

    by_name: Mapping[str, providers.Provider[Any]] = field(default_factory=lambda: _NONE)
    """The container's providers by name: toolsets are looked up here."""
    run_state: providers.Provider[Any] | None = None
    """The `run_state` provider, when it is per-run: it makes each run's `RunState`."""
    per_run: tuple[tuple[str, providers.Provider[Any]], ...] = ()
    """(name, provider) of every per-run provider but `run_state`, resolved at each run's start."""
    per_session: tuple[tuple[str, providers.Provider[Any]], ...] = ()
    """(name, provider) of every `SessionLocalSingleton`, resolved when a session's first run starts."""
    context_locals: tuple[providers.ContextLocalSingleton[Any], ...] = ()
    """Plain `ContextLocalSingleton`s: reset at each run's start and end."""
    capturable: tuple[str, ...] = ()
    """Names of per-run providers whose instances a context snapshot can keep alive after a run."""
    policies: Mapping[str, Any] | None = field(default=None, hash=False)
    """What the container's `approval_policies` provider built, if it has one."""

    @classmethod
    def of(cls, container: Container | None) -> ContainerParts:
        """Read `container`; warns (`CapturablePerRunWarning`) about per-run providers a snapshot can keep."""
        if container is None:
            return cls()
        by_name = dict(container.providers)
        names = {id(provider): name for name, provider in by_name.items()}
        run_state = by_name.get("run_state")
        if not isinstance(run_state, providers.ContextLocalSingleton):
            run_state = None
        per_run: list[tuple[str, providers.Provider[Any]]] = []
        per_session: list[tuple[str, providers.Provider[Any]]] = []
        plain: list[providers.ContextLocalSingleton[Any]] = []
        for provider in container.traverse(types=[providers.ContextLocalSingleton]):
            name = names.get(id(provider), _described(provider))
            if isinstance(provider, SessionLocalSingleton):
                per_session.append((name, provider))
                continue
            if not isinstance(provider, RunLocalSingleton):
                plain.append(provider)
            if provider is not run_state:
                per_run.append((name, provider))
        capturable = tuple(names.get(id(provider), _described(provider)) for provider in plain)
        if capturable:
            warnings.warn(
                f"per-run provider(s) {', '.join(map(repr, capturable))} are plain ContextLocalSingletons: "
                "a callback or task started during a run (a connection pool's idle timer, say) keeps their "
                "instances alive after the run. Declare them with llm_do.RunLocalSingleton, which the run "
                "empties when it ends.",
                CapturablePerRunWarning,
                stacklevel=4,
            )
        return cls(
            MappingProxyType(by_name),
            run_state,
            tuple(per_run),
            tuple(per_session),
            tuple(plain),
            capturable,
            _policies(by_name.get("approval_policies")),
        )


def is_provider(value: object) -> bool:
    """Whether `value` is a dependency-injector provider (called with no argument, it gives what it provides)."""
    return isinstance(value, providers.Provider)


def provider_name(
    container: Container | None, by_name: Mapping[str, providers.Provider[Any]], ref: object
) -> str | None:
    """The name under which `container` has the provider `ref`: one of its own (`app.tools`), or of its class
    (`App.tools`, as `Provide[...]` names it); None for anything else."""
    if not isinstance(ref, providers.Provider) or container is None:
        return None
    names = {id(provider): name for name, provider in by_name.items()}
    found = names.get(id(ref))
    if found is None:
        mapped = provider_map(container)(ref)
        found = None if mapped is None else names.get(id(mapped))
    return found


def _policies(provider: providers.Provider[Any] | None) -> Mapping[str, Any] | None:
    if provider is None:
        return None
    built = provider()
    return policies_built(built, "the container's approval_policies provider")


def policies_built(built: object, source: str) -> Mapping[Any, Any]:
    """Approval policies given as a mapping of toolsets to policies, or as a provider that builds one (called now);
    None for none."""
    if built is None:
        return {}
    if isinstance(built, providers.Provider):
        source = f"{source}: {built!r}"
        built = built()
    if not isinstance(built, Mapping):
        raise ConfigurationError(
            f"{source} built {type(built).__qualname__}; "
            "declare it as providers.Dict(toolset_name=ToolPolicy(...), ...)"
        )
    return built


class ClosedFirst(providers.Resource[Any]):
    """A `Resource` given its container (`providers.Self()`, first) that the container's `shutdown_resources()`
    shuts down before its other resources: it says it is built from them all (`related`), so that what it runs
    ends before what they hold goes (a runtime's runs, before the pools they use). Keyword values that are not
    providers are given as they are (dependency-injector would copy them with the container)."""

    def __init__(self, initializer: Any = None, /, *args: Any, **kwargs: Any) -> None:
        if initializer is None:  # (dependency-injector copies a provider by making a bare one and setting it)
            super().__init__()
            return
        given = {
            name: value if isinstance(value, providers.Provider) else providers.Object(value)
            for name, value in kwargs.items()
        }
        super().__init__(initializer, *args, **given)

    @property
    def related(self) -> Iterator[providers.Provider[Any]]:
        yield from providers.Resource.related.__get__(self)
        container = self.args[0]() if self.args and isinstance(self.args[0], providers.Self) else None
        for provider in _top_resources(container):
            if provider is not self and not isinstance(provider, ClosedFirst):
                yield provider


def _top_resources(container: Any) -> Iterator[providers.Provider[Any]]:
    """The `Resource`s of `container` and of the containers it holds (read without `traverse`, which asks each
    provider what it is built from, this one's question too)."""
    for provider in getattr(container, "providers", {}).values():
        if isinstance(provider, providers.Resource):
            yield provider
        elif isinstance(provider, providers.Container):
            yield from _top_resources(provider.container)


class Resources:
    """A container's `Resource` providers, and those overriding them, to shut down when the runtime closes."""

    def __init__(self, container: Container | None, owned: bool = True, timeout: float = 10.0) -> None:
        self._container = container if owned else None
        self._timeout = timeout
        self._seen: list[tuple[providers.Provider[Any], Any]] = (
            []
            if container is None
            else [(provider, provider.last_overriding) for provider in container.traverse(types=[providers.Resource])]
        )

    def note_overrides(self) -> None:
        """Remember `Resource` overrides made since load, so closing shuts them down even once reset."""
        for index, (provider, seen) in enumerate(self._seen):
            current = provider.last_overriding
            if current is not seen:
                self._seen[index] = (provider, current)
                if isinstance(current, providers.Resource):
                    self._seen.append((current, current.last_overriding))

    async def shutdown(self, sink: Sink | None = None) -> None:
        """Shut down the container's `Resource`s and any overriding one that was in use, in the order of the
        container's own `shutdown_resources()` (a resource before those it is built from), each as a scope releases
        an object: within the cleanup budget, shielded from a cancellation (raised once all are shut down), a
        failure logged and the next one shut down all the same (`shutdown_resources()` gives up at the first)."""
        container = self._container
        if container is None:
            return
        found: list[providers.BaseResource[Any]] = list(container.traverse(types=[providers.BaseResource]))
        found += [p for p, _ in self._seen if isinstance(p, providers.BaseResource) and p not in found]
        names = dict(_named_resources(container))
        teardown = Teardown(self._timeout)
        for provider in reversed(_shutdown_order([p for p in found if p.initialized])):
            teardown.add(f"resource {names.get(id(provider)) or _described(provider)!r}", provider.shutdown)
        if await teardown.close(None, sink):
            raise asyncio.CancelledError


def _shutdown_order(resources: list[providers.BaseResource[Any]]) -> list[providers.BaseResource[Any]]:
    """`resources` as `shutdown_resources()` shuts them down: each after every resource built from it."""
    order: list[providers.BaseResource[Any]] = []
    left = list(resources)
    while left:
        ready = [r for r in left if not any(r is not other and r in other.related for other in left)]
        ready = ready or left  # (a cycle: all at once, as nothing can go first)
        order += ready
        left = [r for r in left if r not in ready]
    return order


def _named_resources(container: Any, prefix: str = "") -> Iterator[tuple[int, str]]:
    """(id, name) of each `Resource` of `container` and of the containers it holds, by name (`sub.pool`)."""
    for name, provider in getattr(container, "providers", {}).items():
        if isinstance(provider, providers.BaseResource):
            yield id(provider), prefix + name
            for overriding in provider.overridden:
                yield id(overriding), f"{prefix}{name}"
        elif isinstance(provider, providers.Container):
            yield from _named_resources(provider.container, f"{prefix}{name}.")


def _described(provider: providers.Provider[Any]) -> str:
    provides = getattr(provider, "provides", None)
    return f"{type(provider).__name__}({getattr(provides, '__qualname__', provides)!r})"
