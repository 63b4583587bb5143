"""Live runs that survive their web process: SIGKILL to a web process while 50 people are at a question or mid-answer,
and what journaling every live run as a job from its first request costs a run.

`kill` (each round on a fresh database of the throwaway PostgreSQL of tests/postgres.py): two uvicorn processes of
`tests.survive_web_app:create_app` (the chat router whose runs are jobs from their first request, `parking=`) and one
`llm-do worker tests.live_app:queue` (concurrency 50); heartbeats every `--heartbeat` seconds, a process silent
`--stalled` seconds is dead. 50 people each send a message to process A, a run of tests/journal_app.py's payer (quote,
step, pay: `pay` asks), and either wait at its question (`question`) or are mid-answer, its second model request
held (`answer`); once each run's responses are journaled, A gets SIGKILL. Measured from the kill (PostgreSQL's clock):
each job queued again (picked up), and its question parked by the worker; counted: runs picked up, questions shown on
process B (`GET /chat/sessions/{id}`) with the id A's page had shown, model requests paid twice (each model notes every
request it receives), and, once B's pages answer every question, the turns ended in their conversations and the
payments made (each once).

`cost` (in this process, one runtime, sessions in PostgreSQL): a run of the payer, its question answered at once,
streamed by `runtime.stream` (not journaled) or by `LiveParking.stream` (a job from its first request, every
response journaled, the job and journal deleted at its end), one at a time and 50 at once, the two alternating.

Run with `make bench-survive` (`--rounds`, `--people`); numbers are published in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.jobs_support import Worker  # noqa: E402
from tests.journal_app import sent  # noqa: E402
from tests.postgres import PostgresServer, temporary_postgres  # noqa: E402
from tests.web_processes import PROCESSES, app_processes, chunks, fresh_database  # noqa: E402

APP = "tests.survive_web_app:create_app"


@dataclass
class Killed:
    case: str
    people: int
    picked_up: int
    pick_up: list[float]
    parked: list[float]
    shown_again: int
    lost: int
    paid_twice: int
    turns_ended: int
    payments: int


async def wait_for(check: Any, what: str, within: float = 120.0) -> None:
    deadline = time.perf_counter() + within
    while not await check():
        if time.perf_counter() > deadline:
            raise AssertionError(f"not after {within}s: {what}")
        await asyncio.sleep(0.05)


async def person(client: httpx.AsyncClient, index: int, case: str, notes: Path, shown: dict[int, str]) -> None:
    """One person's message to process A, read until its question (`question`), or until the process dies."""
    fields: dict[str, Any] = {"notes": str(notes / f"p{index}"), "amount": index + 1}
    if case == "answer":
        fields["hold_live"] = 1
    try:
        async with client.stream(
            "POST", f"/chat/sessions/p{index}/messages", json={"text": json.dumps(fields)}
        ) as response:
            async for chunk in chunks(response):
                if chunk["type"] == "tool-approval-request":
                    shown[index] = str(chunk["approvalId"])
    except httpx.HTTPError:
        pass  # the process died: the stream is cut


async def killed_round(postgres: PostgresServer, case: str, people: int, heartbeat: float, stalled: float) -> Killed:
    name = postgres.new_database_name()
    await fresh_database(postgres.dsn(), name)
    dsn = postgres.dsn(name)
    timing = {"LLM_DO_WORKER_HEARTBEAT": f"{heartbeat:g}", "LLM_DO_WORKER_STALLED_TIMEOUT": f"{stalled:g}"}
    env = {"LLM_DO_JOBS_DATABASE_URL": dsn, **timing}
    with tempfile.TemporaryDirectory() as kept:
        notes = Path(kept)
        worker = Worker("tests.live_app:queue", dsn, notes / "worker.log", concurrency=people, env=timing)
        conn = await asyncpg.connect(dsn)
        try:
            async with app_processes(APP, 2, env, probe="/health") as (one, two):
                limits = httpx.Limits(max_connections=people + 10, max_keepalive_connections=people + 10)
                first = httpx.AsyncClient(base_url=one, timeout=120, limits=limits)
                other = httpx.AsyncClient(base_url=two, timeout=120, limits=limits)
                async with first, other:
                    shown: dict[int, str] = {}
                    streams = [asyncio.create_task(person(first, index, case, notes, shown)) for index in range(people)]
                    want = 3 if case == "question" else 1  # the responses journaled before the kill, per run

                    async def ready() -> bool:
                        if case == "question" and len(shown) < people:
                            return False
                        held = sum("holding payer" in _text(notes / f"p{i}") for i in range(people))
                        if case == "answer" and held < people:
                            return False
                        rows = await conn.fetch(
                            "SELECT job_id, count(*) AS n FROM llm_do_journal GROUP BY job_id HAVING count(*) >= $1",
                            want,
                        )
                        return len(rows) >= people

                    await wait_for(ready, "every run at its point")
                    PROCESSES[one].send_signal(signal.SIGKILL)
                    killed_at = await conn.fetchval("SELECT now()")
                    await asyncio.gather(*streams)

                    async def parked() -> bool:
                        found = await conn.fetchval("SELECT count(*) FROM llm_do_approvals WHERE choice IS NULL")
                        return int(found) >= people

                    await wait_for(parked, "every run's question parked by the worker")
                    pick_up = [
                        (row["at"] - killed_at).total_seconds()
                        for row in await conn.fetch(
                            "SELECT job_id, min(at) AS at FROM procrastinate_events WHERE type = 'deferred_for_retry' "
                            "GROUP BY job_id"
                        )
                    ]
                    parked_at = [
                        (row["asked_at"] - killed_at).total_seconds()
                        for row in await conn.fetch("SELECT asked_at FROM llm_do_approvals WHERE choice IS NULL")
                    ]
                    listed: dict[int, str] = {}
                    for index in range(people):
                        page = (await other.get(f"/chat/sessions/p{index}")).json()
                        for question in page["pending"]:
                            if question["held"] == "parked":
                                listed[index] = question["approval_id"]
                    if case == "question":
                        again = sum(listed.get(index) == approval for index, approval in shown.items())
                        lost = people - again
                    else:
                        again = len(listed)
                        lost = people - again
                    for index, approval in listed.items():
                        answer = {"approval_id": approval, "choice": "approve"}
                        decided = await other.post(f"/chat/sessions/p{index}/decisions", json=answer)
                        decided.raise_for_status()

                    async def ended() -> bool:
                        done = await conn.fetchval("SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'")
                        return int(done) >= len(listed)

                    await wait_for(ended, "every job's turn ended")
                    turns = 0
                    for index in range(people):
                        page = (await other.get(f"/chat/sessions/p{index}")).json()
                        texts = [
                            part.get("text", "")
                            for message in page["messages"][1:]
                            for part in message["parts"]
                            if part["type"] == "text"
                        ]
                        turns += any(text.startswith("done: ") for text in texts)
        finally:
            await conn.close()
            worker.stop()
        counts: Counter[tuple[str, int]] = Counter()
        payments = 0
        for index in range(people):
            counts.update({(f"p{index}", key[1]): n for key, n in sent(notes / f"p{index}").items()})
            payments += _text(notes / f"p{index}").count("paid ")
    return Killed(
        case=case,
        people=people,
        picked_up=len(pick_up),
        pick_up=pick_up,
        parked=parked_at,
        shown_again=again,
        lost=lost,
        paid_twice=sum(n - 1 for n in counts.values() if n > 1),
        turns_ended=turns,
        payments=payments,
    )


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


# -- the cost of journaling -----------------------------------------------------------------------------------------


async def cost(postgres: PostgresServer, rounds: int, runs: int, crowd: int) -> dict[str, dict[str, list[float]]]:
    """Seconds per run, one at a time and `crowd` at once, for `plain` and `journaled` runs, alternating."""
    from llm_do import ApprovalRequested
    from llm_do.jobs import JobQueue, LiveParking
    from tests.live_app import ENTRIES, QUEUE, live_runtime

    name = postgres.new_database_name()
    await fresh_database(postgres.dsn(), name)
    dsn = postgres.dsn(name)
    found: dict[str, dict[str, list[float]]] = {
        arm: {"alone": [], "crowd": [], "cpu": []} for arm in ("plain", "journaled")
    }
    with tempfile.TemporaryDirectory() as kept:
        notes = Path(kept)
        async with (
            JobQueue(dsn, entries=ENTRIES, queue=QUEUE, approvals="park", pool_size=crowd + 4) as queue,
        ):
            await queue.apply_schema()
            async with live_runtime(dsn) as runtime, LiveParking(queue, runtime) as parking:
                counter = 0

                async def one(arm: str) -> None:
                    nonlocal counter
                    counter += 1
                    text = json.dumps({"notes": str(notes / "n"), "amount": 1})
                    session = f"s{counter}"
                    opened = (
                        parking.stream("payer", text, session=session)
                        if arm == "journaled"
                        else runtime.stream("payer", text, session=session)
                    )
                    async with opened as run:
                        async for event in run:
                            if isinstance(event, ApprovalRequested):
                                run.decide(event.request.approval_id, "approve")
                    await runtime.sessions[session].aclose()

                for arm in ("plain", "journaled"):  # warm-up
                    for _ in range(5):
                        await one(arm)
                for _ in range(rounds):
                    for arm in ("plain", "journaled"):
                        cpu = time.process_time()
                        for _ in range(runs):
                            started = time.perf_counter()
                            await one(arm)
                            found[arm]["alone"].append(time.perf_counter() - started)
                        found[arm]["cpu"].append((time.process_time() - cpu) / runs)
                        started = time.perf_counter()
                        await asyncio.gather(*(one(arm) for _ in range(crowd)))
                        found[arm]["crowd"].append((time.perf_counter() - started) / crowd)
    return found


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f} ms"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--people", type=int, default=50)
    parser.add_argument("--heartbeat", type=float, default=1.0)
    parser.add_argument("--stalled", type=float, default=5.0)
    parser.add_argument("--cost-rounds", type=int, default=5)
    parser.add_argument("--cost-runs", type=int, default=40)
    parser.add_argument("--skip", choices=("kill", "cost"), default=None)
    options = parser.parse_args()
    os.environ.setdefault("LLM_DO_WORKER_HEARTBEAT", f"{options.heartbeat:g}")
    with temporary_postgres() as postgres:
        if options.skip != "kill":
            killed: list[Killed] = []
            for index in range(options.rounds):
                for case in ("question", "answer"):
                    done = await killed_round(postgres, case, options.people, options.heartbeat, options.stalled)
                    killed.append(done)
                    print(
                        f"round {index + 1} {case}: picked up {done.picked_up}/{done.people} "
                        f"(median {statistics.median(done.pick_up):.2f} s, last {max(done.pick_up):.2f} s), "
                        f"questions parked again by {max(done.parked):.2f} s, shown again with their id "
                        f"{done.shown_again}, lost {done.lost}, paid twice {done.paid_twice}, "
                        f"turns ended {done.turns_ended}, payments {done.payments}",
                        flush=True,
                    )
            print()
            print(
                "| case | runs | picked up | kill to pick-up, median (last) | to the question parked again, median "
                "(last) | questions shown again, same id | lost | requests paid twice | turns ended | payments |"
            )
            print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
            for case in ("question", "answer"):
                mine = [each for each in killed if each.case == case]
                picks = [value for each in mine for value in each.pick_up]
                parks = [value for each in mine for value in each.parked]
                print(
                    f"| {case} | {sum(each.people for each in mine)} | {sum(each.picked_up for each in mine)} "
                    f"| {statistics.median(picks):.2f} s ({max(picks):.2f}) "
                    f"| {statistics.median(parks):.2f} s ({max(parks):.2f}) "
                    f"| {sum(each.shown_again for each in mine)} | {sum(each.lost for each in mine)} "
                    f"| {sum(each.paid_twice for each in mine)} | {sum(each.turns_ended for each in mine)} "
                    f"| {sum(each.payments for each in mine)} |"
                )
            print(
                f"\nheartbeat {options.heartbeat:g} s, stalled timeout {options.stalled:g} s, {options.rounds} rounds"
            )
        if options.skip != "cost":
            crowd = options.people
            found = await cost(postgres, options.cost_rounds, options.cost_runs, crowd)
            plain, journaled = found["plain"], found["journaled"]
            print()
            print("| a run of the payer (4 model requests, a question) | not journaled | journaled as a job | ratio |")
            print("|---|---:|---:|---:|")
            for key, label in (
                ("alone", "one at a time, wall time per run"),
                ("cpu", "one at a time, this process's CPU per run"),
                ("crowd", f"{crowd} at once, wall time per run"),
            ):
                ratio = statistics.median(journaled[key]) / statistics.median(plain[key])
                print(f"| {label} | {_ms(plain[key])} | {_ms(journaled[key])} | {ratio:.2f}x |")
            print(
                f"\n{options.cost_rounds} rounds of {options.cost_runs} runs one at a time and {crowd} at once, per arm"
            )


if __name__ == "__main__":
    asyncio.run(main())
