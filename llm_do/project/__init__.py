"""Agent projects: `.worker` files, Python modules and a container, loaded into a ready `Runtime`.

See docs/projects.md. `load_project(path)` is the entry point; the rest is for tools built on it. `.worker` files
are read with PyYAML, which the `cli` extra installs (`pip install "llm-do[cli]"`): without it, importing this
package raises `ModuleNotFoundError` saying so.

May import: errors, scopes, files, approvals, guards, di, results, toolkit, sessions, mcp, run, models.
"""

from importlib import import_module

from ..errors import extra_missing

try:
    import_module("yaml")
except ModuleNotFoundError as error:
    raise extra_missing("cli", "llm_do.project (.worker files are YAML)", error.name or "yaml") from None

from .build import DEFAULT_CONTAINER, ModelNameError, Project, load_project
from .layout import CONFIG_FILE, EARLIER_CONFIG_FILE, ProjectLayout, discover_project, survey_project
from .models import (
    DeferredModel,
    MissingApiKey,
    ModelFactory,
    missing_package,
    model_factory,
    model_problem,
    resolve_model,
)
from .modules import ProjectModules, load_modules, toolset_name
from .problems import Install, Problem, ProjectError
from .settings import ProjectSettings
from .worker import FIELDS, WorkerSpec, check_worker, check_worker_file, parse_worker, read_worker

__all__ = [
    "CONFIG_FILE",
    "DEFAULT_CONTAINER",
    "EARLIER_CONFIG_FILE",
    "FIELDS",
    "Install",
    "DeferredModel",
    "MissingApiKey",
    "ModelFactory",
    "ModelNameError",
    "Problem",
    "Project",
    "ProjectError",
    "ProjectLayout",
    "ProjectModules",
    "ProjectSettings",
    "WorkerSpec",
    "check_worker",
    "check_worker_file",
    "discover_project",
    "load_modules",
    "load_project",
    "missing_package",
    "model_factory",
    "model_problem",
    "parse_worker",
    "read_worker",
    "resolve_model",
    "survey_project",
    "toolset_name",
]
