"""The MCP servers of a project on the command line: `check` starts each once and reports what cannot work,
`list` shows their tools and what decides each call to them."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..project import Problem, Project
from ..project.mcp import ServerProbe, probe_servers
from .render import shown

__all__ = [
    "decisions",
    "grouped",
    "probe_and_close",
    "report_failures",
    "server_of",
    "server_problems",
    "servers_table",
]

_DECISIONS = ("allow", "ask", "deny")


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
        err.print(f"[red]MCP server {escape(probe.name)!r} failed[/]: {shown(probe.error or '')}", soft_wrap=True)
    return len(failed)


def servers_table(probes: list[ServerProbe]) -> Table:
    """One row per server: its scope, command or URL, and its tools (read-only ones marked)."""
    table = Table(title="MCP servers", title_justify="left")
    for column in ("server", "scope", "command or url", "tools (ro: annotated readOnlyHint)"):
        table.add_column(column)
    for probe in probes:
        tools = "\n".join(shown(f"{tool.name} (ro)" if tool.read_only else tool.name) for tool in probe.tools)
        cell = f"[red]failed to start[/]: {shown((probe.error or '').splitlines()[0])}" if probe.error else tools
        table.add_row(escape(probe.name), probe.scope, escape(probe.target), cell or "-")
    return table


def server_of(project: Project, toolset: str) -> str | None:
    """The MCP server a toolset name of an entry stands for: the server's own, or `SERVER@worker` (the name a
    worker's `approvals:` give it); None for other toolsets."""
    name = project.declared_toolset(toolset)
    return name if name in project.mcp_servers else None


def decisions(project: Project, toolset: str, probe: ServerProbe) -> dict[str, str]:
    """What decides a call to each tool of a started server under toolset name `toolset`, before any rule."""
    runtime = project.runtime
    return {
        tool.name: runtime.verdict(toolset, tool.name, annotations=tool.annotations).decision for tool in probe.tools
    }


def grouped(found: Mapping[str, str]) -> str:
    """`allow a, b; ask c; deny d`."""
    groups = {decision: [tool for tool, made in found.items() if made == decision] for decision in _DECISIONS}
    return "; ".join(f"{decision} {', '.join(tools)}" for decision, tools in groups.items() if tools) or "no tools"


def server_problems(project: Project, probes: list[ServerProbe]) -> list[Problem]:
    """What cannot work with the servers that started: approvals naming a tool the server does not offer, and
    two servers of one worker offering the same tool name (pydantic-ai refuses that run)."""
    started = {probe.name: probe for probe in probes if probe.error is None}
    return [*_unknown_tools(project, started), *_shared_tools(project, started)]


def _unknown_tools(project: Project, started: Mapping[str, ServerProbe]) -> Iterator[Problem]:
    for name, probe in started.items():
        offered = [tool.name for tool in probe.tools]
        for tool in project.runtime.policy(name).tools:
            if tool not in offered:
                yield Problem(
                    None,
                    None,
                    f"the approval policy of toolset {name!r} (the container's approval_policies or "
                    f"LLM_DO_APPROVAL_POLICIES) names tool {tool!r}, which MCP server {name!r} does not offer "
                    f"({_hint(probe, tool, offered)}); fix the tool name",
                )
    for worker in project.workers.values():
        for toolset, override in worker.approvals.items():
            server = started.get(toolset)
            if server is None:
                continue
            offered = [tool.name for tool in server.tools]
            for tool in override.tools:
                if tool not in offered:
                    yield worker.problem(
                        f"approvals for toolset {toolset!r} name tool {tool!r}, which MCP server {toolset!r} does "
                        f"not offer ({_hint(server, tool, offered)}); fix the tool name",
                        "approvals",
                        toolset,
                        "tools",
                        tool,
                    )


def _hint(probe: ServerProbe, tool: str, offered: list[str]) -> str:
    prefix = probe.tool_prefix
    if prefix and f"{prefix}_{tool}" in offered:
        return f"its tools are named with the prefix '{prefix}_': did you mean '{prefix}_{tool}'?"
    close = difflib.get_close_matches(tool, offered, n=1)
    return f"did you mean {close[0]!r}?" if close else f"its tools: {', '.join(offered) or 'none'}"


def _shared_tools(project: Project, started: Mapping[str, ServerProbe]) -> Iterator[Problem]:
    for worker in project.workers.values():
        servers = [started[name] for name in worker.toolsets if name in started]
        for index, first in enumerate(servers):
            for second in servers[index + 1 :]:
                shared = sorted({tool.name for tool in first.tools} & {tool.name for tool in second.tools})
                if shared:
                    more = f" (and {len(shared) - 1} more)" if len(shared) > 1 else ""
                    yield worker.problem(
                        f"worker {worker.name!r} uses MCP servers {first.name!r} and {second.name!r}, which both "
                        f"offer tool {shared[0]!r}{more}; give one of them a tool_prefix",
                        "toolsets",
                    )
