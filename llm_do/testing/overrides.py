"""`Overrides`: provider overrides for one test, all undone together, even when the test fails."""

from __future__ import annotations

from types import TracebackType
from typing import Any, TypeVar

from dependency_injector import providers

from llm_do._compat import configuration_root

__all__ = ["Overrides", "override"]

T = TypeVar("T")


class Overrides:
    """Overrides made through this object; `reset()` (or leaving the `with` block) undoes them all.

    ```python
    with Overrides() as overrides:
        overrides(app.db, providers.Factory(InMemoryDb))   # a provider, or a plain value
        overrides(app.config.max_depth, 1)
        ...
    ```

    Overrides are process-wide in dependency-injector; a reset also removes any override stacked
    on top of one of these afterwards, so nothing made during the test survives it.
    """

    def __init__(self) -> None:
        self._made: list[tuple[providers.Provider[Any], providers.Provider[Any]]] = []

    def __call__(self, provider: providers.Provider[Any], replacement: T) -> T:
        """Override `provider` with `replacement` (a provider, or a value served as-is); return it."""
        target: providers.Provider[Any] = (
            configuration_root(provider) if isinstance(provider, providers.ConfigurationOption) else provider
        )
        provider.override(replacement)
        overriding = target.last_overriding
        if overriding is None:
            raise RuntimeError(f"overriding {provider!r} left no override to undo")
        self._made.append((target, overriding))
        return replacement

    def reset(self) -> None:
        """Undo every override made here, newest first."""
        while self._made:
            target, overriding = self._made.pop()
            while any(made is overriding for made in target.overridden):
                target.reset_last_overriding()

    def __enter__(self) -> Overrides:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.reset()


def override(provider: providers.Provider[Any], replacement: Any) -> Overrides:
    """Override one provider; use it as `with override(app.db, fake):` to undo it on exit."""
    overrides = Overrides()
    overrides(provider, replacement)
    return overrides
