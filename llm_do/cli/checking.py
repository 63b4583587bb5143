"""`llm-do check` and `llm-do list`: load a project without running it, and say what is in it or wrong with it.

Workers without a model are fine here (a model can be given when running). `check` checks every
model that is named: a provider pydantic-ai knows, with its package installed, or a replay file
that exists.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pydantic_ai.models import Model
from rich.markup import escape
from rich.table import Table

from ..entries import AgentEntry
from ..policy import ToolPolicy
from ..project import Project, load_project
from ..project.mcp import ServerProbe
from ..project.models import model_id
from . import signals
from .failures import ERROR, OK, classify, problems_json
from .render import console
from .running import command_line_model
from .servers import probe_and_close, report_failures, servers_table

__all__ = ["check", "list_project"]


def check(args: argparse.Namespace) -> int:
    """`llm-do check`: every problem of the project (exit 1), or ok with its entries (exit 0). Each MCP
    server the project's files declare is started once; one that fails is a problem (exit 1)."""
    with _reported(args):
        project, probes = _load(args)
        unset = sorted(name for name, entry in project.entries.items() if _model_of(entry) == "")
        failed = any(probe.error is not None for probe in probes)
        if args.json:
            document: dict[str, Any] = {
                "ok": not failed,
                "default_entry": project.default_entry,
                "entries": list(project.entries),
            }
            document["without_model"] = unset
            if probes:
                document["mcp_servers"] = [dataclasses.asdict(probe) for probe in probes]
            print(json.dumps(document, ensure_ascii=False))
            return ERROR if failed else OK
        if report_failures(console(stderr=True), probes):
            return ERROR
        names = ", ".join(project.entries) or "none"
        servers = f"; {len(probes)} MCP servers started" if probes else ""
        print(
            f"ok: {len(project.entries)} entries ({names}); default entry: {project.default_entry or 'none'}{servers}"
        )
        if unset:
            err = console(stderr=True)
            err.print(escape(f"note: no model for {', '.join(unset)}: give one when running (--model or LLM_DO_MODEL)"))
        return OK


def list_project(args: argparse.Namespace) -> int:
    """`llm-do list`: the entries, their kind, model, toolsets and approval policies."""
    with _reported(args):
        project, probes = _load(args)
        rows = [_row(project, name) for name in project.entries]
        if args.json:
            document = {"root": str(project.root), "default_entry": project.default_entry, "entries": rows}
            if probes:
                document["mcp_servers"] = [dataclasses.asdict(probe) for probe in probes]
            print(json.dumps(document, ensure_ascii=False))
            return OK
        title = f"{project.root.name}: default entry {project.default_entry or 'none'}"
        table = Table(title=escape(title), title_justify="left")
        for column in ("entry", "kind", "model", "toolsets", "approvals"):
            table.add_column(column)
        for row in rows:
            policies = "\n".join(f"{toolset}: {policy}" for toolset, policy in row["approvals"].items())
            table.add_row(
                *map(escape, (row["entry"], row["kind"], row["model"] or "-", ", ".join(row["toolsets"]) or "-")),
                escape(policies or "-"),
            )
        out = console(stderr=False)
        out.print(table)
        if probes:
            out.print(servers_table(probes))
        return OK


def _load(args: argparse.Namespace) -> tuple[Project, list[ServerProbe]]:
    """The project (closed again) and what starting each of its declared MCP servers once found."""
    model = command_line_model(args.model)
    project = load_project(args.project, model=model, models_required=False, models_installed=args.command == "check")
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
            print(json.dumps(document, ensure_ascii=False), flush=True)
        raise


def _model_of(entry: Any) -> str | None:
    """The entry's model name; "" for a worker without one; None for an entry that asks no model."""
    if not isinstance(entry, AgentEntry):
        return None
    model = entry.agent.model
    return model_id(model) if isinstance(model, Model | str) else ""


def _row(project: Project, name: str) -> dict[str, Any]:
    entry = project.entries[name]
    kind = "worker" if name in project.workers else "agent" if isinstance(entry, AgentEntry) else "function"
    return {
        "entry": name,
        "kind": kind,
        "model": _model_of(entry) or None,
        "toolsets": list(entry.toolsets),
        "approvals": {toolset: _policy(project, toolset) for toolset in entry.toolsets},
        "description": entry.description,
    }


def _policy(project: Project, toolset: str) -> str:
    policy = project.runtime.policy(toolset)
    if toolset in project.mcp_servers and policy == ToolPolicy():
        return "from its tools' MCP annotations (readOnlyHint allow, others ask)"
    parts = [f"default {policy.default}"] + [f"{tool} {decision}" for tool, decision in policy.tools.items()]
    if policy.rule is not None:
        parts.append("a rule")
    return ", ".join(parts)
