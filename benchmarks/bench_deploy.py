"""A deploy with people waiting: SIGTERM to a web process while 50 live runs wait for their people's approvals.

Starts a throwaway PostgreSQL server (tests/postgres.py) and, for each round, one uvicorn process of the test chat
service `tests.live_web_app:create_app` (sessions in PostgreSQL, live runs of tests/journal_app.py's payer, whose
`pay` asks) on a fresh database, with `--timeout-graceful-shutdown` as the bound. 50 people each start a run in a
session of their own and wait at its question; then the process gets SIGTERM. Measured: the time from the signal to
the process's exit, and to the last stream's end; counted: each question parked (the stream's `data-llm-do-parked`,
and the job `awaiting_approval` in PostgreSQL) or denied (the question's part `denied`, with the reason), each
person told (the stream ends with `finish`, not cut), and the lost ones (neither). Two cases:

- `park`: the runs stream through `LiveParking` (a queue is configured): each question parks as a job;
- `deny`: plain live runs (no queue): each question is denied, the model reads why (`Runtime.stop_asking`).

Run with `make bench-deploy` (`--rounds`, `--people`, `--bound`); numbers are published in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.postgres import PostgresServer, temporary_postgres  # noqa: E402
from tests.web_processes import PROCESSES, app_processes, chunks, fresh_database  # noqa: E402

APP = "tests.live_web_app:create_app"


@dataclass
class Round:
    case: str
    exit_seconds: float
    streams_seconds: float
    parked: int
    denied: int
    told: int
    lost: int
    jobs_parked: int
    exit_code: int | None


async def one_person(
    client: httpx.AsyncClient, index: int, case: str, notes: Path, asked: asyncio.Event, all_asked: asyncio.Event
) -> list[dict[str, Any]]:
    """One person's run: streamed until its question, then read to its end once the process is told to stop."""
    user = f"u{index}"
    body = {"text": json.dumps({"notes": str(notes / user), "amount": index})}
    path = f"/sessions/{user}-1/messages" + ("" if case == "park" else "?park=0")
    seen: list[dict[str, Any]] = []
    async with client.stream("POST", path, json=body, headers={"x-user": user}) as response:
        response.raise_for_status()
        async for chunk in chunks(response):
            seen.append(chunk)
            if chunk["type"] == "tool-approval-request":
                asked.set()
                await all_asked.wait()
    return seen


def outcome(seen: list[dict[str, Any]]) -> str:
    """`parked`, `denied` or `lost`, as the person's page shows it."""
    if any(chunk["type"] == "data-llm-do-parked" for chunk in seen):
        return "parked"
    for chunk in seen:
        data = chunk.get("data") or {}
        if chunk["type"] == "data-llm-do-approval" and data.get("state") == "denied" and data.get("why"):
            return "denied"
    return "lost"


async def one_round(postgres: PostgresServer, case: str, people: int, bound: float) -> Round:
    name = postgres.new_database_name()
    await fresh_database(postgres.dsn(), name)
    dsn = postgres.dsn(name)
    env = {"LLM_DO_JOBS_DATABASE_URL": dsn, "LLM_DO_JOBS_PARK_AFTER": "300"}  # only the signal parks
    args = ("--timeout-graceful-shutdown", f"{bound:g}")
    with tempfile.TemporaryDirectory() as notes:
        async with app_processes(APP, 1, env, probe="/health", args=args) as (url,):
            process = PROCESSES[url]
            limits = httpx.Limits(max_connections=people + 10, max_keepalive_connections=people + 10)
            async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
                events = [asyncio.Event() for _ in range(people)]
                all_asked = asyncio.Event()
                runs = [
                    asyncio.create_task(one_person(client, index, case, Path(notes), events[index], all_asked))
                    for index in range(people)
                ]
                await asyncio.wait_for(asyncio.gather(*(event.wait() for event in events)), 120)
                all_asked.set()
                await asyncio.sleep(0.2)  # every stream is read again: the questions wait
                process.send_signal(signal.SIGTERM)
                signalled = time.perf_counter()
                results = await asyncio.gather(*runs, return_exceptions=True)
                streams_done = time.perf_counter()
                code = await asyncio.wait_for(process.wait(), bound + 30)
                exited = time.perf_counter()
    seen = [result if isinstance(result, list) else [] for result in results]
    outcomes = [outcome(each) for each in seen]
    told = sum(bool(each) and each[-1]["type"] == "finish" for each in seen)
    shown = {str(chunk["approvalId"]) for each in seen for chunk in each if chunk["type"] == "tool-approval-request"}
    conn = await asyncpg.connect(dsn)
    try:  # the parked jobs: each waits on a question its person was shown, under the id the page has
        rows = await conn.fetch(
            "SELECT a.job_id, a.approval_id FROM llm_do_approvals a JOIN procrastinate_jobs j "
            "ON j.id = a.job_id WHERE a.choice IS NULL AND j.status = 'failed'"
        )
    finally:
        await conn.close()
    jobs = len({row["job_id"] for row in rows if row["approval_id"] in shown})
    return Round(
        case=case,
        exit_seconds=exited - signalled,
        streams_seconds=streams_done - signalled,
        parked=outcomes.count("parked"),
        denied=outcomes.count("denied"),
        told=told,
        lost=outcomes.count("lost") + (people - told if told < people else 0),
        jobs_parked=jobs,
        exit_code=code,
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--people", type=int, default=50)
    parser.add_argument("--bound", type=float, default=30.0, help="uvicorn's --timeout-graceful-shutdown, seconds")
    options = parser.parse_args()
    rounds: list[Round] = []
    with temporary_postgres() as postgres:
        for index in range(options.rounds):
            for case in ("park", "deny"):
                done = await one_round(postgres, case, options.people, options.bound)
                rounds.append(done)
                print(
                    f"round {index + 1} {case}: exit {done.exit_seconds:.2f}s, "
                    f"streams ended {done.streams_seconds:.2f}s, parked {done.parked} (jobs {done.jobs_parked}), "
                    f"denied {done.denied}, told {done.told}, "
                    f"lost {done.lost}, exit code {done.exit_code}",
                    flush=True,
                )
    print()
    print("| case | SIGTERM to exit, median (min-max) | to the last stream's end | parked | denied | told | lost |")
    print("|---|---|---|---|---|---|---|")
    for case in ("park", "deny"):
        mine = [each for each in rounds if each.case == case]
        exits = [each.exit_seconds for each in mine]
        streams = [each.streams_seconds for each in mine]
        print(
            f"| {case} | {statistics.median(exits):.2f} s ({min(exits):.2f}-{max(exits):.2f}) "
            f"| {statistics.median(streams):.2f} s | {sum(each.parked for each in mine)} "
            f"| {sum(each.denied for each in mine)} | {sum(each.told for each in mine)} "
            f"| {sum(each.lost for each in mine)} |"
        )
    print(f"\n{options.rounds} rounds per case, {options.people} people each, bound {options.bound:g} s")


if __name__ == "__main__":
    asyncio.run(main())
