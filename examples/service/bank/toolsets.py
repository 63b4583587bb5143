"""The per-run audit and the per-call ledger toolset the teller agent works with."""

from __future__ import annotations

from functools import partial

from llm_do import Handles, Toolset, tool

from . import ledger


class Audit:
    """Per run: one line for each thing the run did to the database, in order."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def record(self, line: str) -> None:
        self.lines.append(line)


async def _roll_back_forgotten(audit: Audit, txn: ledger.Transaction) -> None:
    audit.record(f"rollback {txn.handle} (never committed)")
    await txn.rollback()


class LedgerToolset(Toolset):
    """Per call: database transactions the model opens, uses and commits through `txn_...` handles.

    A transaction the model forgets is rolled back when the call ends (also on error and
    cancellation), and its connection goes back to the pool.
    """

    def __init__(self, pool: ledger.Pool, audit: Audit) -> None:
        self.pool = pool
        self.audit = audit
        self.txns: Handles[ledger.Transaction] = Handles("txn", on_forget=partial(_roll_back_forgotten, audit))

    @tool
    async def begin(self) -> str:
        """Open a database transaction and return its handle."""
        txn = await ledger.Transaction.begin(self.pool)
        txn.handle = self.txns.open(txn)
        self.audit.record(f"begin {txn.handle}")
        return txn.handle

    @tool
    async def balance(self, txn: str, account: str) -> int:
        """The balance of `account`, read inside the transaction `txn`."""
        return await ledger.balance(self.txns.get(txn).conn, account)

    @tool
    async def transfer(self, txn: str, source: str, target: str, amount: int, reference: str) -> str:
        """Move `amount` from `source` to `target` inside `txn`; `reference` is the request's payment reference."""
        what = f"transfer {amount} from {source} to {target} ref={reference} in {txn}"
        try:
            moved = await ledger.transfer(self.txns.get(txn).conn, source, target, amount, reference)
        except ledger.BankError as error:
            self.audit.record(f"{what} refused: {error}")
            raise
        if not moved:
            self.audit.record(f"{what}: already made, nothing moved")
            return f"transfer ref={reference} was already made; nothing moved"
        self.audit.record(what)
        return f"moved {amount} from {source} to {target} (not committed yet)"

    @tool
    async def commit(self, txn: str) -> str:
        """Commit the transaction `txn`; its handle is closed."""
        await self.txns.pop(txn).commit()
        self.audit.record(f"commit {txn}")
        return f"{txn} committed"
