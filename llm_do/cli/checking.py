"""`llm-do check` and `llm-do list`: load a project without running it, and say what is in it or wrong with it.

Workers without a model are fine here (a model can be given when running). `check` checks every
model that is named: a provider pydantic-ai knows, with its package installed, or a replay file
that exists.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic_ai.models import Model
from rich.markup import escape
from rich.table import Table

from .. import AgentEntry, ToolPolicy, Verdict
from ..project import Install, Problem, Project, ProjectError
from ..project.earlier_api import deprecated_imports
from ..project.inputs import default_input_problem
from ..project.mcp import ServerProbe
from ..project.models import model_id
from ..project.native import left_out_native_tools, native_rows
from ..project.strays import raise_with_strays, stray_problems
from . import signals
from .failures import ERROR, OK, classify, problems_json
from .render import console, shown
from .running import command_line_model, load_with_model
from .servers import decisions, grouped, probe_and_close, report_failures, server_of, server_problems, servers_table

__all__ = ["check", "list_project"]

_UNNAMED = ""
"""A tool name no policy names: its verdict is the one of every tool a policy does not name."""


def check(args: argparse.Namespace) -> int:
    """`llm-do check`: every problem of the project (exit 1), or ok with its entries (exit 0). Each MCP
    server the project's files declare is started once; one that fails is a problem (exit 1), and so are
    approvals naming a tool a server does not offer and a worker's servers offering the same tool name. An import
    of a path that moved in llm-do (a deprecated alias) is a warning naming the new path."""
    with _reported(args):
        try:
            project, probes = _load(args)
        except ProjectError as error:
            if not args.json:
                _print_installs(error.to_install)
            raise_with_strays(error, args.project)  # a project that does not load has its stray files too
        unset = sorted(name for name, entry in project.entries.items() if _model_of(entry) == "")
        ungated = _ungated(project, {probe.name: probe for probe in probes if probe.error is None})
        problems = server_problems(project, probes)
        moved: list[Problem] = []
        if project.layout is not None:
            problems.extend(stray_problems(project.layout, project.entries))
            moved = [found for path in project.layout.module_files for found in deprecated_imports(path)]
        wrong_input = default_input_problem(project)
        if wrong_input is not None:
            problems.append(wrong_input)
        failed = [probe.name for probe in probes if probe.error is not None]
        if args.json:
            document: dict[str, Any] = {
                "ok": not (failed or problems),
                "default_entry": project.default_entry,
                "entries": list(project.entries),
            }
            document["without_model"] = unset
            if _file_mode(project) is not None:
                document["approval_mode"] = _file_mode(project)
            if probes:
                document["mcp_servers"] = [dataclasses.asdict(probe) for probe in probes]
            if problems:
                document["problems"] = [_problem_json(problem) for problem in problems]
            if moved:
                document["warnings"] = [_problem_json(found) for found in moved]
            if project.to_install:
                document["to_install"] = installs_json(project.to_install)
            if ungated:
                document["ungated"] = ungated
            document.update(_project_defaults(project))
            print(json.dumps(document, ensure_ascii=False))
            return ERROR if failed or problems else OK
        err = console(stderr=True)
        for found in moved:  # a path that moved in the package: it works, for a while
            err.print(shown(f"warning: {found}"), soft_wrap=True)
        _print_installs(project.to_install)
        if failed or problems:
            report_failures(err, probes)
            for problem in problems:
                err.print(shown(str(problem)), soft_wrap=True)
            count = len(failed) + len(problems)
            servers = f" (MCP server{'s' if len(failed) > 1 else ''} {', '.join(map(repr, failed))} did not start)"
            err.print(escape(f"llm-do: {count} problem{'s' if count != 1 else ''} found{servers if failed else ''}"))
            return ERROR
        names = ", ".join(project.entries) or "none"
        servers = f"; {len(probes)} MCP servers started" if probes else ""
        print(
            f"ok: {len(project.entries)} entries ({names}); default entry: {project.default_entry or 'none'}{servers}"
        )
        for item in ungated:
            used_by = ", ".join(item["entries"])
            print(shown(f"ungated: {item['toolset']}.{item['tool']} ({used_by}) runs without asking: {item['why']}"))
        left_out = left_out_native_tools(project.workers, project.entries, ran=False)
        if left_out is not None:
            err.print(escape(f"note: {left_out}"), soft_wrap=True)
        if unset:
            err.print(escape(f"note: no model for {', '.join(unset)}: give one when running (--model or LLM_DO_MODEL)"))
        defaults = _project_defaults(project)
        if project.layout is not None and project.layout.config_file is not None and defaults:
            named = project.layout.config_file.name
            if "model_settings" in defaults:
                given = ", ".join(f"{key}={value!r}" for key, value in defaults["model_settings"].items())
                err.print(escape(f"note: {named} gives every worker the model settings {given} (its own win)"))
            if "attachments" in defaults:
                files = ", ".join(defaults["attachments"])
                err.print(escape(f"note: {named} hands {files} to each run of {project.default_entry} given no files"))
        mode = _file_mode(project)
        if mode is not None and mode != "prompt" and project.layout is not None and project.layout.config_file:
            err.print(
                escape(
                    f"note: {project.layout.config_file.name} sets approval_mode {mode}: calls that ask are "
                    f"{'approved' if mode == 'approve_all' else 'denied'} without asking anyone; "
                    "LLM_DO_APPROVAL_MODE=prompt asks instead"
                )
            )
        return OK


def installs_json(to_install: Sequence[Install]) -> list[dict[str, Any]]:
    """The packages to install, each with the models that need it and where they are named."""
    grouped: dict[str, list[Install]] = {}
    for install in to_install:
        grouped.setdefault(install.requirement, []).append(install)
    return [
        {
            "requirement": requirement,
            "command": items[0].command,
            "models": [
                {"model": item.model, "file": None if item.file is None else str(item.file), "line": item.line}
                for item in items
            ],
        }
        for requirement, items in grouped.items()
    ]


def _print_installs(to_install: Sequence[Install]) -> None:
    """An `install:` line for each package a model needs: something to install, not a problem of the files."""
    err = console(stderr=True)
    for item in installs_json(to_install):
        models = sorted({model["model"] for model in item["models"]})
        places = ", ".join(
            f"{Path(model['file']).name}:{model['line']}" if model["line"] else Path(model["file"]).name
            for model in item["models"]
            if model["file"] is not None
        )
        named = " and ".join(map(repr, models))
        err.print(shown(f"install: {item['command']} for the model {named} ({places})"), soft_wrap=True)


def _project_defaults(project: Project) -> dict[str, Any]:
    """What the project file gives its runs by default: `model_settings` and `attachments`, when it gives them."""
    defaults: dict[str, Any] = {}
    layout = project.layout
    if layout is not None and layout.model_settings:
        defaults["model_settings"] = dict(layout.model_settings)
    if project.default_attachments:
        defaults["attachments"] = list(project.default_attachments)
    return defaults


def list_project(args: argparse.Namespace) -> int:
    """`llm-do list`: the entries, their kind, model, toolsets and what decides their tools' calls."""
    with _reported(args):
        project, probes = _load(args)
        started = {probe.name: probe for probe in probes if probe.error is None}
        rows = [_row(project, name, started) for name in project.entries]
        if args.json:
            document = {"root": str(project.root), "default_entry": project.default_entry, "entries": rows}
            if probes:
                document["mcp_servers"] = [dataclasses.asdict(probe) for probe in probes]
            print(json.dumps(document, ensure_ascii=False))
            return OK
        title = f"{project.root.name}: default entry {project.default_entry or 'none'}"
        table = Table(title=escape(title), title_justify="left")
        native = any("native_tools" in row for row in rows)
        for column in ("entry", "kind", "model", "toolsets", *(["native tools"] if native else []), "approvals"):
            table.add_column(column)
        for row in rows:
            policies = [f"{toolset}: {policy}" for toolset, policy in row["approvals"].items()]
            policies += [f"{tool['name']}: {tool['approval']}" for tool in row.get("native_tools", ())]
            cells = [row["entry"], row["kind"], row["model"] or "-", ", ".join(row["toolsets"]) or "-"]
            if native:
                cells.append("\n".join(map(_native_cell, row.get("native_tools", ()))) or "-")
            table.add_row(*map(shown, cells), shown("\n".join(policies) or "-"))  # MCP servers name tools
        out = console(stderr=False)
        out.print(table)
        if probes:
            out.print(servers_table(probes))
        return OK


def _file_mode(project: Project) -> str | None:
    """The approval mode the project file set, when it is the one the runtime has (the settings set none)."""
    given = project.layout.approval_mode if project.layout is not None else None
    return given if given is not None and project.runtime.config.approval_mode == given else None


def _load(args: argparse.Namespace) -> tuple[Project, list[ServerProbe]]:
    """The project (closed again) and what starting each of its declared MCP servers once found."""
    model = command_line_model(args.model, args.project)
    installed = args.command == "check"
    project = load_with_model(args.project, model, model, models_required=False, models_installed=installed)
    return project, signals.run(probe_and_close(project))


@contextmanager
def _reported(args: argparse.Namespace) -> Iterator[None]:
    """With `--json`, a failure is a JSON document on stdout too (its problems, kind and exit code)."""
    try:
        yield
    except (Exception, KeyboardInterrupt) as error:
        if args.json:
            failure = classify(error)
            document = {
                "ok": False,
                "error": failure.message,
                "kind": failure.kind,
                "exit_code": failure.code,
                "problems": problems_json(error),
            }
            to_install = getattr(error, "to_install", ())
            if to_install:
                document["to_install"] = installs_json(to_install)
            print(json.dumps(document, ensure_ascii=False), flush=True)
        raise


def _model_of(entry: Any) -> str | None:
    """The entry's model name; "" for a worker without one; None for an entry that asks no model."""
    if not isinstance(entry, AgentEntry):
        return None
    model = entry.agent.model
    return model_id(model) if isinstance(model, Model | str) else ""


def _row(project: Project, name: str, started: Mapping[str, ServerProbe]) -> dict[str, Any]:
    entry = project.entries[name]
    kind = "worker" if name in project.workers else "agent" if isinstance(entry, AgentEntry) else "function"
    approvals: dict[str, str] = {}
    decided: dict[str, dict[str, str]] = {}
    reasons: dict[str, dict[str, str]] = {}
    for toolset in project.runtime.toolsets_of(name):
        server = server_of(project, toolset)
        probe = started.get(server) if server is not None else None
        verdicts = None if server is not None else _tool_verdicts(project, toolset)
        if probe is not None:
            decided[toolset] = decisions(project, toolset, probe)
            approvals[toolset] = grouped(decided[toolset]) + _rule(project.runtime.policy(toolset))
        elif verdicts is not None and not project.runtime.declares_policy(toolset):
            decided[toolset] = {tool: verdict.decision for tool, verdict in verdicts.items()}
            reasons[toolset] = {tool: verdict.reason or verdict.decision for tool, verdict in verdicts.items()}
            approvals[toolset] = _by_tool(verdicts)
        else:
            approvals[toolset] = _policy(project, toolset, mcp=server is not None)
    row: dict[str, Any] = {"entry": name, "kind": kind, "model": _model_of(entry) or None}
    row["toolsets"] = list(project.runtime.toolsets_of(name))
    row["approvals"] = approvals
    if decided:
        row["decisions"] = decided
    if reasons:
        row["reasons"] = reasons
    row["description"] = entry.description
    if name in project.workers and project.workers[name].native_tools:
        row["native_tools"] = native_rows(project.workers[name].native_tools)
    return row


def _native_cell(tool: dict[str, Any]) -> str:
    options = ", ".join(f"{key} {value}" for key, value in tool["options"].items())
    return f"{tool['name']} ({options})" if options else str(tool["name"])


def _policy(project: Project, toolset: str, *, mcp: bool) -> str:
    """What decides the calls to a toolset whose tools are not known here (an MCP server that did not start)."""
    runtime = project.runtime
    policy = runtime.policy(toolset)
    other = runtime.verdict(toolset, _UNNAMED, annotations={} if mcp else None).decision
    read_only = runtime.verdict(toolset, _UNNAMED, annotations={"readOnlyHint": True} if mcp else None).decision
    if read_only != other:
        parts = [f"by its tools' MCP annotations (readOnlyHint {read_only}, others {other})"]
    else:
        parts = [f"default {other}"]
    parts.extend(f"{tool} {decision}" for tool, decision in policy.tools.items())
    if policy.attachments is not None:
        parts.append(f"with attachments {policy.attachments}")
    return ", ".join(parts) + _rule(policy)


def _tool_verdicts(project: Project, toolset: str) -> dict[str, Verdict] | None:
    """Each tool's verdict before any rule, when the toolset's tools are known at load: a `Toolset` class, a
    `FunctionToolset`, an entry (also under the name a worker's `approvals:` give it, `worker@caller`)."""
    runtime = project.runtime
    verdicts = runtime.tool_verdicts(toolset)
    base = project.declared_toolset(toolset)
    if verdicts is None and base != toolset and base in project.entries:
        verdicts = {base: runtime.verdict(toolset, base, agent=True)}
    return verdicts


def _by_tool(verdicts: Mapping[str, Verdict]) -> str:
    """`allow read, find (read-only); ask write (not declared read-only)`: each tool by its decision and what
    gave it."""
    groups: dict[tuple[str, str], list[str]] = {}
    for tool, verdict in verdicts.items():
        groups.setdefault((verdict.decision, _decided_by(verdict.reason or "")), []).append(tool)
    return "; ".join(f"{decision} {', '.join(tools)} ({by})" for (decision, by), tools in groups.items()) or "no tools"


def _decided_by(reason: str) -> str:
    """What a verdict's reason says decided it, in a few words."""
    for says, by in _DECIDED_BY:
        if says in reason:
            return by
    return "policy"


_DECIDED_BY = (
    ("requires_approval=True", "requires_approval"),
    ("is declared read-only", "read-only"),
    ("is an agent", "agent"),
    ("is not declared read-only", "not declared read-only"),
)


def _ungated(project: Project, started: Mapping[str, ServerProbe]) -> list[dict[str, Any]]:
    """Every tool a call runs without asking anyone (its verdict is `allow` and no rule can change that), with the
    entries using it and why; native tools too, which no policy reaches."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    runtime = project.runtime
    for name in project.entries:
        for toolset in runtime.toolsets_of(name):
            server = server_of(project, toolset)
            probe = started.get(server) if server is not None else None
            if runtime.policy(toolset).rule is not None and runtime.declares_policy(toolset):
                continue  # a rule sees each call's arguments: it may ask
            if probe is not None:
                verdicts = {
                    tool.name: runtime.verdict(toolset, tool.name, annotations=tool.annotations) for tool in probe.tools
                }
            elif server is None:
                verdicts = _tool_verdicts(project, toolset) or {}
                if not verdicts and (default := runtime.verdict(toolset, "*")).decision == "allow":
                    verdicts = {"*": default}  # its tools are known once it is built: every one of them
            else:
                verdicts = {}
            shown = project.declared_toolset(toolset)
            for tool, verdict in verdicts.items():
                if verdict.decision == "allow":
                    item = found.setdefault(
                        (shown, tool), {"toolset": shown, "tool": tool, "entries": [], "why": verdict.reason}
                    )
                    item["entries"].append(name)
        worker = project.workers.get(name)
        for tool in worker.native_tools if worker is not None else ():
            item = found.setdefault(
                (tool, tool), {"toolset": tool, "tool": tool, "entries": [], "why": "a native tool: " + _NATIVE}
            )
            item["entries"].append(name)
    return list(found.values())


_NATIVE = "it runs at the model's provider, where no approval policy reaches"


def _rule(policy: ToolPolicy) -> str:
    return ", and a rule that may ask or deny" if policy.rule is not None else ""


def _problem_json(problem: Problem) -> dict[str, Any]:
    return {
        "file": None if problem.file is None else str(problem.file),
        "line": problem.line,
        "message": problem.message,
    }
