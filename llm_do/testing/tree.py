"""`call_tree`: a run's calls as indented text, for readable assertions."""

from __future__ import annotations

from llm_do.results import CallRecord, RunResult

__all__ = ["call_tree"]


def call_tree(result: RunResult) -> str:
    """One line per call, `entry (outcome)`, children indented under their parent in start order.

    ```text
    shop (ok)
      warehouse (ok)
    ```
    """
    children: dict[str | None, list[CallRecord]] = {}
    for record in result.calls:
        children.setdefault(record.parent, []).append(record)
    lines: list[str] = []

    def walk(parent: str | None, indent: str) -> None:
        for record in children.get(parent, []):
            lines.append(f"{indent}{record.entry} ({record.outcome})")
            walk(record.id, indent + "  ")

    walk(None, "")
    return "\n".join(lines)
