"""The package is a house with no loops: every module of llm_do imports only modules below it (type-only
imports included), never another module's private names, and never the `containers` wiring."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "llm_do"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[tuple[str, list[str], int]]:
    """(imported module, imported names, line) for every import in the module, type-only ones included."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, list[str], int]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.append((target, [alias.name for alias in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, [], node.lineno) for alias in node.names)
    return found


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def test_no_module_imports_another_modules_private_names() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {name} from {target}"
        for path in modules().values()
        for target, names, line in imports_of(path)
        if target.startswith("llm_do")
        for name in names
        if name.startswith("_")
    ]
    assert offenders == []


def test_modules_import_downward_only() -> None:
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        graph[name] = set()
        for target, names, _ in imports_of(path):
            candidates = [f"{target}.{item}" for item in names] + [target]
            for candidate in candidates:
                if candidate in known and candidate != name:
                    graph[name].add(candidate)
                    break
    cycle = None
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        cycle = error.args[1]
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


def test_the_mechanisms_never_import_the_wiring() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path in modules().values()
        for target, _, line in imports_of(path)
        if target == "containers" or target.startswith("containers.")
    ]
    assert offenders == []
