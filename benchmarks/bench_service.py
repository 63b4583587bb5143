"""The bank service under load: llm-do against plain pydantic-ai, each behind its own uvicorn.

Starts a throwaway PostgreSQL server (tests/postgres.py, unix socket only), then two uvicorn
servers on 127.0.0.1 in subprocesses: `bank.app` (llm-do: a Runtime, a per-call ledger toolset,
a per-run audit) and `bank.plain` (the same SQL, scripted model and HTTP plumbing with plain
pydantic-ai: one shared FunctionToolset, per-request state in deps). Both serve `POST /transfer`
(four model steps: begin, transfer, commit, answer). After a warm-up, rounds alternate between
the servers, each round a fixed number of requests at a fixed concurrency; the report gives
requests per second and p50/p99 latency (medians over rounds), the ratio of the two servers'
requests per second in each round, and each server's RSS after warm-up and at the end. The
warm-up is a round's worth of requests per server: with a quarter of that, the first measured
round (llm-do's, always) came out about 20% slower than the other rounds in which a server went
first. Idle client connections are kept open between rounds (uvicorn's 5 s default would close
them while the other server has its round, and a request sent as one closes fails). The load
generator runs on the same machine: compare the two columns, not the absolute numbers. Loopback
only; bounded by request count and by `--deadline` seconds.

Both servers serve the same endpoints: `bank.app:create_transfer_app` is the llm-do example
without its job endpoints, whose libraries (procrastinate, psycopg) would make its process hold a
third more objects than the plain one for reasons that have nothing to do with the runtime;
`--with-jobs` serves the example whole instead.

`--mix` sends the realistic mix instead of successes only: one request in ten fails mid-transaction
(an amount larger than any balance: the rows are locked, then `transfer` refuses and the run
raises; the service answers 409 after rolling back) and one in ten makes the scripted model forget
to commit (the transaction is rolled back when the run ends: by the call scope in llm-do, by a
`finally` in the plain code). Both servers get the same requests in the same order.

    python benchmarks/bench_service.py [--rounds 5] [--requests 200] [--concurrency 16] [--warmup 200]
    python benchmarks/bench_service.py --mix --rounds 6 --requests 400 --concurrency 50 --pool-size 20

`--instructions` runs both servers under valgrind's callgrind and reports the machine instructions
each server executes per request in each round, all its threads included (with `--cache-sim`, also
simulated cache misses and callgrind's cycle estimate). Counts, unlike seconds, do not depend on what
else the machine is doing; the servers run some 50 times slower, so use few rounds:

    python benchmarks/bench_service.py --mix --instructions --rounds 2 --requests 300 --concurrency 50 --pool-size 20

`--count-calls` counts instead the Python function calls each kind of request costs the server's
event loop thread (committed, failed mid-transaction, forgotten), with both apps in this process
behind `llm_do.testing.asgi_client` (cProfile; no machine noise changes the counts; work done in
worker threads is not counted).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.postgres import PostgresServer, temporary_postgres  # noqa: E402

ACCOUNTS = [f"acct{number:02d}" for number in range(20)]
START_BALANCE = 1_000_000
VARIANTS = {"llm-do": "bank.app:create_transfer_app", "pydantic-ai": "bank.plain:create_app"}
"""Like for like: both serve `POST /transfer` and `GET /accounts` only (`--with-jobs`: llm-do's whole app)."""
WITH_JOBS = "bank.app:create_app"
"""The llm-do example as it ships, with its job endpoints: its process also holds the job queue's libraries."""
FROZEN = {"llm-do": "frozen_apps:llm_do_app", "pydantic-ai": "frozen_apps:plain_app"}
"""With `--freeze`: the same apps, each freezing its heap once started (benchmarks/frozen_apps.py)."""
KEEP_ALIVE = 3600
"""Seconds a server keeps an idle client connection open."""
FAILS, FORGETS = 0, 1
"""With `--mix`: a request whose draw (0 to 9) is FAILS fails mid-transaction; FORGETS forgets to commit."""


@dataclass
class Server:
    name: str
    process: subprocess.Popen[bytes]
    url: str
    rss_after_warmup: int = 0
    rounds: list[tuple[float, list[float]]] = field(default_factory=list)
    """(requests per second, latencies in seconds) of each round."""
    cpu: list[float] = field(default_factory=list)
    """CPU seconds the server process spent per request, in each round (all its threads)."""
    errors: int = 0
    counts: list[dict[str, int]] = field(default_factory=list)
    """With `--instructions`: callgrind's event totals per request (Ir, and cache misses if simulated) of each round."""
    dumps: Path | None = None
    """With `--instructions`: where callgrind writes this server's counts."""

    def rss(self) -> int:
        """Resident set size of the server process, in bytes."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"no VmRSS for pid {self.process.pid}")

    def cpu_seconds(self) -> float:
        """User and system CPU time the server process has used so far (all threads)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def create_database(postgres: PostgresServer) -> str:
    name = postgres.new_database_name()
    conn = await asyncpg.connect(postgres.dsn())
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return postgres.dsn(name)


def start_server(
    name: str, app: str, database: str, pool_size: int, freeze: bool = False, callgrind: list[str] | None = None
) -> Server:
    """Start a uvicorn server for `app`; with `callgrind` (valgrind options), under callgrind."""
    port = free_port()
    app_dir = ROOT / ("benchmarks" if freeze else "examples/service")
    command = [sys.executable, "-m", "uvicorn", app, "--factory", "--app-dir", str(app_dir)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log"]
    # The client's connections wait idle while the other server has its round: uvicorn's default
    # 5 s keep-alive would close them, and a request sent as one closes fails (httpx.ReadError).
    command += ["--timeout-keep-alive", str(KEEP_ALIVE)]
    dumps = None
    if callgrind is not None:
        dumps = Path(tempfile.mkdtemp(prefix=f"bench-service-{name}-"))
        valgrind = ["valgrind", "--tool=callgrind", "--quiet", f"--callgrind-out-file={dumps}/callgrind.%p", *callgrind]
        command = [*valgrind, "--dump-instr=no", *command]
    env = {**os.environ, "LLM_DO_DATABASE_URL": database, "LLM_DO_POOL_SIZE": str(pool_size)}
    process = subprocess.Popen(command, env=env, cwd=ROOT)
    return Server(name, process, f"http://127.0.0.1:{port}", dumps=dumps)


def callgrind_zero(server: Server) -> None:
    """Start counting afresh in a server run under callgrind."""
    subprocess.run(["callgrind_control", "--zero", str(server.process.pid)], check=True, capture_output=True)


def callgrind_counts(server: Server) -> dict[str, int]:
    """Dump a callgrind server's counts since the last zero; its event totals."""
    assert server.dumps is not None
    before = set(server.dumps.iterdir())
    subprocess.run(["callgrind_control", "--dump", str(server.process.pid)], check=True, capture_output=True)
    (dump,) = set(server.dumps.iterdir()) - before
    events: list[str] = []
    for line in dump.read_text().splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("summary:"):
            return dict(zip(events, map(int, line.split()[1:]), strict=True))
    raise RuntimeError(f"no summary in {dump}")


LAST_LEVEL_CACHE = "8388608,16,64"
"""The simulated last-level cache with `--cache-sim` (8 MiB, 16-way, 64-byte lines): valgrind's
default copies the host's, which on a virtual machine is a share of a much larger one."""


def cycle_estimate(counts: dict[str, float]) -> float:
    """callgrind_annotate's cycle estimate: Ir + 10 x L1 misses + 100 x last-level misses."""
    l1 = counts["I1mr"] + counts["D1mr"] + counts["D1mw"]
    ll = counts["ILmr"] + counts["DLmr"] + counts["DLmw"]
    return counts["Ir"] + 10 * l1 + 100 * ll


async def wait_until_up(server: Server, client: httpx.AsyncClient, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"the {server.name} server exited with {server.process.returncode} during start-up")
        try:
            if (await client.get(f"{server.url}/accounts")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError(f"the {server.name} server did not answer within {within}s")


def transfers(server: str, requests: int, seed: int, mix: bool) -> list[tuple[dict[str, object], int]]:
    """The round's request bodies with the status each should get; with `mix`, one in ten fails
    mid-transaction (409) and one in ten forgets to commit, at places drawn from `seed`."""
    rng = random.Random(seed)
    bodies: list[tuple[dict[str, object], int]] = []
    for number in range(requests):
        source, target = rng.sample(ACCOUNTS, 2)
        kind = rng.randrange(10) if mix else None
        amount = START_BALANCE * len(ACCOUNTS) + 1 if kind == FAILS else 1  # more than any balance
        # the same transfers for both servers; references are unique (a transfer is made once per reference)
        body = {"reference": f"{server}-{seed}-{number}", "source": source, "target": target, "amount": amount}
        if kind == FORGETS:
            body["forget_commit"] = True
        bodies.append((body, 409 if kind == FAILS else 200))
    return bodies


async def load(
    server: Server, client: httpx.AsyncClient, bodies: list[tuple[dict[str, object], int]], concurrency: int
) -> None:
    """Send the transfers, `concurrency` at a time; record the round."""
    requests = len(bodies)
    pending = iter(bodies)
    latencies: list[float] = []

    async def worker() -> None:
        for body, expected in pending:
            started = time.perf_counter()
            response = await client.post(f"{server.url}/transfer", json=body)
            latencies.append(time.perf_counter() - started)
            if response.status_code != expected:
                server.errors += 1

    if server.dumps is not None:
        callgrind_zero(server)
    cpu = server.cpu_seconds()
    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    server.rounds.append((requests / (time.perf_counter() - started), latencies))
    server.cpu.append((server.cpu_seconds() - cpu) / requests)
    if server.dumps is not None:
        server.counts.append({event: total // requests for event, total in callgrind_counts(server).items()})


def stop(server: Server) -> None:
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGINT)  # uvicorn's graceful shutdown: the lifespan closes the pool
        try:
            server.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def report(servers: list[Server], rss_end: dict[str, int], args: argparse.Namespace) -> None:
    what = "the mix (10% fail mid-transaction, 10% forget to commit)" if args.mix else "successful transfers"
    print(
        f"\n{args.rounds} rounds x {args.requests} requests of {what} at concurrency {args.concurrency}, "
        f"pool of {args.pool_size} (after {args.warmup} warm-up requests each); medians over rounds"
        + ("; both heaps frozen once started" if args.freeze else "")
        + "\n"
    )
    print("| server | requests/s | p50 | p99 | CPU per request | RSS after warm-up | RSS at end | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for server in servers:
        if not server.rounds:
            continue
        rps = statistics.median(rate for rate, _ in server.rounds)
        p50 = statistics.median(percentile(lat, 0.50) for _, lat in server.rounds) * 1000
        p99 = statistics.median(percentile(lat, 0.99) for _, lat in server.rounds) * 1000
        cpu = statistics.median(server.cpu) * 1000
        mib = 1024 * 1024
        print(
            f"| {server.name} | {rps:.1f} | {p50:.1f} ms | {p99:.1f} ms | {cpu:.2f} ms | "
            f"{server.rss_after_warmup / mib:.1f} MiB | {rss_end[server.name] / mib:.1f} MiB | {server.errors} |"
        )
    ours, plain = servers
    ratios = [mine / theirs for (mine, _), (theirs, _) in zip(ours.rounds, plain.rounds, strict=False)]
    if ratios:
        shown = ", ".join(f"{ratio:.3f}" for ratio in ratios)
        print(f"\n{ours.name} / {plain.name} requests per second, per round: {shown}")
        overall = _median_rate(ours) / _median_rate(plain)
        print(
            f"median of the ratios {statistics.median(ratios):.3f}; ratio of the medians {overall:.3f}; "
            f"geometric mean of the ratios {statistics.geometric_mean(ratios):.3f} (the order alternates "
            "round by round, so over an even number of rounds going first or second weighs on both alike)"
        )
        cpu_ratios = [theirs / mine for mine, theirs in zip(ours.cpu, plain.cpu, strict=False)]
        shown = ", ".join(f"{ratio:.3f}" for ratio in cpu_ratios)
        print(f"{plain.name} / {ours.name} CPU per request (above 1: {ours.name} spends less), per round: {shown}")
        print(f"median {statistics.median(cpu_ratios):.3f}")


def report_instructions(servers: list[Server], args: argparse.Namespace) -> None:
    what = "the mix (10% fail mid-transaction, 10% forget to commit)" if args.mix else "successful transfers"
    print(
        f"\n{args.rounds} rounds x {args.requests} requests of {what} at concurrency {args.concurrency}, "
        f"pool of {args.pool_size}, each server under callgrind (after {args.warmup} warm-up requests each); "
        "per request, medians over rounds\n"
    )
    simulated = args.cache_sim
    header = "| server | instructions |" + (" L1 misses | last-level misses | cycle estimate |" if simulated else "")
    print(header + " errors |")
    print("|---|---:|" + ("---:|---:|---:|" if simulated else "") + "---:|")
    medians: dict[str, dict[str, float]] = {}
    for server in servers:
        events = server.counts[0].keys() if server.counts else ()
        median = {event: statistics.median(round_[event] for round_ in server.counts) for event in events}
        medians[server.name] = median
        row = f"| {server.name} | {median['Ir'] / 1e6:.2f} M |"
        if simulated:
            l1 = median["I1mr"] + median["D1mr"] + median["D1mw"]
            ll = median["ILmr"] + median["DLmr"] + median["DLmw"]
            row += f" {l1 / 1e6:.2f} M | {ll / 1e3:.1f} k | {cycle_estimate(median) / 1e6:.2f} M |"
        print(f"{row} {server.errors} |")
    ours, plain = servers
    measures: list[tuple[str, Callable[[dict[str, float]], float]]] = [("instructions", lambda m: m["Ir"])]
    if simulated:
        measures.append(("cycle estimate", cycle_estimate))
    for label, measure in measures:
        pairs = zip(ours.counts, plain.counts, strict=False)
        rounds = ", ".join(f"{measure(dict(a)) / measure(dict(b)):.3f}" for a, b in pairs)
        overall = measure(medians[ours.name]) / measure(medians[plain.name])
        print(f"\n{ours.name} / {plain.name} {label} per request: {overall:.3f} (per round: {rounds})")


def _median_rate(server: Server) -> float:
    return statistics.median(rate for rate, _ in server.rounds)


async def bench(postgres: PostgresServer, args: argparse.Namespace) -> None:
    deadline = time.monotonic() + args.deadline
    database = await create_database(postgres)
    apps = dict(FROZEN if args.freeze else VARIANTS)
    if args.with_jobs:
        if args.freeze:
            raise SystemExit("--with-jobs and --freeze do not combine")
        apps["llm-do"] = WITH_JOBS
    callgrind = None
    if args.instructions:
        if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
            raise SystemExit("--instructions needs valgrind (Debian/Ubuntu: apt-get install valgrind)")
        callgrind = ["--cache-sim=yes", f"--LL={LAST_LEVEL_CACHE}"] if args.cache_sim else []
    servers = [start_server(name, app, database, args.pool_size, args.freeze, callgrind) for name, app in apps.items()]
    try:
        limits = httpx.Limits(max_connections=args.concurrency * 2)
        async with httpx.AsyncClient(limits=limits, timeout=600.0 if callgrind else 60.0) as client:
            for server in servers:
                await wait_until_up(server, client, within=900.0 if callgrind else 60.0)
            conn = await asyncpg.connect(database)
            try:
                await conn.executemany(
                    "INSERT INTO accounts (name, balance) VALUES ($1, $2)", [(a, START_BALANCE) for a in ACCOUNTS]
                )
            finally:
                await conn.close()
            for server in servers:
                await load(server, client, transfers(server.name, args.warmup, 0, args.mix), args.concurrency)
                server.rounds.clear()
                server.cpu.clear()
                server.counts.clear()
                server.rss_after_warmup = server.rss()
            for number in range(args.rounds):
                order = servers if number % 2 == 0 else servers[::-1]
                for server in order:
                    if time.monotonic() > deadline:
                        print(f"deadline of {args.deadline}s reached: stopping after {number} rounds")
                        break
                    await load(
                        server, client, transfers(server.name, args.requests, number + 1, args.mix), args.concurrency
                    )
                    print(f"round {number + 1}: {server.name} {server.rounds[-1][0]:.1f} requests/s", flush=True)
                else:
                    continue
                break
            rss_end = {server.name: server.rss() for server in servers}
            total = (await client.get(f"{servers[0].url}/accounts")).json()
        if callgrind is None:
            report(servers, rss_end, args)
        else:
            report_instructions(servers, args)
        conserved = sum(total.values()) == START_BALANCE * len(ACCOUNTS)
        print(f"\nmoney conserved across both servers: {'yes' if conserved else 'NO'}")
    finally:
        for server in servers:
            stop(server)
            if server.dumps is not None:
                shutil.rmtree(server.dumps, ignore_errors=True)


KINDS: dict[str, dict[str, object]] = {
    "committed": {"amount": 1},
    "failed mid-transaction": {"amount": START_BALANCE * len(ACCOUNTS) + 1},
    "forgot to commit": {"amount": 1, "forget_commit": True},
}


async def send(server: str, client: httpx.AsyncClient, kind: str, number: int) -> None:
    """One transfer of the given kind; raises if it is not answered as that kind should be."""
    source, target = ACCOUNTS[number % len(ACCOUNTS)], ACCOUNTS[(number + 1) % len(ACCOUNTS)]
    reference = f"{server}-{kind}-{number}"
    body = {"reference": reference, "source": source, "target": target, **KINDS[kind]}
    response = await client.post("/transfer", json=body)
    expected = 409 if kind == "failed mid-transaction" else 200
    if response.status_code != expected:
        raise RuntimeError(f"{server}: a {kind} request was answered {response.status_code}: {response.text}")


async def count_calls(postgres: PostgresServer, requests: int) -> None:
    """Function calls per request of each kind, llm-do against plain, in process."""
    from contextlib import AsyncExitStack

    from llm_do.testing import asgi_client

    sys.path.insert(0, str(ROOT / "examples" / "service"))
    os.environ["LLM_DO_DATABASE_URL"] = await create_database(postgres)
    os.environ["LLM_DO_POOL_SIZE"] = "10"
    from bank.app import create_transfer_app as llm_do_app
    from bank.plain import create_app as plain_app

    counts: dict[tuple[str, str], float] = {}
    async with AsyncExitStack() as stack:
        clients = {
            "llm-do": await stack.enter_async_context(asgi_client(llm_do_app())),
            "pydantic-ai": await stack.enter_async_context(asgi_client(plain_app())),
        }
        for name in ACCOUNTS:
            await clients["llm-do"].post("/accounts", json={"name": name, "balance": START_BALANCE})
        for kind in KINDS:
            for server, client in clients.items():
                for number in range(20):  # warm-up
                    await send(server, client, kind, number)
                profile = cProfile.Profile()
                profile.enable()
                for number in range(20, 20 + requests):
                    await send(server, client, kind, number)
                profile.disable()
                counts[server, kind] = pstats.Stats(profile).total_calls / requests  # type: ignore[attr-defined]
    print(f"\nPython function calls per request on the event loop thread ({requests} requests of each kind)\n")
    print("| request | llm-do | pydantic-ai | ratio |")
    print("|---|---:|---:|---:|")
    weights = {"committed": 0.8, "failed mid-transaction": 0.1, "forgot to commit": 0.1}
    for kind in [*KINDS, "the mix (8:1:1)"]:
        if kind in KINDS:
            ours, theirs = counts["llm-do", kind], counts["pydantic-ai", kind]
        else:
            ours = sum(counts["llm-do", k] * w for k, w in weights.items())
            theirs = sum(counts["pydantic-ai", k] * w for k, w in weights.items())
        print(f"| {kind} | {ours:,.0f} | {theirs:,.0f} | {ours / theirs:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=200, help="requests per round and server")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--warmup", type=int, default=None, help="warm-up requests per server (default: as many as a round's)"
    )
    parser.add_argument("--pool-size", type=int, default=10, help="connections in each server's asyncpg pool")
    parser.add_argument("--mix", action="store_true", help="10%% of runs fail mid-transaction, 10%% forget to commit")
    parser.add_argument(
        "--deadline", type=float, help="stop starting rounds after this many seconds (150; 3600 with --instructions)"
    )
    parser.add_argument("--count-calls", action="store_true", help="count function calls per request instead")
    parser.add_argument("--freeze", action="store_true", help="both apps freeze their heap once started (gc.freeze)")
    parser.add_argument("--with-jobs", action="store_true", help="serve llm-do's whole app, job endpoints included")
    parser.add_argument("--instructions", action="store_true", help="count instructions per request (callgrind)")
    parser.add_argument("--cache-sim", action="store_true", help="with --instructions: simulate caches too")
    args = parser.parse_args()
    if args.deadline is None:
        args.deadline = 3600.0 if args.instructions else 150.0
    if args.warmup is None:
        args.warmup = args.requests
    with temporary_postgres() as postgres:
        asyncio.run(count_calls(postgres, args.requests) if args.count_calls else bench(postgres, args))


if __name__ == "__main__":
    main()
