"""The projects the recorded sessions ran (their workers' instructions and files, as they were then), and a run
of one through the command against the recorded server."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..cli_projects import llm_do
from .httplog import Exchange, exchanges
from .server import RecordedServer, recorded_server

FILES = (
    "You are a file assistant. You have NOT seen any file yet. Your first reply must be a tool\n"
    "call: `read_text` with the file's relative path (like `notes.txt`), or `list_dir` to see which\n"
    "files there are. After the tool result arrives, answer in one short sentence using what it says."
)
WRITER = (
    "You are a file writer. Your first reply must be a tool call: `write_text` with a relative\n"
    "`path` (like `hello.txt`) and the file's `text`. After the tool result arrives, say in one\n"
    "sentence what happened. If the write was refused, say so and do not try again."
)
ASKER = (
    "You cannot read files. Your first reply must be a tool call: `reader` with the user's question\n"
    "as its `input`. After the tool result arrives, answer the user in one sentence with what the\n"
    "reader found."
)
CLERK = (
    "You are a careful bank clerk. The database has one table, `accounts(name, balance)`.\n\n"
    "To move money: `begin` a transaction, `query` the payer's balance, refuse if it is too low,\n"
    "`execute` one UPDATE per account (bind values as $1, $2), then `commit`. If the commit is refused,\n"
    "`rollback` and say that nothing moved. Finish with both balances in one short sentence."
)
NOTES = "The meeting with the auditors is on Thursday at 10:00 in room B12.\n"
TODO = "# Todo\n- renew the TLS certificate\n- pay the cloud invoice (EUR 412)\n"


def worker(
    name: str, instructions: str, toolsets: list[str], *, description: str | None = None, extra: str = ""
) -> str:
    front = f"name: {name}\ntoolsets: [{', '.join(toolsets)}]\n"
    if description is not None:
        front += f"description: {description}\n"
    return f"---\n{front}{extra}---\n{instructions}\n"


def desk(root: Path, *, extra: dict[str, str] | None = None) -> Path:
    """The recorded sessions' project: `files` (read-only), `writer`, `asker` over `reader`, `clerk` (sql)."""
    root.mkdir(parents=True, exist_ok=True)
    more = extra or {}
    (root / "notes.txt").write_text(NOTES)
    (root / "todo.md").write_text(TODO)
    (root / "files.worker").write_text(worker("files", FILES, ["filesystem_readonly"], extra=more.get("files", "")))
    (root / "writer.worker").write_text(worker("writer", WRITER, ["filesystem"], extra=more.get("writer", "")))
    (root / "reader.worker").write_text(
        worker(
            "reader",
            FILES,
            ["filesystem_readonly"],
            description="Answers questions about the files in its folder by reading them.",
            extra=more.get("reader", ""),
        )
    )
    (root / "asker.worker").write_text(worker("asker", ASKER, ["reader"], extra=more.get("asker", "")))
    (root / "clerk.worker").write_text(worker("clerk", CLERK, ["sql"], extra=more.get("clerk", "")))
    return root


def run(
    project: Path,
    entry: str,
    prompt: str,
    answers: list[int],
    *,
    borrowed: Sequence[int | Exchange] = (),
    recorded: Sequence[Exchange] | None = None,
    flags: Sequence[str] = ("-v",),
    **env: str,
) -> tuple[Any, str, int, RecordedServer]:
    """`llm-do run PROJECT PROMPT --entry ENTRY -m openai-chat:qwen --json FLAGS` against a server answering with
    the `recorded` exchanges (default: the llama-server log's) `answers`, then `borrowed`: the JSON document,
    stderr, the exit code and the server. `-v` (a flag by default) streams the model's replies; without it they
    are not streamed."""
    with recorded_server(exchanges() if recorded is None else recorded, answers, borrowed=borrowed) as (url, server):
        ran = llm_do(
            "run", project, prompt, "--entry", entry, "-m", "openai-chat:qwen", "--json", *flags,
            env={"LLM_DO_OPENAI_BASE_URL": url, **env},
        )  # fmt: skip
    return json.loads(ran.stdout), ran.stderr, ran.returncode, server


def bank(path: Path) -> str:
    """A SQLite file with the clerk's table (alice 100, carol 40); its URL."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE accounts (name TEXT PRIMARY KEY, balance INTEGER)")
        db.executemany("INSERT INTO accounts VALUES (?, ?)", [("alice", 100), ("carol", 40)])
    db.close()
    return f"sqlite:///{path}"
