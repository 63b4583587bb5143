"""A bank clerk agent over a real SQLite file: global database, per-run audit, per-call transactions.

Runs offline: `clerk_model` is a scripted stand-in for an LLM that reads "Move N from A to B".
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

from dependency_injector import providers
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from containers import AgentContainer
from llm_do import AgentEntry, Handles, RunLocalSingleton, ToolPolicy, Toolset, tool


class Database:
    """Global: where the ledger lives. Hands out connections; holds none itself."""

    def __init__(self, path: str) -> None:
        self.path = path
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS accounts (name TEXT PRIMARY KEY, balance INTEGER NOT NULL)")
            conn.executemany("INSERT OR IGNORE INTO accounts VALUES (?, ?)", [("A", 100), ("B", 50)])
        conn.close()

    def connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, isolation_level=None)

    def balances(self) -> dict[str, int]:
        conn = sqlite3.connect(self.path)
        try:
            return dict(conn.execute("SELECT name, balance FROM accounts ORDER BY name").fetchall())
        finally:
            conn.close()


class Audit:
    """Per run: every transfer any call of the run committed."""

    def __init__(self) -> None:
        self.entries: list[str] = []


class Transaction:
    """One open SQLite transaction on its own connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        conn.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.conn.execute("COMMIT")
        self.conn.close()

    def rollback(self) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()


class DatabaseToolset(Toolset):
    """Per call: transactions the model opens, uses and commits through `txn_...` handles."""

    def __init__(self, db: Database, audit: Audit) -> None:
        self.db = db
        self.audit = audit
        self.txns: Handles[Transaction] = Handles("txn")  # forgotten ones are rolled back

    @tool
    def begin(self) -> str:
        """Open a transaction and return its handle."""
        return self.txns.open(Transaction(self.db.connect()))

    @tool
    def balance(self, txn: str, account: str) -> int:
        """Read an account's balance inside a transaction."""
        row = self.txns.get(txn).conn.execute("SELECT balance FROM accounts WHERE name = ?", (account,)).fetchone()
        if row is None:
            raise ValueError(f"no account {account!r}")
        return int(row[0])

    @tool
    def transfer(self, txn: str, source: str, target: str, amount: int) -> str:
        """Move `amount` from `source` to `target` inside a transaction."""
        conn = self.txns.get(txn).conn
        if self.balance(txn, source) < amount:
            return f"refused: {source} has less than {amount}"
        conn.execute("UPDATE accounts SET balance = balance - ? WHERE name = ?", (amount, source))
        conn.execute("UPDATE accounts SET balance = balance + ? WHERE name = ?", (amount, target))
        return f"moved {amount} from {source} to {target} (not committed yet)"

    @tool
    def commit(self, txn: str) -> str:
        """Commit a transaction and close its handle."""
        self.txns.pop(txn).commit()
        self.audit.entries.append(txn)
        return f"{txn} committed"


class App(AgentContainer):
    database = providers.Singleton(Database, path=AgentContainer.config.db_path)  # global
    audit = RunLocalSingleton(Audit)  # per run
    db = providers.Factory(DatabaseToolset, db=database, audit=audit)  # per call
    approval_policies = providers.Dict(db=ToolPolicy(tools={"commit": "ask"}))  # a commit needs a yes


_REQUEST = re.compile(r"Move (\d+) from (\w+) to (\w+)")


def _last_returns(messages: list[ModelMessage]) -> list[Any]:
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    return [part.content for part in last.parts if isinstance(part, ToolReturnPart)]


def clerk_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A deterministic stand-in for an LLM: begin, transfer, commit, report."""
    steps = sum(isinstance(message, ModelResponse) for message in messages)
    match = _REQUEST.search(str(messages[0]))
    if match is None:
        return ModelResponse(parts=[TextPart("I only understand 'Move N from A to B'.")])
    amount, source, target = match.groups()
    if steps == 0:
        return ModelResponse(parts=[ToolCallPart("begin", {})])
    if steps == 1:
        txn = _last_returns(messages)[0]
        args = {"txn": txn, "source": source, "target": target, "amount": int(amount)}
        return ModelResponse(parts=[ToolCallPart("transfer", args)])
    if steps == 2:
        txn = next(
            part.content
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart) and part.tool_name == "begin"
        )
        return ModelResponse(parts=[ToolCallPart("commit", {"txn": txn})])
    return ModelResponse(parts=[TextPart(f"Done: {' '.join(map(str, _last_returns(messages)))}.")])


clerk = AgentEntry(
    Agent(FunctionModel(clerk_model), instructions="You move money between accounts."),
    name="clerk",
    toolsets=["db"],
    description="Moves money between accounts.",
)


def db_path_in(folder: Path) -> str:
    return str(folder / "ledger.sqlite3")
