"""A conversation's run from any web process: a reload that lands on another process, and a stream read there.

Starts a throwaway PostgreSQL server (tests/postgres.py) and real uvicorn processes.

1. A reload on another process. Two processes of the example's chat service (`bank.app:create_chat_app`). Each
   reload: a person sends "move 1 from A to B" to the first process and reads its stream to the `commit` question;
   the page reloads onto the same process or onto the other one (alternately), and the time is taken from the page's
   first request to the question shown:
   - over HTTP, what the page asks: `GET /chat/sessions/{id}` (the conversation, its open questions) then
     `GET .../stream?follow=true` to the `tool-approval-request`;
   - in chromium (`--browser`), the page itself: from the navigation's start (`performance.now()`'s origin) to the
     question's box in the page (a `MutationObserver` notes it).
   The question is then answered there and the run followed to its end, untimed.
2. What a streamed event costs across processes. `benchmarks/anywhere_app.py`'s talker streams `--words` words (a
   text delta each), side by side, round by round:
   - `today`: the router's runs read from the `LiveRun`, encoded for each reader, read where the run runs (the
     in-process resumable stream as it was before runs were shared: the baseline);
   - `local`: the run's stream encoded once into its log (`LocalRuns`), read there;
   - `postgres, same`: `chat_router(database_url=...)` (`PostgresRuns`), read in the process running it;
   - `postgres, other`: the same, the message sent to one process (its response closed at once) and the run read in
     the other one, from its start, through PostgreSQL.
   Timed from the message's request to the reader's last chunk; the CPU time of the uvicorn processes and of
   PostgreSQL's is read from /proc around each run. Each per streamed chunk.

    python benchmarks/bench_anywhere.py [--rounds 5] [--reloads 10] [--runs 5] [--words 2000] [--browser]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.postgres import PostgresServer, temporary_postgres  # noqa: E402
from tests.web_processes import PROCESSES, app_processes, chat_processes, fresh_database  # noqa: E402

ALICE = {"x-user": "alice"}
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU seconds the processes `pids` have used so far."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICKS


def postgres_pids(postgres: PostgresServer) -> list[int]:
    """The server's processes: its postmaster and the postmaster's children (the backends, the writers)."""
    assert postgres.data_dir is not None
    master = int((postgres.data_dir / "postmaster.pid").read_text().split()[0])
    found = [master]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == master:
            found.append(int(stat.parent.name))
    return found


async def data(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            payload = line.removeprefix("data: ")
            if payload == "[DONE]":
                return
            yield json.loads(payload)


# -- 1. a reload on another process -----------------------------------------------------------------------------


async def asked_on(client: httpx.AsyncClient) -> str:
    """A new conversation on `client`'s process, its message sent and read to its question (then closed): its id."""
    opened = await client.post("/chat/sessions", headers=ALICE)
    opened.raise_for_status()
    session = str(opened.json()["id"])
    body = {"text": "move 1 from A to B"}
    async with client.stream("POST", f"/chat/sessions/{session}/messages", json=body, headers=ALICE) as sse:
        async for chunk in data(sse):
            if chunk["type"] == "tool-approval-request":
                break
    return session


async def answer_and_finish(client: httpx.AsyncClient, session: str, approval: str) -> None:
    decision = {"approval_id": approval, "choice": "approve"}
    async with client.stream("GET", f"/chat/sessions/{session}/stream?follow=true", headers=ALICE) as rest:
        decided = await client.post(f"/chat/sessions/{session}/decisions", json=decision, headers=ALICE)
        assert decided.status_code == 204, decided.text
        async for _ in data(rest):
            pass


async def reload_over_http(start: httpx.AsyncClient, target: httpx.AsyncClient) -> float:
    """Seconds from the page's first request to the question, over HTTP, on `target`."""
    session = await asked_on(start)
    began = time.perf_counter()
    saved = (await target.get(f"/chat/sessions/{session}", headers=ALICE)).json()
    assert len(saved["pending"]) == 1, saved
    approval = None
    async with target.stream("GET", f"/chat/sessions/{session}/stream?follow=true", headers=ALICE) as sse:
        async for chunk in data(sse):
            if chunk["type"] == "tool-approval-request":
                approval = chunk["approvalId"]
                break
    took = time.perf_counter() - began
    assert approval is not None
    await answer_and_finish(target, session, approval)
    return took


NOTE_QUESTION = """
const fetched = window.fetch;
window.fetch = (...args) => {
  if (window.__asked === undefined) window.__asked = performance.now();
  return fetched(...args);
};
new MutationObserver((changes, watching) => {
  if (document.querySelector(".approval button.approve")) {
    window.__question_shown = performance.now();
    watching.disconnect();
  }
}).observe(document, { childList: true, subtree: true });
"""


async def reload_in_browser(page: Any, start: httpx.AsyncClient, target: str) -> tuple[float, float]:
    """Seconds from the navigation's start, and from the page's first request for the conversation, to the
    question's box, in chromium, on `target`."""
    session = await asked_on(start)
    await page.goto(f"{target}/chat?user=alice&session={session}")
    await page.wait_for_selector(".approval button.approve", timeout=20_000)
    shown = float(await page.evaluate("window.__question_shown"))
    asked = float(await page.evaluate("window.__asked"))
    approval = await page.locator(".approval").first.get_attribute("data-approval-id")
    await page.click(".approval button.approve")
    await page.wait_for_selector(".message.assistant[data-done=true]", timeout=20_000)
    assert approval is not None
    return shown / 1000, (shown - asked) / 1000


async def reloads(postgres: PostgresServer, args: argparse.Namespace) -> None:
    name = postgres.new_database_name()
    await fresh_database(postgres.dsn(), name)
    async with (
        chat_processes(postgres.dsn(name), 2, LLM_DO_POOL_SIZE="20") as (one, two),
        httpx.AsyncClient(base_url=one, timeout=60) as first,
        httpx.AsyncClient(base_url=two, timeout=60) as other,
    ):
        for account, balance in {"A": 1_000_000, "B": 0}.items():
            (await first.post("/accounts", json={"name": account, "balance": balance})).raise_for_status()
        for _ in range(3):  # warm-up
            await reload_over_http(first, first)
            await reload_over_http(first, other)
        same: list[float] = []
        elsewhere: list[float] = []
        for number in range(1, args.rounds + 1):
            here: list[float] = []
            there: list[float] = []
            for _ in range(args.reloads):
                here.append(await reload_over_http(first, first))
                there.append(await reload_over_http(first, other))
            same.append(statistics.median(here))
            elsewhere.append(statistics.median(there))
            print(
                f"round {number}: reload over HTTP, same process {same[-1] * 1000:.2f} ms, other process "
                f"{elsewhere[-1] * 1000:.2f} ms ({elsewhere[-1] / same[-1]:.2f}x)",
                flush=True,
            )
        print(
            f"reload over HTTP, medians of the rounds' medians: same process {statistics.median(same) * 1000:.2f}"
            f" ms, other process {statistics.median(elsewhere) * 1000:.2f} ms (ratio "
            f"{statistics.median(b / a for a, b in zip(same, elsewhere, strict=True)):.2f}); load average "
            f"{os.getloadavg()[0]:.1f}",
            flush=True,
        )
        if args.browser:
            await browser_reloads(first, one, two, args)


async def browser_reloads(start: httpx.AsyncClient, one: str, two: str, args: argparse.Namespace) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        try:
            page = await browser.new_page()
            await page.add_init_script(NOTE_QUESTION)
            await page.goto(f"{one}/chat?user=alice")
            for _ in range(2):  # warm-up
                await reload_in_browser(page, start, one)
                await reload_in_browser(page, start, two)
            same: list[tuple[float, float]] = []
            elsewhere: list[tuple[float, float]] = []
            for number in range(1, args.rounds + 1):
                count = max(3, args.reloads // 2)
                here = [await reload_in_browser(page, start, one) for _ in range(count)]
                there = [await reload_in_browser(page, start, two) for _ in range(count)]
                same.append(medians(here))
                elsewhere.append(medians(there))
                print(
                    f"round {number}: reload in chromium, navigation (first request) to the question shown: same "
                    f"process {same[-1][0] * 1000:.1f} ms ({same[-1][1] * 1000:.1f}), other process "
                    f"{elsewhere[-1][0] * 1000:.1f} ms ({elsewhere[-1][1] * 1000:.1f})",
                    flush=True,
                )
            total, asked = medians(same)
            total_there, asked_there = medians(elsewhere)
            print(
                f"reload in chromium, medians of the rounds' medians: navigation to the question shown, same process "
                f"{total * 1000:.1f} ms, other process {total_there * 1000:.1f} ms; the page's first request for the "
                f"conversation to the question shown, same process {asked * 1000:.1f} ms, other process "
                f"{asked_there * 1000:.1f} ms; load average {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        finally:
            await browser.close()


def medians(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(pair[0] for pair in pairs), statistics.median(pair[1] for pair in pairs)


# -- 2. what a streamed event costs across processes -------------------------------------------------------------


async def read_to_end(response: httpx.Response) -> int:
    count = 0
    async for _ in data(response):
        count += 1
    return count


async def read_here(client: httpx.AsyncClient, conversation: str) -> int:
    """Send the message and read its stream where the run runs: how many chunks came."""
    async with client.stream("POST", f"/chats/{conversation}/messages", json={"text": "talk"}) as sse:
        assert sse.status_code == 200, await sse.aread()
        return await read_to_end(sse)


async def read_elsewhere(client: httpx.AsyncClient, other: httpx.AsyncClient, conversation: str) -> int:
    """Send the message to one process (its response closed at once) and read the run in the other one."""
    async with client.stream("POST", f"/chats/{conversation}/messages", json={"text": "talk"}) as sse:
        assert sse.status_code == 200, await sse.aread()
    while True:  # (the run's row is written with its first chunks)
        async with other.stream("GET", f"/chats/{conversation}/stream", params={"follow": "true"}) as sse:
            if sse.status_code == 200:
                return await read_to_end(sse)
        await asyncio.sleep(0.001)


Variant = Callable[[str], Awaitable[int]]


async def events_cost(postgres: PostgresServer, args: argparse.Namespace) -> None:
    name = postgres.new_database_name()
    await fresh_database(postgres.dsn(), name)
    dsn = postgres.dsn(name)
    words = {"ANYWHERE_WORDS": str(args.words)}
    target = "benchmarks.anywhere_app:create_app"
    async with (
        app_processes(target, 1, {**words, "ANYWHERE_RUNS": "events"}, probe="/health") as (today,),
        app_processes(target, 1, {**words, "ANYWHERE_RUNS": "local"}, probe="/health") as (local,),
        app_processes(
            target, 2, {**words, "ANYWHERE_RUNS": "postgres", "ANYWHERE_DATABASE_URL": dsn}, probe="/health"
        ) as (one, two),
    ):
        clients = {url: httpx.AsyncClient(base_url=url, timeout=120) for url in (today, local, one, two)}
        database = postgres_pids(postgres)
        variants: dict[str, tuple[Variant, list[str]]] = {
            "today": (lambda c: read_here(clients[today], c), [today]),
            "local": (lambda c: read_here(clients[local], c), [local]),
            "postgres, same": (lambda c: read_here(clients[one], c), [one, two]),
            "postgres, other": (lambda c: read_elsewhere(clients[one], clients[two], c), [one, two]),
        }
        wall: dict[str, list[float]] = {name: [] for name in variants}
        cpu: dict[str, list[float]] = {name: [] for name in variants}
        counter = 0
        try:
            for round_number in range(args.rounds + 1):  # round 0 warms up
                for variant, (read, urls) in variants.items():
                    pids = [PROCESSES[url].pid for url in urls] + database
                    walls: list[float] = []
                    cpus: list[float] = []
                    for _ in range(args.runs):
                        counter += 1
                        before = cpu_seconds(pids)
                        began = time.perf_counter()
                        chunks = await read(f"c{counter}")
                        took = time.perf_counter() - began
                        used = cpu_seconds(pids) - before
                        assert chunks >= args.words, (variant, chunks)
                        walls.append(took / chunks)
                        cpus.append(used / chunks)
                    if round_number:
                        wall[variant].append(statistics.median(walls))
                        cpu[variant].append(statistics.median(cpus))
                if round_number:
                    print(
                        f"round {round_number}: "
                        + ", ".join(
                            f"{variant} {wall[variant][-1] * 1e6:.1f} us/chunk (CPU {cpu[variant][-1] * 1e6:.1f})"
                            for variant in variants
                        ),
                        flush=True,
                    )
        finally:
            for client in clients.values():
                await client.aclose()
    base_wall = wall["today"]
    base_cpu = cpu["today"]
    print(f"\nper streamed chunk ({args.words} words a run), medians of {args.rounds} rounds x {args.runs} runs:")
    for variant in variants:
        wall_ratio = statistics.median(a / b for a, b in zip(wall[variant], base_wall, strict=True))
        cpu_ratio = statistics.median(a / b for a, b in zip(cpu[variant], base_cpu, strict=True))
        print(
            f"  {variant:16} wall {statistics.median(wall[variant]) * 1e6:6.1f} us ({wall_ratio:.2f}x today), "
            f"CPU {statistics.median(cpu[variant]) * 1e6:6.1f} us ({cpu_ratio:.2f}x today)"
        )
    print(f"load average {os.getloadavg()[0]:.1f}")


async def main(args: argparse.Namespace) -> None:
    with temporary_postgres() as postgres:
        if not args.only or args.only == "reload":
            await reloads(postgres, args)
        if not args.only or args.only == "events":
            await events_cost(postgres, args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reloads", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--words", type=int, default=2000)
    parser.add_argument("--browser", action="store_true", help="time the reload in chromium too")
    parser.add_argument("--only", choices=["reload", "events"])
    asyncio.run(main(parser.parse_args()))
