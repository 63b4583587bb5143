"""`make demo`: run the clerk offline against a real SQLite file and show what happened."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from ledger_app import App, clerk, db_path_in

from llm_do import Approval, ApprovalRequest, Runtime, RuntimeConfig


def approver(request: ApprovalRequest) -> Approval:
    """Stands in for a person at a terminal: approves, and shows what was asked."""
    print("approval asked: ", request.description)
    return Approval.approve()


async def main(folder: Path) -> None:
    app = App()
    app.config.db_path.from_value(db_path_in(folder))
    config = RuntimeConfig.from_container(app, approval_mode="prompt")
    async with Runtime(app, entries=[clerk], approver=approver, config=config) as runtime:
        print("balances before:", app.database().balances())
        result = await runtime.run("clerk", "Move 10 from A to B")
        print("clerk says:     ", result.output)
        print("balances after: ", app.database().balances())
        for call in result.calls:
            print(f"call {call.id} entry={call.entry} depth={call.depth} outcome={call.outcome}")
        print(f"usage: {result.usage.requests} requests, {result.usage.total_tokens} tokens")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(main(Path(folder)))
