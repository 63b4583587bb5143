"""Live runs on the web: how fast a decision reaches its run, and many people waiting at once.

Starts a throwaway PostgreSQL server (tests/postgres.py) and two processes of the example's chat
service (`bank.app:create_chat_app`, uvicorn), then measures:

1. Decision latency, from a decision given to the tool running again:
   - in the library: `LiveRun.decide` to the gated tool's body starting (one process, no HTTP);
   - over HTTP, the decision POSTed to the process that streams the run;
   - over HTTP, the decision POSTed to the other process, relayed through PostgreSQL LISTEN/NOTIFY.
   Over HTTP the end is the moment the stream brings the decision back (`data-llm-do-approval`,
   sent as the run resumes, right before the tool runs): an upper bound that includes the stream's
   delivery to the client.
2. Many sessions at once: 200 concurrent chat sessions, each with a pending approval, while a
   closed loop of `POST /transfer` requests (no approvals) runs for the same window. Side by side:
   transfers alone; with the 200 sessions answered at once; with them answered after a random delay
   (the runs wait). The server's resident memory after each round shows whether it stays flat.

Run with `make bench-sessions`; numbers are published in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "service"))

from bench_service import Server, create_database, percentile, start_server, stop, wait_until_up  # noqa: E402
from pydantic_ai import Agent  # noqa: E402

from llm_do import AgentEntry, ApprovalRequested, Runtime, ToolPolicy, Toolset, tool  # noqa: E402
from llm_do.testing import ScriptedModel, Step, tool_call  # noqa: E402
from tests.postgres import temporary_postgres  # noqa: E402

CHAT_APP = "bank.app:create_chat_app"
WINDOW = 6.0
"""Seconds of each round of the many-sessions part."""


# -- 1. decision latency -------------------------------------------------------------------------


class Desk(Toolset):
    def __init__(self, started: list[float]) -> None:
        self.started = started

    @tool
    def act(self) -> str:
        """Do the gated thing."""
        self.started.append(time.perf_counter())
        return "done"


async def library_latency(runs: int) -> list[float]:
    """`LiveRun.decide` to the tool's body starting, in one process."""
    started: list[float] = []
    steps: list[Step] = [tool_call("act"), "ok"] * runs
    clerk = AgentEntry(Agent(ScriptedModel(*steps)), name="clerk", toolsets=["desk"])
    latencies: list[float] = []
    runtime = Runtime(
        None, entries=[clerk], toolsets={"desk": lambda: Desk(started)}, policies={"desk": ToolPolicy(default="ask")}
    )
    async with runtime:
        for _ in range(runs):
            async with runtime.stream("clerk", "go") as run:
                async for event in run:
                    if isinstance(event, ApprovalRequested):
                        decided = time.perf_counter()
                        run.decide(event.request.approval_id, "approve")
                await run.result()
            latencies.append(started[-1] - decided)
    return latencies


async def chunks(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    async for line in response.aiter_lines():
        if line.startswith("data: ") and line != "data: [DONE]":
            yield json.loads(line.removeprefix("data: "))


async def chat_once(
    streaming: httpx.AsyncClient, deciding: httpx.AsyncClient, user: str, text: str, delay: float = 0.0
) -> float:
    """One session, one message, its approval POSTed (after `delay`) to `deciding`: seconds from that POST
    to the stream saying the run resumed."""
    headers = {"x-user": user}
    opened = await streaming.post("/chat/sessions", headers=headers)
    session = opened.json()["id"]
    posted = resumed = 0.0
    decisions: list[asyncio.Task[httpx.Response]] = []
    async with streaming.stream(
        "POST", f"/chat/sessions/{session}/messages", json={"text": text}, headers=headers
    ) as response:
        async for chunk in chunks(response):
            if chunk["type"] == "tool-approval-request":
                if delay:
                    await asyncio.sleep(delay)
                posted = time.perf_counter()
                body = {"approval_id": chunk["approvalId"], "choice": "approve"}
                url = f"/chat/sessions/{session}/decisions"
                decisions.append(asyncio.ensure_future(deciding.post(url, json=body, headers=headers)))
            elif chunk["type"] == "data-llm-do-approval" and chunk["data"]["state"] == "approved":
                resumed = time.perf_counter()
            elif chunk["type"] == "error":
                raise RuntimeError(f"the chat run failed: {chunk['errorText']}")
    for decision in decisions:
        answer = await decision
        if answer.status_code != 204:
            raise RuntimeError(f"the decision was refused: {answer.status_code} {answer.text}")
    return resumed - posted


async def http_latency(one: Server, two: Server, runs: int, relayed: bool) -> list[float]:
    async with httpx.AsyncClient(base_url=one.url, timeout=60) as a, httpx.AsyncClient(base_url=two.url) as b:
        return [await chat_once(a, b if relayed else a, f"user{n}", "move 1 from A to B") for n in range(runs)]


# -- 2. many sessions at once ----------------------------------------------------------------------


async def transfer_loop(client: httpx.AsyncClient, until: float, worker: int, done: list[int]) -> None:
    number = 0
    while time.perf_counter() < until:
        number += 1
        reference = f"w{worker}-{number}-{random.random()}"
        body = {"reference": reference, "source": f"C{worker}", "target": f"D{worker}", "amount": 1}
        response = await client.post("/transfer", json=body)
        if response.status_code != 200:
            raise RuntimeError(f"transfer failed: {response.status_code} {response.text}")
        done[0] += 1


async def round_of(server: Server, sessions: int, max_delay: float | None, concurrency: int) -> dict[str, float]:
    """Transfers in a closed loop for WINDOW seconds, beside `sessions` chats (answered after up to
    `max_delay` seconds; None: no chats)."""
    limits = httpx.Limits(max_connections=sessions + concurrency + 10, max_keepalive_connections=sessions + 10)
    async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits) as client:
        done = [0]
        server_cpu, client_cpu = server.cpu_seconds(), time.process_time()
        start = time.perf_counter()
        until = start + WINDOW
        loops = [asyncio.ensure_future(transfer_loop(client, until, n, done)) for n in range(concurrency)]
        delays = [] if max_delay is None else [random.uniform(0, max_delay) for _ in range(sessions)]
        chats = [
            asyncio.ensure_future(chat_once(client, client, f"u{n}", f"move 1 from S{n} to T{n}", delay))
            for n, delay in enumerate(delays)
        ]
        await asyncio.gather(*loops)
        rate = done[0] / (time.perf_counter() - start)
        await asyncio.gather(*chats)
        ended = time.perf_counter() - start
        server_cpu, client_cpu = server.cpu_seconds() - server_cpu, time.process_time() - client_cpu
    await asyncio.sleep(1.0)
    return {
        "transfers_per_s": rate,
        "chats_done_s": ended,
        "server_cpu_s": server_cpu,
        "client_cpu_s": client_cpu,
        "rss_mib": server.rss() / 2**20,
    }


async def main(args: argparse.Namespace) -> None:
    library = await library_latency(args.runs)
    with temporary_postgres() as postgres:
        database = await create_database(postgres)
        one = start_server("one", CHAT_APP, database, args.pool_size)
        two = start_server("two", CHAT_APP, database, args.pool_size)
        try:
            async with httpx.AsyncClient() as client:
                await wait_until_up(one, client)
                await wait_until_up(two, client)
                # accounts of their own for each session and each transfer loop: a pending approval on
                # `commit` holds its transaction, and with it the rows it locked
                pairs = [("A", "B")] + [(f"S{n}", f"T{n}") for n in range(args.sessions)]
                pairs += [(f"C{n}", f"D{n}") for n in range(args.concurrency)]
                for source, target in pairs:
                    await client.post(f"{one.url}/accounts", json={"name": source, "balance": 10**9})
                    await client.post(f"{one.url}/accounts", json={"name": target, "balance": 0})
            await http_latency(one, two, 10, relayed=True)  # warm-up
            same = await http_latency(one, two, args.runs, relayed=False)
            relayed = await http_latency(one, two, args.runs, relayed=True)
            print("decision latency (ms)      median    p95   runs")
            for name, values in (("library, in process", library), ("HTTP, same process", same)):
                print(
                    f"{name:<24} {1000 * statistics.median(values):8.2f} {1000 * percentile(values, 0.95):6.2f}", end=""
                )
                print(f" {len(values):6d}")
            name = "HTTP, other process (PG)"
            print(
                f"{name:<24} {1000 * statistics.median(relayed):8.2f} {1000 * percentile(relayed, 0.95):6.2f}", end=""
            )
            print(f" {len(relayed):6d}")

            print(f"\n{args.sessions} sessions at once, {WINDOW:g} s window, {args.concurrency} transfer loops")
            print(f"start: rss {one.rss() / 2**20:.1f} MiB")
            rounds = [
                ("transfers alone", None),
                (f"+ {args.sessions} chats answered at once", 0.0),
                (f"+ {args.sessions} chats answered after 0-{args.max_delay:g} s", args.max_delay),
                (f"+ {args.sessions} chats answered after 0-{args.max_delay:g} s (again)", args.max_delay),
                ("transfers alone (again)", None),
            ]
            print(
                f"{'round':<46} {'transfers/s':>11} {'chats end s':>11} {'server CPU s':>12} {'client CPU s':>12}",
                end="",
            )
            print(f" {'rss MiB':>8}")
            for name, delay in rounds:
                outcome = await round_of(one, args.sessions, delay, args.concurrency)
                chats = f"{outcome['chats_done_s']:11.1f}" if delay is not None else f"{'-':>11}"
                print(f"{name:<46} {outcome['transfers_per_s']:11.1f} {chats}", end="")
                print(f" {outcome['server_cpu_s']:12.1f} {outcome['client_cpu_s']:12.1f} {outcome['rss_mib']:8.1f}")
        finally:
            stop(one)
            stop(two)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="decisions per latency figure")
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--max-delay", type=float, default=5.0, help="longest wait before a chat's answer (s)")
    parser.add_argument("--concurrency", type=int, default=8, help="transfer loops beside the chats")
    parser.add_argument(
        "--pool-size", type=int, default=240, help="connections per server: each pending commit holds one"
    )
    asyncio.run(main(parser.parse_args()))
