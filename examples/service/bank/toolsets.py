"""The per-run audit and the per-call ledger toolset the teller agent works with."""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from pydantic_ai.exceptions import ToolFailed

from llm_do import Handles, Toolset, tool

from . import ledger

logger = logging.getLogger("bank")

OUTCOME_BUDGET = 10.0
"""Seconds a commit whose connection was lost keeps asking the database whether it went through."""


class Audit:
    """Per run: one line for each thing the run did to the database, in order.

    `committed` says whether a transaction of the run was committed; `fault` is the last database
    fault a tool reported to the model (the server went away, the connection broke), if any.
    """

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.committed = False
        self.fault: str | None = None
        self.outcome_unknown = False
        """A commit's connection was lost and the database could not say whether it went through."""

    def record(self, line: str) -> None:
        self.lines.append(line)


async def _roll_back_forgotten(audit: Audit, txn: ledger.Transaction) -> None:
    try:
        await txn.rollback()
    except Exception as error:
        if not ledger.is_database_fault(error):
            raise
        audit.record(f"rollback {txn.handle} (never committed; the connection was already lost)")
        return
    audit.record(f"rollback {txn.handle} (never committed)")


def _describe(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class LedgerToolset(Toolset):
    """Per call: database transactions the model opens, uses and commits through `txn_...` handles.

    A transaction the model forgets is rolled back when the call ends (also on error and
    cancellation), and its connection goes back to the pool. When the database fails under a tool
    (stopped, restarted, the connection ended), the model reads a tool error that says what became
    of its transaction, and the run goes on.
    """

    def __init__(self, pool: ledger.Pool, audit: Audit) -> None:
        self.pool = pool
        self.audit = audit
        self.txns: Handles[ledger.Transaction] = Handles("txn", on_forget=partial(_roll_back_forgotten, audit))

    def _fault(
        self, what: str, error: BaseException, outcome: str, problem: str = "the database connection was lost"
    ) -> ToolFailed:
        message = f"{what} failed: {problem} ({_describe(error)}). {outcome}"
        self.audit.fault = message
        self.audit.record(message)
        return ToolFailed(message)

    async def _drop(self, txn: str, what: str, error: BaseException) -> ToolFailed:
        """Close `txn` after a fault under it: the server rolls back a transaction whose connection is gone."""
        transaction = self.txns.pop(txn)
        try:
            await transaction.rollback()
        except Exception as again:
            if not ledger.is_database_fault(again):
                raise
        return self._fault(what, error, f"{txn} is gone and nothing in it was committed: call begin to start again.")

    @tool
    async def begin(self) -> str:
        """Open a database transaction and return its handle."""
        try:
            txn = await ledger.Transaction.begin(self.pool)
        except Exception as error:
            if not ledger.is_database_fault(error):
                raise
            outcome = "No transaction was opened: call begin to try again."
            raise self._fault("begin", error, outcome, "the database could not be reached") from error
        txn.handle = self.txns.open(txn)
        self.audit.record(f"begin {txn.handle}")
        return txn.handle

    @tool
    async def balance(self, txn: str, account: str) -> int:
        """The balance of `account`, read inside the transaction `txn`."""
        try:
            return await ledger.balance(self.txns.get(txn).conn, account)
        except Exception as error:
            if not ledger.is_database_fault(error):
                raise
            raise await self._drop(txn, f"balance of {account!r} in {txn}", error) from error

    @tool
    async def transfer(self, txn: str, source: str, target: str, amount: int, reference: str) -> str:
        """Move `amount` from `source` to `target` inside `txn`; `reference` is the request's payment reference."""
        what = f"transfer {amount} from {source} to {target} ref={reference} in {txn}"
        transaction = self.txns.get(txn)
        try:
            await ledger.transfer(transaction.conn, source, target, amount, reference)
        except ledger.BankError as error:
            self.audit.record(f"{what} refused: {error}")
            raise
        except Exception as error:
            if not ledger.is_database_fault(error):
                raise
            raise await self._drop(txn, what, error) from error
        transaction.references.append(reference)
        self.audit.record(what)
        return f"moved {amount} from {source} to {target} (not committed yet)"

    @tool
    async def commit(self, txn: str) -> str:
        """Commit the transaction `txn`; its handle is closed."""
        transaction = self.txns.pop(txn)
        return await ledger.finish_even_if_cancelled(self._commit(transaction))

    async def _commit(self, transaction: ledger.Transaction) -> str:
        txn = transaction.handle
        try:
            await transaction.commit()
        except Exception as error:
            if not ledger.is_database_fault(error):
                raise
            committed = await self._went_through(transaction)
            if committed is None:
                self.audit.outcome_unknown = True
                references = ", ".join(repr(reference) for reference in transaction.references)
                raise self._fault(
                    f"commit {txn}",
                    error,
                    f"Whether it committed is unknown (the database did not answer within {OUTCOME_BUDGET:g} s): "
                    f"do not retry; look up the transfers {references} later.",
                ) from error
            if not committed:
                raise self._fault(
                    f"commit {txn}", error, f"{txn} was not committed and is gone: call begin to start again."
                ) from error
            self.audit.committed = True
            self.audit.record(f"commit {txn} (confirmed after the connection was lost)")
            return f"{txn} committed"
        self.audit.committed = True
        self.audit.record(f"commit {txn}")
        return f"{txn} committed"

    async def _went_through(self, transaction: ledger.Transaction) -> bool | None:
        """Whether a commit whose connection was lost went through; None if the database does not say in time."""
        if not transaction.references:
            return False  # nothing in it to look for, and nothing of the bank's was in it
        deadline = asyncio.get_running_loop().time() + OUTCOME_BUDGET
        while True:
            try:
                return await ledger.transferred(self.pool, transaction.references[0])
            except Exception as error:
                if not ledger.is_database_fault(error):
                    raise
                if asyncio.get_running_loop().time() > deadline:
                    logger.warning("commit %s: outcome unknown: %s", transaction.handle, _describe(error))
                    return None
            await asyncio.sleep(0.1)
