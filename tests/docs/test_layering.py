"""The package is a house with no loops: every module of llm_do imports only modules below it (type-only
imports included), never another module's private names, and never the `containers` wiring."""

from __future__ import annotations

import ast
import graphlib
import importlib
from pathlib import Path

from llm_do import _moved

PACKAGE = Path(__file__).parents[2] / "llm_do"


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


def given_by(init: Path) -> dict[str, str]:
    """Name -> module (`llm_do.room._module`) of each name a lazy package gives: the imports of its
    `if TYPE_CHECKING:` block, its one list of names (`llm_do._lazy.lazy_imports` reads the same block)."""
    package = module_name(init)
    found: dict[str, str] = {}
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.level == 1:
                    found.update(
                        {alias.asname or alias.name: f"{package}.{statement.module}" for alias in statement.names}
                    )
    return found


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


# -- rooms: each subpackage says in its docstring which rooms it may import, and imports no others ---------

BASE = {"errors", "_lazy", "_compat", "_moved"}
"""What every room may use: the errors (and URLs shown without secrets), the lazy facade, third-party internals,
and the table of import paths that moved (deprecated aliases)."""


def rooms() -> dict[str, Path]:
    """Each subpackage of llm_do (a room), by name."""
    return {path.parent.name: path for path in sorted(PACKAGE.glob("*/__init__.py"))}


def test_a_moved_path_has_no_file_and_imports_as_a_deprecated_alias() -> None:
    """Each old path `_moved` lists is made on import (`MovedFinder`), with no file of its own in the house, and
    finds its names where they moved."""
    from llm_do._moved import MOVED

    for old in MOVED:
        path = PACKAGE.parent.joinpath(*old.split("."))
        assert not path.with_suffix(".py").exists() and not path.is_dir(), f"{old} has a file: {path}"
        module = importlib.import_module(old)
        assert module.__spec__ is not None and module.__spec__.origin is None, old
        assert module.__doc__ is not None and MOVED[old] in module.__doc__, old


def room_of(module: str) -> str | None:
    """The room (subpackage) or top-level module of llm_do that `module` belongs to; None outside llm_do."""
    parts = module.split(".")
    if parts[0] != "llm_do":
        return None
    return "llm_do" if len(parts) == 1 else parts[1]


def allowed(init: Path) -> set[str] | None:
    """The rooms a subpackage's docstring says it may import (`May import: a, b.`); None when it says nothing."""
    docstring = ast.get_docstring(ast.parse(init.read_text())) or ""
    for line in docstring.splitlines():
        if line.startswith("May import:"):
            listed = line.removeprefix("May import:").strip().rstrip(".")
            if listed == "the standard library only":
                return set()
            return {name.strip() for name in listed.split(",")}
    return None


def test_every_room_says_what_it_may_import() -> None:
    silent = [name for name, init in rooms().items() if allowed(init) is None]
    assert silent == [], f"add a line 'May import: ...' to the docstring of llm_do/{{{','.join(silent)}}}/__init__.py"


def test_each_room_imports_only_the_rooms_its_docstring_names() -> None:
    """A public name imported from `llm_do` counts as an import of the module it lives in, unless the room may
    import `llm_do` itself."""
    known = modules()
    public = given_by(PACKAGE / "__init__.py")
    offenders = []
    for room, init in rooms().items():
        permitted = (allowed(init) or set()) | BASE | {room}
        for path in sorted(init.parent.rglob("*.py")):
            for target, names, line in imports_of(path):
                if target == "llm_do" and "llm_do" not in permitted:  # the facade: the module a name lives in
                    candidates = [f"llm_do.{name}" if f"llm_do.{name}" in known else public[name] for name in names]
                else:
                    candidates = [f"{target}.{name}" for name in names if f"{target}.{name}" in known] or [target]
                for candidate in candidates:
                    other = room_of(candidate)
                    if other is not None and other not in permitted:
                        offenders.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {candidate} ({other})")
    assert offenders == [], "\n".join(offenders)


def test_only_di_imports_dependency_injector_below_the_applications_rooms() -> None:
    """The core (everything a run goes through) reaches dependency-injector only through `llm_do.di`; the rooms
    that build containers for applications (project, cli, testing, jobs) may use it directly."""
    applications = {"project", "cli", "testing", "jobs", "_compat"}
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for name, path in modules().items()
        if room_of(name) not in applications | {"di"}
        for target, _, line in imports_of(path)
        if target.split(".")[0] == "dependency_injector"
    ]
    assert offenders == []


def test_the_top_level_holds_at_most_eight_files_under_eleven_hundred_lines() -> None:
    """The top level holds what every room may use; `_compat.py` grows with each third-party internal read. The
    table of old paths (`_moved.py`), kept for a while, is not counted in the lines."""
    files = sorted(PACKAGE.glob("*.py"))
    assert len(files) <= 8, [path.name for path in files]
    files.remove(PACKAGE / "_moved.py")
    lines = sum(len(path.read_text().splitlines()) for path in files)
    assert len(files) <= 8 and lines < 1100, f"{len(files)} files, {lines} lines: {[path.name for path in files]}"


def reading_list() -> tuple[list[str], dict[str, str]]:
    """docs/architecture.md's list of the files a run reads, in order, and the detours it names (file: why)."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    section = doc.split("## Reading one run", 1)[1].split("\n## ", 1)[0]
    table, _, rest = section.partition("### Detours")
    listed = [line.split("`")[1] for line in table.splitlines() if line.startswith("| ") and "`llm_do/" in line]
    detours = {
        line.split("`")[1]: line.split("|")[2].strip()
        for line in rest.splitlines()
        if line.startswith("| ") and "`llm_do/" in line
    }
    return listed, detours


def test_a_runs_lifecycle_reads_in_the_files_the_list_says() -> None:
    """docs/architecture.md lists the files to read, in order, and says how many there are."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    section = doc.split("## Reading one run", 1)[1].split("\n## ", 1)[0]
    listed, detours = reading_list()
    assert listed and all((PACKAGE.parent / name).is_file() for name in listed + list(detours)), (listed, detours)
    assert f"in {_NUMBERS[len(listed)]} files" in section, "the count of files the section states is not true"


CORE = ("run", "scopes", "di", "guards")
"""The rooms a plain run goes through: what a listed file takes from them is listed, or named as a detour."""


def test_every_core_module_a_listed_file_uses_is_listed_or_a_detour() -> None:
    listed, detours = reading_list()
    known = set(listed) | set(detours)
    missing: list[str] = []
    for name in listed:
        path = PACKAGE.parent / name
        for target, names, line in imports_of(path):
            parts = target.split(".")
            if len(parts) < 2 or parts[0] != "llm_do" or parts[1] not in CORE:
                continue
            if len(parts) > 2:  # a module of the room, named
                used = {f"llm_do/{parts[1]}/{parts[2]}.py"}
            else:  # the room's door: the modules that give the names
                door = given_by(PACKAGE / parts[1] / "__init__.py")
                used = {f"{door[each].replace('.', '/')}.py" for each in names if each in door}
            missing.extend(f"{name}:{line} uses {each}" for each in sorted(used - known))
    assert missing == [], "list these in docs/architecture.md's reading list, or as detours:\n" + "\n".join(missing)


_NUMBERS = {
    1: "one",
    2: "two",
    3: "three",
    4: "four",
    5: "five",
    6: "six",
    7: "seven",
    8: "eight",
    9: "nine",
    10: "ten",
}


# -- one list per name: the core's modules are private; its rooms' doors give what `llm_do` does not ----------


def core_doors() -> dict[str, Path]:
    """The `__init__` of each room of the core, by room."""
    return {room: PACKAGE / room / "__init__.py" for room in sorted(ROOMS)}


def in_the_core(path: Path) -> bool:
    """Whether the module at `path` is of the core: its rooms and the top-level modules (`llm_do`, `errors`,
    `results`, ...)."""
    return path.parent == PACKAGE or path.relative_to(PACKAGE).parts[0] in ROOMS


ROOMS = {name.removeprefix("llm_do.") for name in _moved.CORE}
"""The rooms of the core."""


def outside_the_core() -> list[Path]:
    """Every module outside the core: the other rooms, the wiring, the tests, the examples and the benchmarks."""
    root = PACKAGE.parent
    paths = [path for path in modules().values() if not in_the_core(path)]
    return paths + [
        path for folder in ("containers", "tests", "examples", "benchmarks") for path in (root / folder).rglob("*.py")
    ]


def test_each_name_is_listed_once() -> None:
    """A name is given by one list: `llm_do`'s if it is public, else its room's door's. The lists are `if
    TYPE_CHECKING:` blocks of re-exports (`Name as Name`); no module of the core keeps an `__all__` or a table."""
    lists = {"llm_do": given_by(PACKAGE / "__init__.py")} | {
        f"llm_do.{room}": given_by(door) for room, door in core_doors().items()
    }
    where: dict[str, list[str]] = {}
    for package, names in lists.items():
        for name in names:
            where.setdefault(name, []).append(package)
    assert {name: packages for name, packages in where.items() if len(packages) > 1} == {}
    for package, names in lists.items():
        for name, module in names.items():
            assert "._" in module or package == "llm_do", (package, name, module)
    tables = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
        for room in ROOMS
        for path in sorted((PACKAGE / room).rglob("*.py"))
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and any(name in ast.unparse(node).split("=")[0] for name in ("__all__", "_EXPORTS"))
    ]
    assert tables == [], "the core's modules are private: the lists are llm_do's and the doors' TYPE_CHECKING blocks"


def test_outside_the_core_nothing_imports_a_private_module_of_the_core() -> None:
    """The other rooms, the wiring, the tests, the examples and the benchmarks take a public name from `llm_do` and
    any other from its room's door: a private module of the core (`llm_do.run._runtime`) is the core's alone."""
    root = PACKAGE.parent
    paths = outside_the_core()
    offenders = [
        f"{path.relative_to(root)}:{line} imports {target}"
        for path in sorted(paths)
        for target, _, line in imports_of(path)
        if len(parts := target.split(".")) > 2 and parts[0] == "llm_do" and parts[1] in ROOMS
    ]
    assert offenders == []


def test_the_core_takes_each_name_from_the_module_that_defines_it() -> None:
    """Inside the core, a module imports another room's private module, never a door or `llm_do` (as trio's
    modules do): so a door gives only what is used outside the core."""
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}"
        for path in modules().values()
        if in_the_core(path)
        for target, names, line in imports_of(path)
        if target.removeprefix("llm_do.") in ROOMS
        or (target == "llm_do" and any(f"llm_do.{name}" not in modules() for name in names))
    ]
    assert offenders == []


def test_a_door_gives_only_what_is_used_outside_the_core() -> None:
    """Each name of a door is imported from it outside the core, or is documented at that path (`llm_do.room.Name`
    in docs/): a name nothing outside uses has no place in a door."""
    root = PACKAGE.parent
    paths = outside_the_core()
    used = {(target, name) for path in paths for target, names, _ in imports_of(path) for name in names}
    docs = "\n".join(path.read_text() for path in sorted((root / "docs").glob("*.md")))
    unused = [
        f"llm_do.{room}.{name}"
        for room, door in core_doors().items()
        for name in given_by(door)
        if (f"llm_do.{room}", name) not in used and f"llm_do.{room}.{name}" not in docs
    ]
    assert unused == []
