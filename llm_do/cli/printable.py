"""Text from models, tools and MCP servers made safe to show on a terminal.

Such text can hold what a terminal obeys rather than shows: escape sequences (that move the cursor,
clear the screen, set the window title, hide a line), a carriage return that overwrites what was
shown, bidirectional overrides that show text in another order than it is. rich escapes its own
markup but passes those through, so the command shows them as visible escapes (`\\x1b`,
`\\u202e`) instead. Standard library only: `failures` uses it before pydantic-ai is imported.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 controls but tab and newline, DEL, C1 controls
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidirectional marks, embeddings, overrides, isolates
    "\ud800-\udfff]"  # lone surrogates (undecodable bytes), which no terminal encoding can carry
)


def printable(text: str) -> str:
    """`text` with every character a terminal would obey rather than show written as an escape (`\\x1b`);
    line ends (`\\n`, `\\r\\n`) and tabs stay as they are."""
    return _UNSAFE.sub(_escaped, text.replace("\r\n", "\n"))


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
