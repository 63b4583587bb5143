"""`make demo`, part two: the built-in `sql` toolset on a real SQLite file, offline.

A clerk agent (a scripted model standing in for an LLM) moves money between accounts through
transaction handles. Its first run commits, after an approver (standing in for a person at a
terminal) approves the `execute` and `commit` calls; its second run forgets to commit, and the
call's end rolls the transaction back.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import tempfile
from pathlib import Path

from pydantic_ai import Agent

from containers import BuiltinToolsets
from llm_do import AgentEntry, Approval, ApprovalRequest, Runtime, RuntimeConfig
from llm_do.testing import ScriptedModel, Step, call_tree, returned, tool_call

MOVE = "UPDATE accounts SET balance = balance + $1 WHERE name = $2"


def clerk(remember_to_commit: bool) -> AgentEntry:
    """A scripted clerk: moves 10 from A to B in one transaction, then commits (or forgets to)."""
    steps: list[Step] = [
        tool_call("begin"),
        tool_call("execute", txn=returned("begin"), sql=MOVE, params=[-10, "A"]),
        tool_call("execute", txn=returned("begin"), sql=MOVE, params=[10, "B"]),
    ]
    if remember_to_commit:
        steps.append(tool_call("commit", txn=returned("begin")))
    steps.append(lambda turn: f"done: {turn.returned('commit') if remember_to_commit else 'forgot to commit'}")
    return AgentEntry(Agent(ScriptedModel(*steps)), name="clerk", toolsets=["sql"])


def approver(request: ApprovalRequest) -> Approval:
    """Stands in for a person at a terminal: approves, and shows what was asked."""
    print(f"  approval asked: {request.description}")
    return Approval.approve()


def balances(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT name, balance FROM accounts ORDER BY name").fetchall())


async def run_clerk(path: Path, remember_to_commit: bool) -> None:
    app = BuiltinToolsets()
    config = RuntimeConfig.from_container(app, approval_mode="prompt")
    async with Runtime(app, entries=[clerk(remember_to_commit)], approver=approver, config=config) as runtime:
        result = await runtime.run("clerk", "Move 10 from A to B")
    handles = [
        part.content
        for message in result.messages
        for part in getattr(message, "parts", [])
        if part.part_kind == "tool-return" and part.tool_name == "begin"
    ]
    print(f"  the model held transaction {handles[0]}; it answered: {result.output}")
    print("  " + call_tree(result).replace("\n", "\n  "))
    print(f"  balances now: {balances(path)}")


async def main(folder: Path) -> None:
    path = folder / "bank.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE accounts (name TEXT PRIMARY KEY, balance INTEGER NOT NULL)")
        db.executemany("INSERT INTO accounts VALUES (?, ?)", [("A", 100), ("B", 0)])
    os.environ["LLM_DO_DATABASE_URL"] = f"sqlite:///{path}"
    print(f"balances before: {balances(path)}")
    print("run 1: the clerk commits")
    await run_clerk(path, remember_to_commit=True)
    print("run 2: the clerk forgets to commit; the call's end rolls its transaction back")
    await run_clerk(path, remember_to_commit=False)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parents[2]))
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(main(Path(folder)))
