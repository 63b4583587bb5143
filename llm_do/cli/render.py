"""What the command shows: the call tree (live and final), the usage table, the output, the JSON documents.

Per-call usage is each `CallRecord.usage` (failed runs included); the `Board` gives the model each
call asked and, while the run goes, the live tree. Calls are shown depth-first: each call directly
under its parent, children in the order they started.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel
from pydantic_ai.usage import RunUsage
from pydantic_core import to_jsonable_python
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from ..results import CallRecord, usage_json
from .printable import printable
from .watch import Board

__all__ = [
    "console",
    "depth_first",
    "final_tree",
    "json_calls",
    "live_tree",
    "output_text",
    "shown",
    "usage_json",
    "usage_table",
]

_STATUS = {"ok": "[green]ok[/]", "error": "[red]error[/]", "cancelled": "[yellow]cancelled[/]"}
_UNBOUNDED = 1_000_000
"""The width of a console that is not a terminal: wide enough that rich never wraps nor cuts a line."""


def console(*, stderr: bool) -> Console:
    """A console on stdout or stderr: the terminal's width on a terminal, else unbounded (nothing is cut)."""
    terminal = Console(stderr=stderr, highlight=False, soft_wrap=True, emoji=False)
    if terminal.is_terminal:
        return terminal
    return Console(stderr=stderr, highlight=False, soft_wrap=True, emoji=False, width=_UNBOUNDED)


def depth_first(calls: Iterable[CallRecord]) -> list[CallRecord]:
    """The calls with each one's children right below it (in start order), as the tree shows them."""
    records = list(calls)
    ids = {call.id for call in records}
    children: dict[str | None, list[CallRecord]] = {}
    for call in records:
        children.setdefault(call.parent if call.parent in ids else None, []).append(call)
    ordered: list[CallRecord] = []
    stack = list(reversed(children.get(None, [])))
    while stack:
        call = stack.pop()
        ordered.append(call)
        stack.extend(reversed(children.get(call.id, [])))
    return ordered


def final_tree(calls: Iterable[CallRecord], board: Board) -> Tree:
    """Every call of a finished run, children under their parent: entry, depth, model, outcome, tokens."""
    root = Tree("[bold]calls[/]")
    nodes: dict[str | None, Tree] = {None: root}
    for call in depth_first(calls):
        parent = nodes.get(call.parent, root)
        status = _STATUS.get(call.outcome, escape(call.outcome))
        label = _label(call.entry, call.depth, board.model_of(call.id) or "-", status, call.usage)
        if call.attachments:
            label += "  [dim]attached: " + escape(", ".join(info.describe() for info in call.attachments)) + "[/]"
        node = nodes[call.id] = parent.add(label)
        for warning in call.warnings:
            node.add(f"[yellow]warning:[/] {shown(warning)}")
    return root


def live_tree(board: Board) -> Tree:
    """The calls seen so far (from their model requests); the latest to ask is marked."""
    root = Tree("[bold]running[/]")
    nodes: dict[str | None, Tree] = {None: root}
    for call in board.calls.values():
        parent = nodes.get(call.parent, root)
        status = "[cyan]asking the model[/]" if call.id == board.active else "[dim]running[/]"
        nodes[call.id] = parent.add(_label(call.entry, call.depth, call.model, status, call.usage))
    return root


def usage_table(calls: Iterable[CallRecord], total: RunUsage) -> Table:
    """Requests, tool calls and tokens per call (depth-first, indented by depth), and the run's total."""
    table = Table(title="usage", title_justify="left")
    table.add_column("call")
    for name in ("requests", "tool calls", "input tokens", "output tokens"):
        table.add_column(name, justify="right")
    for call in depth_first(calls):
        table.add_row(f"{'  ' * call.depth}{escape(call.entry)}", *_numbers(call.usage))
    table.add_row("[bold]total[/]", *_numbers(total))
    return table


def output_text(output: Any, *, terminal: bool = False) -> str:
    """The output as the command prints it: text as is, a pydantic model or other data as JSON; for a
    `terminal`, with what it would obey rather than show (escape sequences, ...) made visible (`printable`)."""
    if isinstance(output, str):
        text = output
    elif isinstance(output, BaseModel):
        text = output.model_dump_json(indent=2)
    else:
        text = json.dumps(to_jsonable_python(output, fallback=repr), indent=2, ensure_ascii=False)
    return printable(text) if terminal else text


def shown(text: str) -> str:
    """Text from a model, a tool or a server as rich markup that shows it as it is: its markup escaped, and
    what a terminal would obey rather than show (escape sequences, ...) made visible (`printable`)."""
    return escape(printable(text))


def json_calls(calls: Sequence[CallRecord], board: Board) -> list[dict[str, Any]]:
    """The calls as a JSON tree: each with its id, entry, depth, model, outcome, usage and child calls, the
    files it received (`attachments`: name, media type, size, digest) when it received any, what its replies
    looked like (`warnings`) when they were not what they seemed, and the native tools its model ran at its
    provider (`native_tool_calls`: tool, arguments, result) when it ran any."""
    children: dict[str | None, list[dict[str, Any]]] = {}
    ids = {call.id for call in calls}
    for call in depth_first(calls):
        node: dict[str, Any] = {
            "id": call.id,
            "entry": call.entry,
            "depth": call.depth,
            "model": board.model_of(call.id),
            "outcome": call.outcome,
            "usage": usage_json(call.usage),
            "calls": [],
        }
        if call.attachments:
            node["attachments"] = [info.to_json() for info in call.attachments]
        if call.warnings:
            node["warnings"] = list(call.warnings)
        native = board.native_calls(call.id)
        if native:
            node["native_tool_calls"] = [{key: item[key] for key in ("tool", "args", "result")} for item in native]
        children.setdefault(call.parent if call.parent in ids else None, []).append(node)
    for nodes in children.values():
        for node in nodes:
            node["calls"] = children.get(node["id"], [])
    return children.get(None, [])


def _numbers(usage: RunUsage) -> list[str]:
    return [str(n) for n in (usage.requests, usage.tool_calls, usage.input_tokens, usage.output_tokens)]


def _label(entry: str, depth: int, model: str, status: str, usage: RunUsage) -> str:
    tools = f", {usage.tool_calls} tool call{'s' if usage.tool_calls != 1 else ''}" if usage.tool_calls else ""
    if usage.requests:
        tokens = f"{usage.input_tokens} in / {usage.output_tokens} out{tools}"
    else:
        tokens = f"no model requests{tools}"
    return f"[bold]{escape(entry)}[/]  depth {depth}  {escape(model)}  {status}  {tokens}"
