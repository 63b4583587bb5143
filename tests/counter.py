"""`Counter`, the toolset that several test modules give their entries: one tool, `add`, that needs no approval."""

from __future__ import annotations

from llm_do import ToolPolicy, Toolset, tool

__all__ = ["Counter"]


class Counter(Toolset):
    default_policy = ToolPolicy()  # declared: its calls need no approval (the tests using it are about something else)

    def __init__(self) -> None:
        self.value = 0

    @tool
    def add(self, amount: int) -> int:
        """Add to the counter and return the total."""
        self.value += amount
        return self.value
