"""The same service written with plain pydantic-ai, no llm-do: the benchmark's baseline.

Written as a careful user would: one `FunctionToolset` built once at import (schemas derived
once) and shared by every request; per-request state (the pool, the audit, the open
transactions) travels in `deps`; forgotten transactions are rolled back in a `finally`; a commit
once sent is seen to its end even if the client leaves. Same SQL and commit (`bank.ledger`), same
scripted model, same HTTP plumbing (`bank.web`) as `bank.app`.

Serve it with `uvicorn bank.plain:create_app --factory --app-dir examples/service`.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from pydantic_ai import Agent, RunContext
from pydantic_ai.agent import AgentRunResult
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.toolsets import FunctionToolset

from . import ledger
from .model import TransferRequest, teller_model
from .toolsets import Audit
from .web import ClientDisconnected, error_response, unless_disconnected, usage_summary
from .wiring import BankSettings, open_pool

__all__ = ["create_app"]


@dataclass
class Deps:
    pool: ledger.Pool
    audit: Audit = field(default_factory=Audit)
    txns: dict[str, ledger.Transaction] = field(default_factory=dict)

    def txn(self, handle: str) -> ledger.Transaction:
        try:
            return self.txns[handle]
        except KeyError:
            raise ToolFailed(f"Unknown handle {handle!r}: open one with begin") from None


tools = FunctionToolset[Deps]()


@tools.tool
async def begin(ctx: RunContext[Deps]) -> str:
    """Open a database transaction and return its handle."""
    txn = await ledger.Transaction.begin(ctx.deps.pool)
    txn.handle = f"txn_{secrets.token_hex(4)}"
    ctx.deps.txns[txn.handle] = txn
    ctx.deps.audit.record(f"begin {txn.handle}")
    return txn.handle


@tools.tool
async def balance(ctx: RunContext[Deps], txn: str, account: str) -> int:
    """The balance of `account`, read inside the transaction `txn`."""
    return await ledger.balance(ctx.deps.txn(txn).conn, account)


@tools.tool
async def transfer(ctx: RunContext[Deps], txn: str, source: str, target: str, amount: int, reference: str) -> str:
    """Move `amount` from `source` to `target` inside `txn`; `reference` is the request's payment reference."""
    what = f"transfer {amount} from {source} to {target} ref={reference} in {txn}"
    try:
        await ledger.transfer(ctx.deps.txn(txn).conn, source, target, amount, reference)
    except ledger.BankError as error:
        ctx.deps.audit.record(f"{what} refused: {error}")
        raise
    ctx.deps.audit.record(what)
    return f"moved {amount} from {source} to {target} (not committed yet)"


@tools.tool
async def commit(ctx: RunContext[Deps], txn: str) -> str:
    """Commit the transaction `txn`; its handle is closed."""
    transaction = ctx.deps.txn(txn)
    del ctx.deps.txns[txn]  # a commit once sent is never rolled back: it releases the connection itself
    return await ledger.finish_even_if_cancelled(_commit(ctx.deps.audit, transaction, txn))


async def _commit(audit: Audit, transaction: ledger.Transaction, txn: str) -> str:
    await transaction.commit()
    audit.record(f"commit {txn}")  # also when the client left meanwhile: the audit says what happened
    return f"{txn} committed"


teller = Agent(
    teller_model,
    deps_type=Deps,
    instructions="Carry out the transfer described in the JSON request, then commit it.",
)


async def _run(deps: Deps, prompt: str) -> AgentRunResult[str]:
    try:
        return await teller.run(prompt, deps=deps, toolsets=[tools])
    finally:
        while deps.txns:  # forgotten, failed or cancelled: roll back, never commit
            handle, txn = deps.txns.popitem()
            deps.audit.record(f"rollback {handle} (never committed)")
            await txn.rollback()


def create_app() -> FastAPI:
    settings = BankSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        secret = settings.database_url
        dsn = None if secret is None else secret.get_secret_value()
        async with asynccontextmanager(open_pool)(dsn, settings.pool_size) as pool:
            yield {"pool": pool}

    app = FastAPI(title="bank (plain pydantic-ai)", lifespan=lifespan)

    @app.post("/transfer")
    async def post_transfer(body: TransferRequest, request: Request) -> Response:
        deps = Deps(request.state.pool)
        try:
            result = await unless_disconnected(request, _run(deps, body.model_dump_json()))
        except ClientDisconnected:
            return Response(status_code=499)
        except ledger.BankError as error:
            return error_response(error.status, str(error), deps.audit.lines)
        except Exception as error:
            message = f"the transfer failed ({type(error).__name__}); see the server log"
            return error_response(500, message, deps.audit.lines)
        return JSONResponse(
            {
                "reference": body.reference,
                "output": result.output,
                "audit": deps.audit.lines,
                "usage": usage_summary(result.usage),
            }
        )

    @app.get("/accounts")
    async def accounts(request: Request) -> dict[str, int]:
        return await ledger.balances(request.state.pool)

    return app
