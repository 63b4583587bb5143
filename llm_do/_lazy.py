"""Lazy facades (PEP 562): a package's public names, imported from their modules on first use."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from importlib import import_module
from typing import Any

from ._moved import moved_name

__all__ = ["lazy_names"]


def lazy_names(
    package: str, exports: Mapping[str, Iterable[str]], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose module `m` (relative) gives the names `exports[m]`;
    `namespace` is the package's `globals()` (a name imported once is kept there). A name the package's path gave
    before the move into rooms is found where it lives now, with a `DeprecationWarning` (`_moved`)."""
    modules = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:  # a name the package gave before it was a room (deprecated), else none
            return moved_name(package, name, namespace)
        value = getattr(import_module(f".{module}", package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *namespace["__all__"]})

    return __getattr__, __dir__
