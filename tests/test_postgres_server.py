"""The suite's throwaway PostgreSQL server starts, answers on its socket, and is PostgreSQL 15 or newer."""

from __future__ import annotations

import asyncpg

from .postgres import PostgresServer


async def test_the_throwaway_server_answers(postgres: PostgresServer) -> None:
    connection = await asyncpg.connect(**postgres.connect_kwargs())  # type: ignore[arg-type]
    try:
        version = await connection.fetchval("show server_version_num")
    finally:
        await connection.close()
    assert int(version) >= 150000
