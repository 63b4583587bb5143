"""Import paths that moved when the package was arranged in rooms, kept for a while as deprecated aliases.

An old module (`llm_do.attachments`, ...) has no file: importing it makes a module (`MovedFinder`, on
`sys.meta_path` once `llm_do` is imported) whose `__getattr__` is `moved_name`: a name is looked up where it lives
now and, the first time, a `DeprecationWarning` names that path. Two old paths are rooms
today (`llm_do.run`, `llm_do.scopes`): their doors (`_lazy.lazy_imports`) find the old names here too. A public name
(one `llm_do` gives) lives in `llm_do` alone: asked of a room of the core, or of an old path that moved to one, it is
found there, with the same warning.
docs/migrating.md lists them; `llm-do check` warns about each import of one in a project's modules.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from importlib import import_module
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

__all__ = ["CORE", "MOVED", "MOVED_NAMES", "MovedFinder", "moved_name", "moved_to"]

MOVED: dict[str, str] = {
    "llm_do.approval": "llm_do.approvals",
    "llm_do.attachments": "llm_do.files",
    "llm_do.call": "llm_do.run",
    "llm_do.children": "llm_do.process.children",
    "llm_do.dsn": "llm_do.errors",
    "llm_do.entries": "llm_do.run",
    "llm_do.gate": "llm_do.run",
    "llm_do.handles": "llm_do.toolkit",
    "llm_do.history": "llm_do.sessions",
    "llm_do.history.postgres": "llm_do.sessions",
    "llm_do.history_postgres": "llm_do.sessions",
    "llm_do.lending": "llm_do.run",
    "llm_do.lifecycle": "llm_do.scopes",
    "llm_do.live": "llm_do.run",
    "llm_do.loading": "llm_do.run",
    "llm_do.mcp_roots": "llm_do.mcp.roots",
    "llm_do.owned": "llm_do.run",
    "llm_do.owner": "llm_do.scopes",
    "llm_do.policy": "llm_do.approvals",
    "llm_do.relay": "llm_do.web.relay",
    "llm_do.runlocal": "llm_do.di",
    "llm_do.runscope": "llm_do.run",
    "llm_do.runtime": "llm_do.run",
    "llm_do.session": "llm_do.sessions",
    "llm_do.settings": "llm_do.di",
    "llm_do.signals": "llm_do.process.signals",
    "llm_do.toolset": "llm_do.toolkit",
    "llm_do.toolsets.confine": "llm_do.files",
    "llm_do.traced": "llm_do.tracing.observer",
    "llm_do.tracking": "llm_do.scopes",
}
"""Each old module, a deprecated alias now, and the module its names moved to (unless `MOVED_NAMES` says other)."""

_RESULTS = ("CallRecord", "LogEntry", "RunReport", "RunResult", "RunState", "attach_report", "finished_report")
MOVED_NAMES: dict[str, str] = {
    **{f"llm_do.run.{name}": "llm_do.results" for name in (*_RESULTS, "outcome_of", "run_report", "usage_json")},
    "llm_do.scopes.ToolsetSpec": "llm_do",
    **{f"llm_do.settings.{name}": "llm_do.approvals" for name in ("ApprovalMode", "ApprovalOnDeny")},
    "llm_do.settings.AttachmentSettings": "llm_do",
    "llm_do.settings.FilesystemSettings": "llm_do.files",
    "llm_do.loading.CapturablePerRunWarning": "llm_do",
}
"""`module.name` -> where the name lives now, for the names that did not go where the rest of their module went,
and the old names of the two old modules that are rooms today (`llm_do.run` was `results`, `llm_do.scopes` gave the
specs)."""


CORE = tuple(
    f"llm_do.{room}" for room in ("scopes", "di", "approvals", "files", "guards", "toolkit", "sessions", "run")
)
"""The rooms of the core: their modules are private, and their doors give only what `llm_do` does not."""


def moved_to(module: str, name: str | None = None) -> str | None:
    """Where `name` of the old module `module` (the module itself, when `name` is None) lives now; None when it
    did not move from there. A public name asked of a room of the core (or of an old path that moved to one) lives
    in `llm_do`."""
    new = MOVED_NAMES.get(f"{module}.{name}") or MOVED.get(module)
    if name is not None and (new or module) in CORE and name in import_module("llm_do").__all__:
        return "llm_do"
    return new


def moved_name(module: str, name: str, namespace: dict[str, Any]) -> Any:
    """`name` of the old module `module`, from where it lives now, kept in `namespace` (the old module's globals) so
    that the `DeprecationWarning` naming the new path is given once. Raises `AttributeError` when it did not move."""
    new = moved_to(module, name)
    if new is None or name.startswith("__"):
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    try:
        value = getattr(import_module(new), name)
    except AttributeError:
        raise AttributeError(f"{module} moved to {new}, which has no {name!r}: see docs/migrating.md") from None
    removed = module in MOVED or f"{module}.{name}" in MOVED_NAMES
    gone = f"{module} will be removed" if removed else f"{module} will stop giving it"
    warnings.warn(
        f"{module}.{name} is deprecated: import {name} from {new} ({gone})",
        DeprecationWarning,
        stacklevel=3,
    )
    namespace[name] = value
    return value


class MovedFinder(MetaPathFinder, Loader):
    """Finds each old path of `MOVED` (a module without a file) and makes it a module whose names are found where
    they moved (`moved_name`); an old package (`llm_do.history`) is one, so its old modules import too."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in MOVED:
            return None
        package = any(old.startswith(f"{fullname}.") for old in MOVED)
        return ModuleSpec(fullname, self, is_package=package)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return None  # the default module

    def exec_module(self, module: ModuleType) -> None:
        name = module.__name__
        module.__doc__ = f"Deprecated: `{name}` moved to `{MOVED[name]}`; import its names from there."
        namespace = vars(module)

        def __getattr__(attribute: str) -> Any:
            return moved_name(name, attribute, namespace)

        namespace["__getattr__"] = __getattr__


def install() -> None:
    """Put `MovedFinder` on `sys.meta_path` (after the finders of files), once."""
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedFinder())
