"""Lazy facades (PEP 562): a package's public names, imported from their modules on first use."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from importlib import import_module
from typing import Any

from ._moved import moved_name

__all__ = ["lazy_imports", "lazy_names"]


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


def lazy_imports(namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of a package whose names are the relative imports of its `if TYPE_CHECKING:`
    block (`from .m import Name as Name`), its one list of them: type checkers read the block, and the first name
    asked for reads it from the package's source, then imports each name from its module on first use. `__all__`
    is those names. `namespace` is the package's `globals()` (a name imported once is kept there); a name the
    package does not give is looked for where it moved (`_moved`, with a `DeprecationWarning`)."""
    package: str = namespace["__name__"]
    table: dict[str, tuple[str, str]] = {}
    read: list[bool] = []

    def names() -> dict[str, tuple[str, str]]:
        if not read:
            table.update(type_checking_imports(namespace))
            read.append(True)
        return table

    def __getattr__(name: str) -> Any:
        if name == "__all__":
            value: Any = sorted(names())
        elif (found := names().get(name)) is not None:
            module, original = found
            value = getattr(import_module(module, package), original)
        else:  # a name the package gave before it was a room, or a public one asked of a room (deprecated), else none
            return moved_name(package, name, namespace)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *names()})

    return __getattr__, __dir__


def type_checking_imports(namespace: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Name -> (relative module, its name there) for each import of the package's `if TYPE_CHECKING:` block, read
    from the package's source (with `ast`, imported here: what only imports the package never pays for it)."""
    import ast

    package: str = namespace["__name__"]
    get_source = getattr(namespace["__spec__"].loader, "get_source", None)  # some loaders have none (pytest's)
    source = get_source(package) if get_source is not None else None
    file = namespace.get("__file__")
    if source is None and isinstance(file, str) and file.endswith(".py"):
        with open(file, encoding="utf-8") as text:
            source = text.read()
    if source is None:
        raise ImportError(f"{package} reads the names it gives from its source, which is missing: reinstall llm-do")
    found: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.level:
                    module = "." * statement.level + (statement.module or "")
                    found.update({alias.asname or alias.name: (module, alias.name) for alias in statement.names})
    return found
