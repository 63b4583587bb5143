"""The application container: a global asyncpg pool, a per-run audit, per-call ledger toolsets.

The container is wiring only; the logic lives in `bank.ledger` (SQL) and `bank.toolsets` (tools).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
from dependency_injector import providers
from pydantic import Field
from pydantic_ai import Agent

from containers import AgentContainer
from llm_do import AgentEntry, ConfigurationError, LlmDoSettings, RunLocalSingleton, ToolPolicy, reveal

from . import ledger
from .model import teller_model
from .toolsets import Audit, LedgerToolset

__all__ = ["APPLICATION", "Bank", "BankSettings", "open_pool", "teller"]

APPLICATION = "llm-do-bank"
"""The pool's connections carry this `application_name` (see them in `pg_stat_activity`)."""


class BankSettings(LlmDoSettings):
    """llm-do's settings plus the pool's size. The database is `LLM_DO_DATABASE_URL` (a secret)."""

    pool_size: int = Field(default=10, ge=1)
    """Most connections the pool opens (`LLM_DO_POOL_SIZE`); each open transaction holds one."""


async def open_pool(dsn: str | None, size: int) -> AsyncIterator[ledger.Pool]:
    """Global resource: an asyncpg pool on a database whose schema exists; closed at shutdown."""
    if dsn is None:
        raise ConfigurationError(
            "LLM_DO_DATABASE_URL is not set: set it to a PostgreSQL URL like postgresql://user@localhost/bank"
        )
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=size, server_settings={"application_name": APPLICATION})
    try:
        await ledger.create_schema(pool)
        yield pool
    finally:
        await pool.close()


class Bank(AgentContainer):
    settings_class = BankSettings

    pool = providers.Resource(
        open_pool, dsn=reveal(AgentContainer.config.database_url), size=AgentContainer.config.pool_size
    )
    audit = RunLocalSingleton(Audit)  # per run: emptied when the run ends
    ledger = providers.Factory(LedgerToolset, pool=pool, audit=audit)  # per call
    counter = providers.Factory(LedgerToolset, pool=pool, audit=audit)  # the chat's: its commits need approval
    approval_policies = providers.Dict(
        ledger=ToolPolicy(),  # the payment service's: its calls run without asking (declared, not by default)
        counter=ToolPolicy(tools={"commit": "ask"}),
    )


teller = AgentEntry(
    Agent(teller_model, instructions="Carry out the transfer described in the JSON request, then commit it."),
    name="teller",
    toolsets=["ledger"],
    description="Moves money between accounts in one database transaction.",
)
