"""The MCP servers of a project on the command line: `check` starts each once, `list` shows their tools."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..project import Project
from ..project.mcp import ServerProbe, probe_servers

__all__ = ["probe_and_close", "report_failures", "servers_table"]


async def probe_and_close(project: Project) -> list[ServerProbe]:
    """Start each MCP server the project's files declare once, then close the project."""
    try:
        return await probe_servers(project.mcp_specs, project.mcp_servers)
    finally:
        await project.aclose()


def report_failures(err: Console, probes: list[ServerProbe]) -> int:
    """Print the servers that failed to start; how many did."""
    failed = [probe for probe in probes if probe.error is not None]
    for probe in failed:
        err.print(f"[red]MCP server {escape(probe.name)!r} failed[/]: {escape(probe.error or '')}", soft_wrap=True)
    return len(failed)


def servers_table(probes: list[ServerProbe]) -> Table:
    """One row per server: its scope, command or URL, and its tools (read-only ones marked)."""
    table = Table(title="MCP servers", title_justify="left")
    for column in ("server", "scope", "command or url", "tools (ro: annotated readOnlyHint, allowed by default)"):
        table.add_column(column)
    for probe in probes:
        tools = "\n".join(f"{name} (ro)" if read_only else name for name, read_only in probe.tools)
        shown = f"[red]failed to start[/]: {escape((probe.error or '').splitlines()[0])}" if probe.error else tools
        table.add_row(escape(probe.name), probe.scope, escape(probe.target), shown or "-")
    return table
