"""The example's chat service as real uvicorn processes on loopback, and a reader of its data stream."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from .postgres import PostgresServer

ROOT = Path(__file__).resolve().parents[1]
SERVICE = ROOT / "examples" / "service"
PROCESSES: dict[str, asyncio.subprocess.Process] = {}
"""The uvicorn process serving each base URL, while it runs (a test may signal it)."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def chat_process(dsn: str, **env: str) -> AsyncIterator[str]:
    """`uvicorn bank.app:create_chat_app` in a process of its own; yields its base URL; SIGTERM at the end."""
    async with chat_processes(dsn, 1, **env) as (url,):
        yield url


@asynccontextmanager
async def bank_chat(postgres: PostgresServer) -> AsyncIterator[str]:
    """The example's chat service in a process of its own, on a fresh database with accounts A (100), B (0),
    C (50) and D (0); yields its base URL."""
    async with bank_chats(postgres, 1) as (url,):
        yield url


@asynccontextmanager
async def bank_chats(postgres: PostgresServer, count: int) -> AsyncIterator[list[str]]:
    """`count` processes of the example's chat service on one fresh database with accounts A (100), B (0), C (50)
    and D (0); yields their base URLs."""
    name = postgres.new_database_name()
    await fresh_database(postgres.dsn(), name)
    async with chat_processes(postgres.dsn(name), count) as urls:
        async with httpx.AsyncClient(base_url=urls[0]) as client:
            for account, balance in {"A": 100, "B": 0, "C": 50, "D": 0}.items():
                created = await client.post("/accounts", json={"name": account, "balance": balance})
                assert created.status_code == 201, created.text
        yield urls


@asynccontextmanager
async def chat_processes(dsn: str, count: int, **env: str) -> AsyncIterator[list[str]]:
    """`count` processes of `uvicorn bank.app:create_chat_app`, started together; yields their base URLs once
    each answers; SIGTERM to each at the end."""
    async with app_processes("bank.app:create_chat_app", count, {"LLM_DO_DATABASE_URL": dsn, **env}) as urls:
        yield urls


@asynccontextmanager
async def app_processes(
    target: str, count: int, env: dict[str, str], *, probe: str = "/accounts", args: tuple[str, ...] = ()
) -> AsyncIterator[list[str]]:
    """`count` processes of `uvicorn TARGET --factory` (examples/service and the project's root importable), started
    together with `env` added to this one's; yields their base URLs once each answers `GET probe`; SIGTERM to each at
    the end. `args` go to uvicorn."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:  # none listens yet: the same free port may come back
            ports.append(port)
    processes: list[asyncio.subprocess.Process] = []
    try:
        for port in ports:
            processes.append(await _start(target, port, {**os.environ, **env}, args))
        async with asyncio.TaskGroup() as starting:
            for process, port in zip(processes, ports, strict=True):
                starting.create_task(_answering(process, port, probe))
        urls = [f"http://127.0.0.1:{port}" for port in ports]
        PROCESSES.update(zip(urls, processes, strict=True))
        yield urls
    finally:
        for port in ports:
            PROCESSES.pop(f"http://127.0.0.1:{port}", None)
        async with asyncio.TaskGroup() as stopping:
            for process in processes:
                stopping.create_task(_stop(process))


async def _start(target: str, port: int, env: dict[str, str], args: tuple[str, ...]) -> asyncio.subprocess.Process:
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "uvicorn",
        target,
        "--factory",
        "--app-dir",
        str(SERVICE),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--timeout-keep-alive",
        "30",  # longer than httpx's 5 s: a reused idle connection is never closed under the client
        *args,
        env=env,
    )


async def _answering(process: asyncio.subprocess.Process, port: int, probe: str) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        for _ in range(600):
            if process.returncode is not None:
                raise AssertionError(f"uvicorn on port {port} exited with {process.returncode} during start-up")
            try:
                if (await client.get(probe)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    raise AssertionError(f"uvicorn on port {port} did not answer within 30s")


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 20)
        except TimeoutError:
            process.kill()
            await process.wait()


async def fresh_database(admin_dsn: str, name: str) -> None:
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


async def chunks(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The data-stream chunks of a streamed response, until `[DONE]`."""
    async for line in response.aiter_lines():
        if not line.startswith("data: "):
            continue
        data = line.removeprefix("data: ")
        if data == "[DONE]":
            return
        yield json.loads(data)
