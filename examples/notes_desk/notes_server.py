"""A small MCP server (fastmcp, stdio): notes kept in the server process, one store per server process.

Run by llm-do as declared in project.toml; `NOTES_OWNER` comes from the environment llm-do gives it.
"""

from __future__ import annotations

import os

from fastmcp import FastMCP
from mcp_types import ToolAnnotations

server = FastMCP("notes", instructions="A notebook. Add notes, then read them back.")
_notes: list[str] = []


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def list_notes() -> list[str]:
    """Every note, oldest first."""
    return list(_notes)


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def add_note(text: str) -> str:
    """Add a note."""
    _notes.append(text)
    return f"noted for {os.environ.get('NOTES_OWNER', 'nobody')} ({len(_notes)} notes)"


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def clear_notes() -> str:
    """Delete every note."""
    _notes.clear()
    return "cleared"


if __name__ == "__main__":
    server.run(show_banner=False, log_level="WARNING")
