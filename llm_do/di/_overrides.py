"""Overrides for one run (or one session): a provider's object swapped there, and nowhere else.

dependency-injector's `override` is process-wide: one provider object, which every dependent calls from its
compiled graph. So a run's override lives where every dependent's resolution passes: a `_Switch` sits on top of
the provider's override stack (above any process-wide override) and, when called in a run that overrides the
provider, gives that run's object; anywhere else, what the provider gives without it. The run is found through
its box (`CURRENT_BOX`), which every task, callback and worker thread of the run inherits, so parallel tool
calls, nested calls and code wired with `Provide[...]` see the run's object, and a concurrent run never does.

A global object built from an overridden provider (a `Singleton` or `Resource` whose dependencies include it)
is rebuilt for the run from the run's object, and released with the run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from dependency_injector import providers

from .._compat import provider_map
from ..errors import ConfigurationError
from ..scopes._box import CURRENT_BOX
from ..scopes._scope import Scope
from ..scopes._teardown import Teardown
from ._container import ClosedFirst, Container
from ._singletons import SessionLocalSingleton

OverridesSource = Mapping[Any, Any]
"""What `Runtime.run(overrides=...)` takes: providers (the container's, its class's, or their names) to what
the run gets instead: an object (served as is, and never torn down by llm-do), or a provider (called as the
overridden provider would be, its objects made by the run)."""

_MISSING: Any = object()
_LIFETIMES = {Scope.PER_CALL: 0, Scope.PER_RUN: 1, Scope.PER_SESSION: 2, Scope.GLOBAL: 3}

_REBUILT = (providers.BaseSingleton, providers.Resource)

_OVERRIDING_LOCK: Any = getattr(providers.Provider, "overriding_lock")  # noqa: B009  (not in the stubs)


def _own_provide(provider: providers.Provider[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What `provider` gives by itself, without its overrides (`Provider._provide`, a documented hook for custom
    providers, not in the stubs)."""
    return getattr(provider, "_provide")(args, kwargs)  # noqa: B009


"""Providers that keep one object for the process: rebuilt for a run whose overrides they are built from."""


class _Switch(providers.Provider[Any]):
    """Sits on top of `target`'s override stack (on `host`: the target itself, or the process-wide override on
    top of it) and gives, in a run or session that overrides `target`, that one's object; elsewhere, `host`'s."""

    def __init__(self, target: providers.Provider[Any], host: providers.Provider[Any]) -> None:
        self.target = target
        self.host = host
        super().__init__()

    def _provide(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        box = CURRENT_BOX.get()
        while box is not None:
            overrides = box.overrides
            if overrides is not None:
                made = overrides.provide(self.target, args, kwargs)
                if made is not _MISSING:
                    return made
            box = box.session
        return _own_provide(self.host, args, kwargs)

    def __deepcopy__(self, memo: dict[Any, Any] | None = None) -> _Switch:
        memo = {} if memo is None else memo
        copied = memo.get(id(self))
        if copied is None:
            copied = memo[id(self)] = _Switch(
                providers.deepcopy(self.target, memo), providers.deepcopy(self.host, memo)
            )
        result: _Switch = copied
        return result


def _switched(target: providers.Provider[Any]) -> None:
    """Make sure `target`'s calls pass a switch: on top of the provider whose stack is its chain's last."""
    with _OVERRIDING_LOCK:
        host = target
        while (above := host.last_overriding) is not None:
            if isinstance(above, _Switch):
                if above.target is not target:
                    raise ConfigurationError(
                        f"{above.host!r} overrides both {above.target!r} and {target!r} process-wide; "
                        "one of them cannot be overridden for one run: override them with two providers"
                    )
                return
            host = above
        host.override(_Switch(target, host))


class Graph:
    """What a container's providers are built from, read once: to find what a run's overrides reach."""

    __slots__ = ("_container", "_deps", "_known", "_map", "_session_locals")

    def __init__(self, container: Container | None) -> None:
        self._container = container
        self._map: Any = None
        self._known: set[int] = set()
        self._deps: list[tuple[providers.Provider[Any], frozenset[int]]] = []
        """Each provider that keeps one object (`Singleton`, `Resource`), with what it is built from."""
        self._session_locals: list[tuple[providers.Provider[Any], frozenset[int]]] = []
        if container is None:
            return
        provider: providers.Provider[Any]
        for provider in container.traverse():
            self._known.add(id(provider))
            if isinstance(provider, ClosedFirst):
                continue  # (a runtime the container provides: what it says it is built from is every resource)
            if isinstance(provider, (*_REBUILT, SessionLocalSingleton)):
                deps = frozenset(id(each) for each in _dependencies(provider))
                (self._session_locals if isinstance(provider, SessionLocalSingleton) else self._deps).append(
                    (provider, deps)
                )

    def provider(self, key: object, asked: str = "overrides") -> providers.Provider[Any]:
        """The container's provider `key` stands for: the provider, its class's, or its name (`"db"`, `"sub.db"`).
        `asked` says who asks, in the `ConfigurationError` for a key that stands for none."""
        if isinstance(key, providers.Provider) and id(key) in self._known:
            return key
        container = self._container
        if container is None:
            raise ConfigurationError(f"{asked}: {key!r} names a provider, but the runtime has no container")
        if self._map is None:
            self._map = provider_map(container)
        found = self._map(key) if isinstance(key, providers.Provider | str) else None
        if found is None or (id(found) not in self._known and not _is_option(found)):
            raise ConfigurationError(
                f"{asked}: {key!r} is not a provider of the runtime's container ({type(container).__qualname__}); "
                "name one of its providers (container.db), its class's (Container.db), or its name ('db')"
            )
        result: providers.Provider[Any] = found
        return result

    def reached(self, given: Iterable[providers.Provider[Any]]) -> tuple[providers.Provider[Any], ...]:
        """The providers that keep one object and are built from one of `given` (not given themselves)."""
        ids = {id(each) for each in given}
        return tuple(provider for provider, deps in self._deps if id(provider) not in ids and deps & ids)

    def sessions_reached(self, given: Iterable[providers.Provider[Any]]) -> tuple[providers.Provider[Any], ...]:
        """The per-session providers built from one of `given`."""
        ids = {id(each) for each in given}
        return tuple(provider for provider, deps in self._session_locals if deps & ids)


class Overrides:
    """The providers one run (or one session) overrides, with what it gets instead, and the objects it rebuilt
    from them: a `Singleton` or `Resource` built from an overridden provider gets one object of the run's own."""

    __slots__ = ("_copies", "_given", "_lock", "_reached", "level", "names")

    def __init__(self, graph: Graph, given: OverridesSource, level: Scope) -> None:
        self.level = level
        """Where what the overrides rebuild lives: the run, or the session."""
        resolved: dict[providers.Provider[Any], Any] = {}
        self.names: dict[int, str] = {}
        for key, value in given.items():
            provider = graph.provider(key)
            if _is_option(provider):
                raise ConfigurationError(
                    f"overrides: {key!r} is a configuration option, which dependency-injector lets override only "
                    "process-wide; override for the run the provider built from it instead"
                )
            if provider in resolved:
                raise ConfigurationError(f"overrides: {key!r} is given twice (as {provider!r})")
            resolved[provider] = value
            self.names[id(provider)] = key if isinstance(key, str) else repr(key)
        self._given = resolved
        self._reached = frozenset(graph.reached(resolved))
        self._copies: dict[providers.Provider[Any], providers.Provider[Any]] = {}
        self._lock = threading.Lock()  # (a sync tool in a worker thread may resolve one too)
        for provider in (*resolved, *self._reached):
            _switched(provider)

    def gives(self, provider: object) -> bool:
        """Whether `provider` is overridden here with an object (which nobody here may tear down)."""
        value = self._given.get(provider, _MISSING) if isinstance(provider, providers.Provider) else _MISSING
        return value is not _MISSING and not isinstance(value, providers.Provider)

    def scope_of(self, provider: object, declared: Scope) -> Scope:
        """Where an object of `provider` lives under these overrides: where it is declared to, but no longer than
        they last when they reach it (a global rebuilt for one run is the run's)."""
        reached = isinstance(provider, providers.Provider) and (provider in self._given or provider in self._reached)
        return self.level if reached and _LIFETIMES[declared] > _LIFETIMES[self.level] else declared

    def provide(self, provider: providers.Provider[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """What `provider` gives here, or `_MISSING` when these overrides do not touch it."""
        value = self._given.get(provider, _MISSING)
        if value is not _MISSING:
            return value(*args, **kwargs) if isinstance(value, providers.Provider) else value
        if provider not in self._reached:
            return _MISSING
        copy = self._copies.get(provider)
        if copy is None:
            with self._lock:
                copy = self._copies.get(provider)
                if copy is None:
                    copy = self._copies[provider] = _rebuilt(provider)
        return copy(*args, **kwargs)

    async def close(self, budget: float) -> bool:
        """Shut down the `Resource`s rebuilt here, newest first, as a scope releases its objects: each even when one
        fails (logged on the `llm_do` logger, never raised: the run's outcome stays its own), within `budget`
        seconds each, shielded from a cancellation; forget everything. True when a cancellation arrived meanwhile."""
        copies = list(self._copies.items())
        self._copies.clear()
        self._given = {}
        teardown = Teardown(budget)
        for provider, copy in copies:
            if isinstance(copy, providers.Resource) and copy.initialized:
                teardown.add(f"{provider!r}, rebuilt for one {self.level} from its overrides,", copy.shutdown)
        return await teardown.close(None)

    @property
    def given(self) -> tuple[providers.Provider[Any], ...]:
        """The providers overridden here."""
        return tuple(self._given)


def _is_option(provider: object) -> bool:
    return isinstance(provider, providers.ConfigurationOption | providers.Configuration)


def _dependencies(provider: providers.Provider[Any]) -> list[providers.Provider[Any]]:
    found: list[providers.Provider[Any]] = []
    each: providers.Provider[Any]
    for each in provider.traverse():
        if each is not provider:
            found.append(each)
    return found


def _rebuilt(provider: providers.Provider[Any]) -> providers.Provider[Any]:
    """A provider of a new object of what `provider` keeps one of, from the same dependencies (which give the
    run's objects where the run overrides them)."""
    if isinstance(provider, providers.Resource):
        return providers.Resource(provider.provides, *provider.args, **provider.kwargs)
    assert isinstance(provider, providers.BaseSingleton)
    copy: providers.Singleton[Any] = providers.Singleton(provider.provides, *provider.args, **provider.kwargs)
    if provider.attributes:
        copy.add_attributes(**provider.attributes)
    return copy


def check_session_overrides(graph: Graph, overrides: Overrides, session_id: str) -> None:
    """A run of a session cannot override what the session's objects are built from: they are made once."""
    reached = graph.sessions_reached(overrides.given)
    if reached:
        raise ConfigurationError(
            f"this run of session {session_id!r} overrides a provider that the per-session provider(s) "
            f"{', '.join(map(repr, reached))} are built from; per-session objects are made once per session: "
            f"give the overrides to the session instead (runtime.session({session_id!r}, overrides=...))"
        )
