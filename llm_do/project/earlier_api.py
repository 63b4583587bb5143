"""Uses of the earlier llm-do's Python API in a project module, each with today's replacement (docs/migrating.md).

Found by reading the module's source (no import), so that they are reported even when the module cannot be
imported, which is what an import of the earlier API does today.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

from .._moved import moved_to
from .problems import Problem

__all__ = ["EARLIER_API", "deprecated_imports", "earlier_api_problems"]

_BASE_MODEL = "none: an input model is a plain pydantic BaseModel named by input: in the worker file"
_NO_APPROVAL_TOOLSET = "llm_do.ToolPolicy as a Toolset's default_policy, or a worker's approvals: in its file"

EARLIER_API: dict[str, str] = {
    "CallContext": "llm_do.CallScope (a tool's ctx.deps; scope.call_agent and scope.call_tool call entries)",
    "CallScope": "llm_do.CallScope",
    "AgentArgs": _BASE_MODEL + " (no prompt_messages: the model reads the input as JSON)",
    "WorkerArgs": _BASE_MODEL + " (no prompt_messages: the model reads the input as JSON)",
    "WorkerInput": _BASE_MODEL,
    "PromptInput": _BASE_MODEL,
    "PromptContent": _BASE_MODEL,
    "PromptMessages": _BASE_MODEL,
    "get_display_text": "none: an entry's input is the text or the input model itself",
    "Attachment": "llm_do.Attachment",
    "AgentSpec": "llm_do.AgentEntry, wrapping a pydantic_ai.Agent",
    "AgentEntry": "llm_do.AgentEntry",
    "Entry": "llm_do.Entry",
    "FunctionEntry": "the llm_do.entry decorator (it makes an llm_do.FunctionEntry), on async def f(scope, input)",
    "Runtime": "llm_do.Runtime",
    "ModelType": "none: pass a model name or a pydantic_ai Model",
    "EventCallback": "none: Runtime(event_stream_handler=...) receives pydantic-ai's events; llm_do.CallEvent",
    "RuntimeEvent": "llm_do.CallEvent",
    "ApprovalCallback": "llm_do.Approver",
    "ApprovalRequest": "llm_do.ApprovalRequest",
    "ApprovalDenied": "llm_do.ApprovalDenied",
    "ApprovalDecision": "llm_do.Approval (with llm_do.ApprovalChoice)",
    "ApprovalResult": "llm_do.Approval",
    "ApprovalBlocked": "llm_do.ApprovalUnavailable",
    "ApprovalError": "llm_do.LlmDoError",
    "ApprovalToolset": _NO_APPROVAL_TOOLSET,
    "RunApprovalPolicy": "approval_mode in project.toml, or llm_do.RuntimeConfig(approval_mode=...)",
    "AgentApprovalPolicy": "llm_do.PolicySettings (a worker's approvals:)",
    "resolve_approval_callback": "none: pass an llm_do.Approver to the Runtime",
    "set_toolset_approval_config": _NO_APPROVAL_TOOLSET + " ({pre_approved: true} is allow)",
    "ToolDef": "llm_do.tool on a method of an llm_do.Toolset subclass",
    "ToolsetDef": "llm_do.Toolset",
    "register_model_factory": "llm_do.project.model_factory: register_model_factory(PREFIX, build) becomes a module "
    "attribute, NAME = model_factory(PREFIX, build), or @model_factory(PREFIX) on build; it holds for this project",
    "OpenAICompatibleProvider": "none: a [providers.NAME] table in project.toml with base_url (a model NAME:model is "
    "served there), or pydantic_ai's OpenAIProvider(base_url=...) in a model_factory",
    "resolve_model": "none in llm_do: name the model (provider:name), or pydantic_ai.models.infer_model",
    "ModelInput": "none: a model name or a pydantic_ai Model",
    "NoModelError": "llm_do.ConfigurationError (a worker without a model is a load problem)",
    "ModelCompatibilityError": "llm_do.ConfigurationError",
    "InvalidCompatibleModelsError": "llm_do.ConfigurationError",
    "agent_as_toolset": "none: a worker names another worker in its toolsets",
    "build_host_toolsets": "none: the built-in toolsets are containers.project.ProjectContainer's providers",
    "run_ui": "none: the llm-do run and llm-do chat commands",
    "RunConfig": "none: the llm-do run and llm-do chat commands",
}
"""Names of the earlier llm-do's Python API and what replaces each today."""

_REGISTRIES = {
    "TOOLSETS": "a TOOLSETS mapping of the earlier llm-do is not read today: make each toolset a module-level "
    "object (a FunctionToolset, named by its attribute) or an llm_do.Toolset subclass (fresh per call, "
    "what a build_x(ctx) factory gave)",
    "TOOLS": "a TOOLS list of the earlier llm-do is not read today: put the tools in a toolset (a module-level "
    "FunctionToolset or an llm_do.Toolset subclass) and name it in toolsets",
}


def earlier_api_problems(path: Path) -> list[Problem]:
    """Each import of an earlier llm-do name that today's llm-do lacks, and each TOOLSETS/TOOLS registry,
    in `path` (a Python file), with its line and replacement. A file that cannot be parsed has none here."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8-sig"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return []
    problems: list[Problem] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _ours(node.module):
            module = str(node.module)
            for alias in node.names:
                moved = _moved(module, alias.name) or moved_to(f"{module}.{alias.name}")
                if moved is None and not _exists(module, alias.name):
                    problems.append(Problem(path, node.lineno, _message(module, alias.name)))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _ours(alias.name) and moved_to(alias.name) is None and not _exists(alias.name, None):
                    problems.append(
                        Problem(path, node.lineno, f"import {alias.name}: the earlier llm-do's module; {_NO_MODULE}")
                    )
    for statement in tree.body:
        targets = statement.targets if isinstance(statement, ast.Assign) else []
        for target in targets:
            if isinstance(target, ast.Name) and target.id in _REGISTRIES:
                problems.append(Problem(path, statement.lineno, _REGISTRIES[target.id]))
    return sorted(problems, key=lambda problem: problem.line or 0)


def deprecated_imports(path: Path) -> list[Problem]:
    """Each import in `path` (a Python file) of a path of today's llm-do that moved when the package was arranged in
    rooms (a deprecated alias now, `llm_do._moved`), with its line and the new path. A file that cannot be parsed
    has none here."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8-sig"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return []
    found: list[Problem] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _ours(node.module):
            module = str(node.module)
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                new = _moved(module, alias.name)
                if moved_to(submodule) is not None:  # from llm_do import attachments
                    text = f"{submodule} is deprecated; import from {moved_to(submodule)}"
                elif new is not None:
                    said = f"{module} is deprecated" if moved_to(module) else f"{module} no longer gives {alias.name}"
                    text = f"{said}; import {alias.name} from {new}"
                else:
                    continue
                found.append(Problem(path, node.lineno, f"from {module} import {alias.name}: {text}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                new = moved_to(alias.name)
                if new is not None:
                    text = f"import {alias.name}: {alias.name} is deprecated; import from {new}"
                    found.append(Problem(path, node.lineno, text))
    return sorted(found, key=lambda problem: problem.line or 0)


_NO_MODULE = "today's public API is the llm_do package (docs/migrating.md lists the replacements)"


def _message(module: str, name: str) -> str:
    replacement = EARLIER_API.get(name, f"none: no {name} in today's llm-do; {_NO_MODULE}")
    return f"from {module} import {name}: the earlier llm-do's API; today: {replacement}"


def _moved(module: str, name: str) -> str | None:
    """Where `name` of the old path `module` lives now, when it moved there (`llm_do.runtime` was this package's
    own path too, but the earlier llm-do's `CallContext` is no name of today's `llm_do.run`)."""
    new = moved_to(module, name)
    return new if new is not None and _exists(new, name) else None


def _ours(module: str | None) -> bool:
    return module is not None and (module == "llm_do" or module.startswith("llm_do."))


def _exists(module: str, name: str | None) -> bool:
    """Whether today's llm-do has `module` (and its attribute or submodule `name`)."""
    try:
        if importlib.util.find_spec(module) is None:
            return False
        if name is None or hasattr(importlib.import_module(module), name):
            return True
        return importlib.util.find_spec(f"{module}.{name}") is not None  # a submodule
    except (ImportError, ValueError):
        return False


def names_today(module: str, name: str) -> bool:
    """Whether `from module import name` imports a name of today's llm-do (at that path, or one that moved)."""
    return _moved(module, name) is not None or moved_to(f"{module}.{name}") is not None or _exists(module, name)
