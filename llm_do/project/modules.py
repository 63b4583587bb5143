"""Import a project's Python files under a package of their own and collect what they export:
toolsets, `@entry` functions and at most one container class."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import itertools
import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from dependency_injector import containers
from pydantic_ai.toolsets import AbstractToolset

from .. import FunctionEntry, Scope, ToolsetSpec
from .earlier_api import earlier_api_problems
from .models import ModelFactory
from .problems import Problem

__all__ = ["ProjectModules", "load_modules", "toolset_name"]

_counter = itertools.count(1)


@dataclass
class ProjectModules:
    """The imported modules of one project and their exports, each with the file that exported it."""

    root: Path
    package: str
    modules: dict[Path, ModuleType] = field(default_factory=dict)
    toolsets: dict[str, tuple[ToolsetSpec, Path]] = field(default_factory=dict)
    entries: dict[str, tuple[FunctionEntry, Path]] = field(default_factory=dict)
    container: tuple[type[containers.DeclarativeContainer], Path] | None = None
    model_factories: dict[str, tuple[ModelFactory, Path]] = field(default_factory=dict)
    """The model factories the modules declare (`model_factory`), by prefix, each with its file."""
    unbuildable: dict[str, str] = field(default_factory=dict)
    """Toolset classes that need arguments, so are not project toolsets (a container may use them): why."""
    problems: list[Problem] = field(default_factory=list)
    failed: list[Path] = field(default_factory=list)
    """Files that could not be imported (their toolsets and entries are unknown)."""

    def resolve(self, reference: str) -> Any:
        """The object a `module:Name` or `path.py:Name` reference names. Raises `LookupError` saying why.

        `module` is a project module (by its file name without `.py`) or any importable module;
        `path.py` is relative to the project directory and imported like a project module.
        """
        where, _, attribute = reference.rpartition(":")
        if where.endswith(".py"):
            path = (self.root / where).resolve()
            module = self.modules.get(path)
            if module is None:
                if not path.is_file():
                    raise LookupError(f"{where} is not a file under {self.root}")
                module = self.import_file(path)
        else:
            local = (self.root / f"{where.replace('.', '/')}.py").resolve()
            if local.is_file():
                module = self.modules.get(local) or self.import_file(local)
            else:
                try:
                    module = importlib.import_module(where)
                except ImportError as error:
                    raise LookupError(f"module {where!r} cannot be imported ({error})") from None
        try:
            return getattr(module, attribute)
        except AttributeError:
            raise LookupError(f"{where} has no attribute {attribute!r}") from None

    def import_file(self, path: Path) -> ModuleType:
        """Import a file under the project directory as a module of the project's package."""
        relative = path.relative_to(self.root).with_suffix("")
        name = ".".join((self.package, *relative.parts))
        parent = self.package
        for part in relative.parts[:-1]:  # folders become namespace packages of the project's package
            parent = f"{parent}.{part}"
            if parent not in sys.modules:
                package = ModuleType(parent)
                package.__path__ = [str(self.root.joinpath(*parent.split(".")[1:]))]
                sys.modules[parent] = package
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        self.modules[path] = module
        return module


def load_modules(root: Path, files: tuple[Path, ...]) -> ProjectModules:
    """Import `files` as modules of a fresh package (so `tools.py` never shadows another `tools`) and
    collect their exports; import failures and conflicts are listed in `problems`, never raised."""
    package_name = f"llm_do_project_{next(_counter)}_{_slug(root.name)}"
    package = ModuleType(package_name, f"the llm-do project at {root}")
    package.__path__ = [str(root)]  # relative imports between project modules work
    sys.modules[package_name] = package
    found = ProjectModules(root=root, package=package_name)
    for path in files:
        path = path.resolve()
        earlier = earlier_api_problems(path)
        found.problems.extend(earlier)
        try:
            module = found.modules.get(path) or found.import_file(path)
        except Exception as error:
            found.failed.append(path)
            if not (earlier and _earlier_import(error)):  # else the lines above say what to import instead
                found.problems.append(Problem(path, _error_line(error, path), _import_failed(error)))
            continue
        _collect(found, module, path)
    return found


def _earlier_import(error: Exception) -> bool:
    """Whether `error` is an import of llm-do's that fails (an earlier API name or module)."""
    name = getattr(error, "name", None) or ""
    return isinstance(error, ImportError) and (name == "llm_do" or name.startswith("llm_do."))


def toolset_name(cls: type) -> str:
    """The toolset name of a toolset class: its `name` class attribute, else its snake_case class name
    without a `Toolset` suffix (`WebSearchToolset` -> `web_search`)."""
    declared = cls.__dict__.get("name")
    if isinstance(declared, str):
        return declared
    base = cls.__name__.removesuffix("Toolset") or cls.__name__
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", base).lower()


def _collect(found: ProjectModules, module: ModuleType, path: Path) -> None:
    for attribute, value in vars(module).items():
        if attribute.startswith("_"):
            continue
        own = getattr(value, "__module__", None) == module.__name__
        if isinstance(value, type) and issubclass(value, AbstractToolset):
            if own and not inspect.isabstract(value):
                _add_class(found, value, path)
        elif isinstance(value, AbstractToolset):
            spec = ToolsetSpec(_constant(value), Scope.GLOBAL, value)
            _add(found, "toolset", attribute, (spec, path), found.toolsets, same=value)
        elif isinstance(value, FunctionEntry):
            _add(found, "entry", value.name, (value, path), found.entries, same=value)
        elif isinstance(value, ModelFactory):
            _add(found, "model factory of prefix", value.prefix, (value, path), found.model_factories, same=value)
        elif isinstance(value, type) and issubclass(value, containers.DeclarativeContainer) and own:
            if found.container is not None and found.container[0] is not value:
                other, where = found.container
                found.problems.append(
                    Problem(
                        path,
                        _line_of_class(value),
                        f"a second container class {value.__name__!r} (the first is {other.__name__!r} in "
                        f"{where.name}); a project has at most one container: merge them into one",
                    )
                )
            else:
                found.container = (value, path)


def _add_class(found: ProjectModules, cls: type[AbstractToolset[Any]], path: Path) -> None:
    required = [
        parameter.name
        for parameter in inspect.signature(cls).parameters.values()
        if parameter.default is parameter.empty
        and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    ]
    if required:
        found.unbuildable[toolset_name(cls)] = (
            f"the toolset class {cls.__name__} in {path.name} needs arguments ({', '.join(required)}) and a project "
            "toolset class is built with none: give them defaults, or declare a provider of the project's container"
        )
        return
    _add(found, "toolset", toolset_name(cls), (ToolsetSpec(cls, Scope.PER_CALL, cls), path), found.toolsets, same=cls)


def _add(found: ProjectModules, kind: str, name: str, item: Any, into: dict[str, Any], *, same: Any) -> None:
    existing = into.get(name)
    if existing is None:
        into[name] = item
        return
    spec_or_entry, where = existing
    if (spec_or_entry.provides if isinstance(spec_or_entry, ToolsetSpec) else spec_or_entry) is same:
        return  # the same object, imported by another project module
    if isinstance(same, ModelFactory):
        line = factory_line(same)
        message = f"a second model factory of prefix {name!r} (the first is in {where.name}); keep one"
        found.problems.append(Problem(item[1], line, message))
        return
    found.problems.append(
        Problem(item[1], None, f"a second {kind} named {name!r} (the first is in {where.name}); rename one")
    )


def _constant(value: Any) -> Callable[[], Any]:
    return lambda: value


def _slug(text: str) -> str:
    return re.sub(r"\W", "_", text)[:40] or "root"


def _import_failed(error: Exception) -> str:
    return (
        f"importing this module failed: {type(error).__name__}: {error}; fix the module or leave it out of the project"
    )


def _error_line(error: Exception, path: Path) -> int | None:
    if isinstance(error, SyntaxError) and error.filename and Path(error.filename).resolve() == path:
        return error.lineno
    lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__) if Path(frame.filename) == path]
    return lines[-1] if lines else None


def factory_line(factory: ModelFactory) -> int | None:
    """The line of a model factory's function (its decorator's, when decorated), when it can be found."""
    try:
        return inspect.getsourcelines(factory.build)[1]
    except (OSError, TypeError):
        return None


def _line_of_class(cls: type) -> int | None:
    try:
        return inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        return None
