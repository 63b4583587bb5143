"""A throwaway PostgreSQL server for tests and benchmarks: `initdb` in a temporary directory, a unix
socket only (no TCP port), stopped and deleted at the end. Fault tests stop, start and restart it
(`PostgresServer.stop/start/restart`): same data, same socket.

PostgreSQL's `initdb` refuses to run as root; as root the server runs as the OS user `postgres`.
If the server cannot start, `PostgresUnavailable` says why: tests fail on it, they never skip.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PostgresServer", "PostgresUnavailable", "temporary_postgres"]


class PostgresUnavailable(RuntimeError):
    """The throwaway server could not be started; the message says what to install or fix."""


@dataclass(frozen=True)
class PostgresServer:
    """A running throwaway server reachable on a unix socket in `socket_dir`."""

    socket_dir: Path
    port: int
    user: str = "postgres"
    data_dir: Path | None = None
    """The cluster's files, when this object may stop and start it."""
    log: Path | None = None

    @property
    def socket_path(self) -> Path:
        """The unix socket file itself (`.s.PGSQL.<port>`)."""
        return self.socket_dir / f".s.PGSQL.{self.port}"

    def stop(self, mode: str = "fast") -> None:
        """`pg_ctl stop -m <mode>` (smart, fast or immediate), waiting until the server is down."""
        _run(_as_server_user([_binary("pg_ctl"), "-D", str(self._data()), "-m", mode, "-w", "stop"]), "pg_ctl stop")

    def start(self) -> None:
        """Start the stopped server again, on the same data directory and socket, and wait until it answers."""
        command = [_binary("pg_ctl"), "-D", str(self._data()), "-l", str(self.log), "-o", _options(self), "-w"]
        _run(_as_server_user([*command, "-t", "60", "start"]), "pg_ctl start")

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def _data(self) -> Path:
        if self.data_dir is None:
            raise PostgresUnavailable("only a server started by temporary_postgres() can be stopped and started")
        return self.data_dir

    def dsn(self, database: str = "postgres") -> str:
        """A libpq/asyncpg URL for `database` on this server."""
        return f"postgresql://{self.user}@/{database}?host={self.socket_dir}&port={self.port}"

    def connect_kwargs(self, database: str = "postgres") -> dict[str, object]:
        """Keyword arguments for `asyncpg.connect` / `asyncpg.create_pool`."""
        return {"host": str(self.socket_dir), "port": self.port, "user": self.user, "database": database}

    def new_database_name(self) -> str:
        return f"test_{secrets.token_hex(4)}"


def _as_server_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    if shutil.which("runuser") is None:
        raise PostgresUnavailable("running as root needs `runuser` (util-linux) to start PostgreSQL as 'postgres'")
    return ["runuser", "-u", "postgres", "--", *command]


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        for candidate in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True):
            return str(candidate)
        raise PostgresUnavailable(
            f"`{name}` is not on PATH: install PostgreSQL 15 (Debian: apt-get install postgresql-15) "
            "so the suite can start a throwaway server"
        )
    return found


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise PostgresUnavailable(
            f"{what} failed (exit {done.returncode}): {done.stderr.strip() or done.stdout.strip()}"
        )


def _options(server: PostgresServer) -> str:
    return f"-k {server.socket_dir} -p {server.port} -c listen_addresses='' -c fsync=off -c max_connections=300"


def _free_port_number() -> int:
    # Only names the socket file (.s.PGSQL.<port>); picked free on TCP too so a second server never clashes.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def temporary_postgres() -> Iterator[PostgresServer]:
    """Start a throwaway server; stop it and delete its files when the block ends."""
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    root = Path(tempfile.mkdtemp(prefix="llm-do-pg-"))
    data, sockets, log = root / "data", root / "sock", root / "server.log"
    sockets.mkdir()
    if os.geteuid() == 0:
        try:
            server_user = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(root, ignore_errors=True)
            raise PostgresUnavailable("running as root needs the OS user 'postgres' to own the server") from None
        for path in (root, sockets):
            os.chown(path, server_user.pw_uid, server_user.pw_gid)
    server = PostgresServer(sockets, _free_port_number(), data_dir=data, log=log)
    started = False
    try:
        _run(
            _as_server_user([initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale"]),
            "initdb",
        )
        started = True  # a failed start may still leave a server behind: stop it all the same
        server.start()
        yield server
    finally:
        if started:
            subprocess.run(
                _as_server_user([pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"]),
                capture_output=True,
                timeout=60,
                check=False,
            )
        shutil.rmtree(root, ignore_errors=True)
