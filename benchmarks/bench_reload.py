"""Resume after a reload: from the page's GET to the first event it missed.

Starts a throwaway PostgreSQL server (tests/postgres.py) and one process of the example's chat service
(`bank.app:create_chat_app`, uvicorn). Each reload: a person sends "move 1 from A to B"; the page reads the
run's stream up to the `commit` tool call the cashier makes (everything before the question), then goes away
(the response is closed: a reload); the run goes on and asks its question. The page comes back with the AI
SDK's `GET /chat/sessions/{id}/stream`, which replays the run from its start: timed from sending the GET to the
first chunk (`start`) and to the first chunk the page had not seen (the `tool-approval-request`). The baseline
is the same GET for a conversation with no run in flight (204, the ownership check's query included), sent right
after the replay: what any request to the service costs. The question is then answered and the run followed to
its end, untimed.

    python benchmarks/bench_reload.py [--rounds 5] [--reloads 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "service"))

from bench_service import create_database, percentile, start_server, stop, wait_until_up  # noqa: E402

from tests.postgres import temporary_postgres  # noqa: E402

ALICE = {"x-user": "alice"}


async def _session(client: httpx.AsyncClient) -> str:
    opened = await client.post("/chat/sessions", headers=ALICE)
    opened.raise_for_status()
    return str(opened.json()["id"])


SEEN: list[int] = []
"""How many chunks the page had read before each reload."""


async def reload_once(client: httpx.AsyncClient, idle: str) -> tuple[float, float, float]:
    """(baseline, to the first chunk, to the first missed chunk) in seconds, for one reload."""
    session = await _session(client)
    seen = 0
    body = {"text": "move 1 from A to B"}
    async with client.stream("POST", f"/chat/sessions/{session}/messages", json=body, headers=ALICE) as sse:
        async for line in sse.aiter_lines():
            if not line.startswith("data: "):
                continue
            seen += 1
            chunk = json.loads(line.removeprefix("data: "))
            if chunk["type"] == "data-llm-do-tool" and chunk["data"]["tool"] == "commit":
                break  # the cashier's commit has started: the page goes away before its question reaches it
    SEEN.append(seen)
    first = missed = 0.0
    approval = None
    count = 0
    began = time.perf_counter()
    async with client.stream("GET", f"/chat/sessions/{session}/stream", headers=ALICE) as again:
        async for line in again.aiter_lines():
            if not line.startswith("data: "):
                continue
            count += 1
            if count == 1:
                first = time.perf_counter() - began
            if count == seen + 1:
                missed = time.perf_counter() - began
                chunk = json.loads(line.removeprefix("data: "))
                assert chunk["type"] == "tool-approval-request", chunk  # the first event the page missed
                approval = chunk["approvalId"]
    assert approval is not None
    began = time.perf_counter()  # the baseline, the run idle at its question as during the replay
    nothing = await client.get(f"/chat/sessions/{idle}/stream", headers=ALICE)
    baseline = time.perf_counter() - began
    assert nothing.status_code == 204, nothing.text
    decision = {"approval_id": approval, "choice": "approve"}
    async with client.stream("GET", f"/chat/sessions/{session}/stream?follow=true", headers=ALICE) as rest:
        decided = await client.post(f"/chat/sessions/{session}/decisions", json=decision, headers=ALICE)
        assert decided.status_code == 204, decided.text
        async for _ in rest.aiter_lines():
            pass  # to the run's end: the conversation is free for the next message
    return baseline, first, missed


async def main(args: argparse.Namespace) -> None:
    with temporary_postgres() as postgres:
        database = await create_database(postgres)
        server = start_server("chat", "bank.app:create_chat_app", database, 20)
        try:
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
                await wait_until_up(server, client)
                for account, balance in {"A": 1_000_000, "B": 0}.items():
                    (await client.post("/accounts", json={"name": account, "balance": balance})).raise_for_status()
                idle = await _session(client)
                for _ in range(3):
                    await reload_once(client, idle)  # warm-up
                rounds: list[tuple[float, float, float]] = []
                everything: list[float] = []
                for number in range(1, args.rounds + 1):
                    timed = [await reload_once(client, idle) for _ in range(args.reloads)]
                    baseline, first, missed = (statistics.median(column) for column in zip(*timed, strict=True))
                    everything += [row[2] for row in timed]
                    rounds.append((baseline, first, missed))
                    print(
                        f"round {number}: 204 baseline {baseline * 1000:.2f} ms, first chunk {first * 1000:.2f} ms, "
                        f"first missed event {missed * 1000:.2f} ms ({missed / baseline:.2f}x the baseline)",
                        flush=True,
                    )
        finally:
            stop(server)
    baseline, first, missed = (statistics.median(column) for column in zip(*rounds, strict=True))
    ratios = [row[2] / row[0] for row in rounds]
    print(
        f"\n{args.rounds} rounds x {args.reloads} reloads, medians of the rounds' medians (load average "
        f"{os.getloadavg()[0]:.1f}):\n"
        f"  GET with no run in flight (204):    {baseline * 1000:.2f} ms\n"
        f"  GET to the replay's first chunk:    {first * 1000:.2f} ms\n"
        f"  GET to the first missed event:      {missed * 1000:.2f} ms "
        f"(90th percentile of all reloads {percentile(everything, 0.9) * 1000:.2f} ms)\n"
        f"  ratio first missed / 204 baseline:  {statistics.median(ratios):.2f} "
        f"(rounds {min(ratios):.2f} to {max(ratios):.2f})\n"
        f"  chunks the page had read (replayed before the missed one): {min(SEEN)} to {max(SEEN)}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reloads", type=int, default=20)
    asyncio.run(main(parser.parse_args()))
