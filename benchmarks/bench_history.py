"""What a turn of a long conversation costs its history store: bytes written and CPU, at turn 10, 100 and 1,000.

Starts a throwaway PostgreSQL server (tests/postgres.py) with `pg_stat_statements`, and drives one conversation
per layout to `--turns` turns, each in its own database, the way a session drives its store: as a run starts it
loads the conversation (given the copy the session holds, where the store takes it), and as it ends it saves the
conversation with the run's turn at its end (four messages: the person's request, a tool call, its result, the
answer; about 1.6 KB of JSON). Two layouts side by side:

- **earlier** (the baseline, kept below as it was): one row per conversation, all its messages as one `json`
  value: every save writes the whole conversation, every load reads and parses it whole;
- **turns** (`llm_do.PostgresHistoryStore`): a row per conversation (version, length) and one per saved turn; a
  save writes the turn it adds, a load given the copy held is a version check.

For every turn it measures the WAL the server wrote (`pg_current_wal_lsn()` before and after, read from another
database), the CPU time of this process (`time.process_time()`: encoding, decoding, the driver) and the
server's time on the layout's statements (`pg_stat_statements`: planning and execution), and reports medians over
the turns around 10, 100 and the last one, and the ratio of the last to turn 10. At the end: the WAL of the
whole conversation and the size of its tables.

    python benchmarks/bench_history.py [--turns 1000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage  # noqa: E402

from llm_do import PostgresHistoryStore, StoredHistory  # noqa: E402
from tests.postgres import PostgresServer, temporary_postgres  # noqa: E402

# -- the baseline: the store as it was before conversations were kept turn by turn ------------------------


class EarlierPostgresHistoryStore:
    """The earlier `PostgresHistoryStore`, as it was: one row per session, its messages whole (`json`)."""

    def __init__(self, dsn: str, *, table: str = "llm_do_session_history") -> None:
        self.dsn = dsn
        self.table = table
        self._pool: Any = None

    async def _connected(self) -> Any:
        if self._pool is None:
            conn = await asyncpg.connect(self.dsn)
            try:
                await conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {self.table} ("
                    "session_id text PRIMARY KEY, messages json NOT NULL, "
                    "updated_at timestamptz NOT NULL DEFAULT now(), version bigint NOT NULL DEFAULT 1)"
                )
            finally:
                await conn.close()
            self._pool = await asyncpg.create_pool(self.dsn, min_size=1, max_size=1)
        return self._pool

    async def load(self, session_id: str) -> StoredHistory:
        pool = await self._connected()
        row = await pool.fetchrow(f"SELECT messages::text, version FROM {self.table} WHERE session_id = $1", session_id)
        if row is None:
            return StoredHistory()
        return StoredHistory(ModelMessagesTypeAdapter.validate_json(row[0]), row[1])

    async def save(self, session_id: str, messages: list[ModelMessage], *, version: int | None = None) -> int | None:
        document = ModelMessagesTypeAdapter.dump_json(messages).decode()
        pool = await self._connected()
        saved = await pool.fetchval(
            f"INSERT INTO {self.table} AS stored (session_id, messages, version) "
            "VALUES ($1, $2::json, txid_current()) ON CONFLICT (session_id) DO UPDATE SET "
            "messages = EXCLUDED.messages, version = EXCLUDED.version, updated_at = now() "
            "WHERE $3::bigint IS NULL OR stored.version = $3 RETURNING version",
            session_id,
            document,
            version,
        )
        return None if saved is None else int(saved)

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.close()


# -- a conversation -----------------------------------------------------------------------------------


def turn(number: int) -> list[ModelMessage]:
    """A turn of four messages: the person's request, the model's tool call, its result, the model's answer."""
    call = f"call_{number:06d}"
    usage = RequestUsage(input_tokens=900 + number, output_tokens=40)
    balance = ", ".join(f"account {name}: {1000 + number * index} EUR" for index, name in enumerate("ABCDEFGH"))
    return [
        ModelRequest(parts=[UserPromptPart(f"Message {number}: move 10 from A to B, then tell me every balance.")]),
        ModelResponse(
            parts=[ToolCallPart("transfer", {"source": "A", "target": "B", "amount": 10}, tool_call_id=call)],
            usage=usage,
            model_name="bench-model",
        ),
        ModelRequest(parts=[ToolReturnPart("transfer", f"moved 10 from A to B (ref {number}); {balance}", call)]),
        ModelResponse(
            parts=[TextPart(f"Done: 10 moved from A to B. The balances now: {balance}. Anything else?")],
            usage=usage,
            model_name="bench-model",
        ),
    ]


@dataclass
class Sample:
    wal: int
    cpu: float
    server: float


@dataclass
class Layout:
    name: str
    database: str
    store: Any
    take_turn: Callable[[str, int], Awaitable[None]]
    tables: list[str]
    samples: dict[int, list[Sample]] = field(default_factory=dict)
    wal_total: list[int] = field(default_factory=list)
    sizes: tuple[int, int] = (0, 0)
    """The tables' size (with their indexes and TOAST) at the end, before and after a VACUUM."""


class Conversations:
    """What each layout's session holds between turns (the turns layout's `held` copy)."""

    def __init__(self) -> None:
        self.held: dict[str, StoredHistory] = {}


def earlier_turn(store: EarlierPostgresHistoryStore) -> Callable[[str, int], Awaitable[None]]:
    async def take(session_id: str, number: int) -> None:
        stored = await store.load(session_id)  # every run's start read the conversation whole
        messages = [*stored.messages, *turn(number)]
        if await store.save(session_id, messages, version=stored.version) is None:
            raise RuntimeError("refused")

    return take


def turns_turn(store: PostgresHistoryStore, held: Conversations) -> Callable[[str, int], Awaitable[None]]:
    async def take(session_id: str, number: int) -> None:
        stored = await store.load(session_id, held=held.held.get(session_id))  # a version check
        messages = [*stored.messages, *turn(number)]
        version = await store.save(session_id, messages, version=stored.version, kept=len(stored.messages))
        if version is None:
            raise RuntimeError("refused")
        held.held[session_id] = StoredHistory(messages, version)

    return take


async def with_pg_stat_statements(postgres: PostgresServer) -> None:
    admin = await asyncpg.connect(postgres.dsn())
    try:
        await admin.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
        await admin.execute("ALTER SYSTEM SET pg_stat_statements.track_planning = on")
    finally:
        await admin.close()
    postgres.restart()
    monitor = await asyncpg.connect(postgres.dsn())
    try:
        await monitor.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    finally:
        await monitor.close()


async def new_database(postgres: PostgresServer, name: str) -> str:
    admin = await asyncpg.connect(postgres.dsn())
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    return name


class Monitor:
    """Reads the server's WAL position and a database's statement time, from the `postgres` database (whose own
    statements are not counted)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    async def wal(self) -> int:
        return int(await self.conn.fetchval("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"))

    async def server_ms(self, database: str) -> float:
        return float(
            await self.conn.fetchval(
                "SELECT coalesce(sum(total_plan_time + total_exec_time), 0) FROM pg_stat_statements "
                "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)",
                database,
            )
        )


async def converse(layout: Layout, monitor: Monitor, session_id: str, turns: int) -> None:
    start_wal = await monitor.wal()
    for number in range(1, turns + 1):
        wal, server = await monitor.wal(), await monitor.server_ms(layout.database)
        cpu = time.process_time()
        await layout.take_turn(session_id, number)
        cpu = time.process_time() - cpu
        wal_after, server_after = await monitor.wal(), await monitor.server_ms(layout.database)
        layout.samples.setdefault(number, []).append(Sample(wal_after - wal, cpu, server_after - server))
    layout.wal_total.append(await monitor.wal() - start_wal)


def window(turn_number: int, last: int) -> range:
    """The turns whose median stands for `turn_number`: nine around it (the last nine for the last turn)."""
    if turn_number >= last:
        return range(last - 8, last + 1)
    return range(max(1, turn_number - 4), turn_number + 5)


async def table_sizes(dsn: str, tables: list[str]) -> tuple[int, int]:
    """The tables' total size as the conversations left them, and after a VACUUM (dead rows reclaimed)."""
    conn = await asyncpg.connect(dsn)
    try:
        sizes = []
        for vacuum in (False, True):
            if vacuum:
                await conn.execute("VACUUM")
            sizes.append(sum([int(await conn.fetchval("SELECT pg_total_relation_size($1)", t)) for t in tables]))
        return sizes[0], sizes[1]
    finally:
        await conn.close()


async def main(args: argparse.Namespace) -> None:
    size = len(ModelMessagesTypeAdapter.dump_json(turn(500)))
    print(f"a turn: 4 messages, {size:,} bytes of JSON; {args.turns:,} turns, {args.rounds} round(s)", flush=True)
    with temporary_postgres() as postgres:
        await with_pg_stat_statements(postgres)
        earlier_db = await new_database(postgres, "bench_earlier")
        turns_db = await new_database(postgres, "bench_turns")
        earlier = EarlierPostgresHistoryStore(postgres.dsn(earlier_db))
        current = PostgresHistoryStore(postgres.dsn(turns_db), pool_size=1)
        held = Conversations()
        layouts = [
            Layout(
                "earlier: one row, the whole conversation",
                earlier_db,
                earlier,
                earlier_turn(earlier),
                ["llm_do_session_history"],
            ),
            Layout(
                "turns: a row per turn, a version check",
                turns_db,
                current,
                turns_turn(current, held),
                ["llm_do_session_history", "llm_do_session_history_turns"],
            ),
        ]
        monitor = Monitor(await asyncpg.connect(postgres.dsn()))
        try:
            for number in range(1, args.rounds + 1):
                for layout in layouts if number % 2 else reversed(layouts):  # alternate who goes first
                    began = time.perf_counter()
                    await converse(layout, monitor, f"conv-{number}", args.turns)
                    print(f"round {number}, {layout.name}: {time.perf_counter() - began:.1f} s", flush=True)
            for layout in layouts:
                layout.sizes = await table_sizes(postgres.dsn(layout.database), layout.tables)
        finally:
            await monitor.conn.close()
            await earlier.aclose()
            await current.aclose()
    report(layouts, args)


def report(layouts: list[Layout], args: argparse.Namespace) -> None:
    points = [point for point in (10, 100, 1000) if point <= args.turns] or [args.turns]
    if points[-1] != args.turns:
        points.append(args.turns)
    print(f"\nmedians over the nine turns around each (all rounds; load average {os.getloadavg()[0]:.1f})")
    header = f"{'layout':45} {'turn':>5} {'WAL/turn':>11} {'client CPU':>11} {'server':>10}"
    print(header)
    for layout in layouts:
        firsts: Sample | None = None
        for point in points:
            samples = [sample for number in window(point, args.turns) for sample in layout.samples[number]]
            median = Sample(
                int(statistics.median(sample.wal for sample in samples)),
                statistics.median(sample.cpu for sample in samples),
                statistics.median(sample.server for sample in samples),
            )
            firsts = firsts or median
            print(
                f"{layout.name:45} {point:>5} {median.wal / 1024:>8.1f} KB {median.cpu * 1e3:>8.2f} ms "
                f"{median.server:>7.2f} ms"
            )
        assert firsts is not None
        print(
            f"{'':45} {'ratio':>5} {median.wal / firsts.wal:>11.2f} {median.cpu / firsts.cpu:>11.2f} "
            f"{median.server / firsts.server:>10.2f}   (turn {points[-1]} / turn {points[0]})"
        )
    print("\nthe whole conversation:")
    for layout in layouts:
        wal = statistics.median(layout.wal_total)
        print(
            f"{layout.name:45} WAL {wal / 2**20:8.1f} MB per conversation; tables {layout.sizes[0] / 2**20:.1f} MB, "
            f"{layout.sizes[1] / 2**20:.1f} MB after VACUUM ({args.rounds} conversation(s))"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    asyncio.run(main(parser.parse_args()))
