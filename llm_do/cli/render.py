"""What the command shows: the call tree (live and final), the usage table, the output, the JSON document."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel
from pydantic_ai.usage import RunUsage
from pydantic_core import to_jsonable_python
from rich.table import Table
from rich.tree import Tree

from ..run import CallRecord, RunResult
from .watch import Board

__all__ = ["final_tree", "json_document", "live_tree", "output_text", "usage_table"]

_STATUS = {"ok": "[green]ok[/]", "error": "[red]error[/]", "cancelled": "[yellow]cancelled[/]"}


def final_tree(calls: Iterable[CallRecord], models: Mapping[str, str]) -> Tree:
    """Every call of a finished run, children under their parent: entry, depth, model, outcome, tokens."""
    root = Tree("[bold]calls[/]")
    nodes: dict[str | None, Tree] = {None: root}
    for call in calls:  # in start order, so a parent comes before its children
        parent = nodes.get(call.parent, root)
        label = _label(
            call.entry, call.depth, models.get(call.id, "-"), _STATUS.get(call.outcome, call.outcome), call.usage
        )
        nodes[call.id] = parent.add(label)
    return root


def live_tree(board: Board) -> Tree:
    """The calls seen so far (from their model requests); the latest to ask is marked."""
    root = Tree("[bold]running[/]")
    nodes: dict[str | None, Tree] = {None: root}
    for call in board.calls.values():
        parent = nodes.get(call.parent, root)
        status = "[cyan]asking the model[/]" if call.id == board.active else "[dim]running[/]"
        usage = RunUsage(requests=call.requests, input_tokens=call.input_tokens, output_tokens=call.output_tokens)
        nodes[call.id] = parent.add(_label(call.entry, call.depth, call.model, status, usage))
    return root


def usage_table(calls: Iterable[CallRecord], total: RunUsage) -> Table:
    """Requests and tokens per call, and the run's total (which also counts failed agent runs)."""
    table = Table(title="usage", title_justify="left")
    table.add_column("call")
    for name in ("requests", "input tokens", "output tokens"):
        table.add_column(name, justify="right")
    for call in calls:
        usage = call.usage
        indent = "  " * call.depth
        row = (usage.requests, usage.input_tokens, usage.output_tokens)
        table.add_row(f"{indent}{call.entry}", *map(str, row))
    table.add_row("[bold]total[/]", *map(str, (total.requests, total.input_tokens, total.output_tokens)))
    return table


def output_text(output: Any) -> str:
    """The output as the command prints it: text as is, a pydantic model or other data as JSON."""
    if isinstance(output, str):
        return output
    if isinstance(output, BaseModel):
        return output.model_dump_json(indent=2)
    return json.dumps(to_jsonable_python(output, fallback=repr), indent=2, ensure_ascii=False)


def json_document(result: RunResult, models: Mapping[str, str]) -> dict[str, Any]:
    """What `--json` prints: the output, the total usage and the calls as a tree."""
    children: dict[str | None, list[dict[str, Any]]] = {}
    for call in result.calls:
        node: dict[str, Any] = {
            "id": call.id,
            "entry": call.entry,
            "depth": call.depth,
            "model": models.get(call.id),
            "outcome": call.outcome,
            "usage": _usage(call.usage),
            "calls": [],
        }
        children.setdefault(call.parent, []).append(node)
    for nodes in children.values():
        for node in nodes:
            node["calls"] = children.get(node["id"], [])
    return {
        "output": to_jsonable_python(result.output, fallback=repr),
        "usage": _usage(result.usage),
        "calls": children.get(None, []),
    }


def _usage(usage: RunUsage) -> dict[str, int]:
    return {
        "requests": usage.requests,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "tool_calls": usage.tool_calls,
    }


def _label(entry: str, depth: int, model: str, status: str, usage: RunUsage) -> str:
    tokens = f"{usage.input_tokens} in / {usage.output_tokens} out" if usage.requests else "no model requests"
    return f"[bold]{entry}[/]  depth {depth}  {model}  {status}  {tokens}"
