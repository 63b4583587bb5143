"""A warm interpreter for the command tests: the `llm-do` command without an interpreter start-up each time.

`python tests/cli_warm.py SOCKET` imports the command's modules once (pydantic-ai, the project
loader, the command handlers, the MCP client), then listens on the unix socket `SOCKET`. For each command line it
is sent, with the caller's stdin, stdout and stderr pipes, it forks: the new process takes the
pipes as its fds 0, 1 and 2, the caller's working directory and environment, and runs
`llm_do.cli.main.main()` as `python -m llm_do.cli` would, then exits with its code. Each command is
still a process of its own (its own state, exit code, children and pipes); what it saves is the
second or so of start-up and imports that every command test used to pay.

`run()` is the client: tests call it through `tests.cli_projects.llm_do`. A test of start-up itself
(interpreter options such as `-X importtime`) starts a fresh interpreter instead.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

WARM_MODULES = (
    "llm_do.cli.main",
    "llm_do.cli.running",
    "llm_do.cli.checking",  # what run, check and list import
    "llm_do.cli.servers",
)
MCP_MODULES = (
    "llm_do.mcp.server",
    "llm_do.mcp.stdio",  # what a project's MCP servers add (fastmcp's client: about 1.6 s), with the mcp extra
)


# -- the server (a process of its own) ------------------------------------------------------------


def serve(path: str) -> None:
    import importlib
    import importlib.util

    # As `main()` does before anything imports a container, so that the modules are what a command has.
    importlib.import_module("llm_do.cli.wiring").import_wiring_without_web_frameworks()
    for module in WARM_MODULES + (MCP_MODULES if importlib.util.find_spec("fastmcp") is not None else ()):
        importlib.import_module(module)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".binding")
    listener.listen(64)
    os.rename(path + ".binding", path)  # the client waits for `path`: it appears only once listening
    while True:
        ready, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in ready:  # end of file: the test process is gone
            return
        connection, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            _handle(connection)  # never returns
        connection.close()
        while True:  # reap the handlers that are done
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break


def _handle(connection: socket.socket) -> None:
    try:
        message, fds, _, _ = socket.recv_fds(connection, 1 << 20, 3)
        request = json.loads(message)
        pid = os.fork()
        if pid == 0:
            connection.close()
            _command(request, fds)  # never returns
        for fd in fds:
            os.close(fd)
        connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        connection.sendall(json.dumps({"code": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
    finally:
        os._exit(0)


def _command(request: dict[str, object], fds: list[int]) -> None:
    code = 1
    try:
        # As a shell starts a command in the foreground: no signal ignored, however the suite was started
        # (`nohup` ignores SIGHUP, `&` in a script SIGINT, and llm-do leaves an ignored signal ignored).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(str(request["cwd"]))
        os.environ.clear()
        os.environ.update(request["env"])  # type: ignore[arg-type]
        import llm_do.cli.main as cli

        sys.argv = [str(Path(cli.__file__).with_name("__main__.py")), *request["args"]]  # type: ignore[misc]
        sys.path[0] = os.getcwd()  # as `python -m` has it
        code = _exit_code(cli.main)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _exit_code(main: object) -> int:
    """What `raise SystemExit(main())` makes of the outcome, as the interpreter would report it."""
    try:
        code = main()  # type: ignore[operator]
    except SystemExit as exit_:
        code = exit_.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


# -- the client -----------------------------------------------------------------------------------

_server: tuple[subprocess.Popen[bytes], str] | None = None
_lock = threading.Lock()


def _socket(env: dict[str, str]) -> str:
    global _server
    with _lock:
        if _server is not None and _server[0].poll() is None:
            return _server[1]
        place = tempfile.mkdtemp(prefix="llm-do-cli-")
        path = os.path.join(place, "socket")
        process = subprocess.Popen(
            [sys.executable, __file__, path], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env
        )  # its stdin ends when this process does, however it ends: then the server stops
        atexit.register(_stop, process, place)
        deadline = time.monotonic() + 120
        while not os.path.exists(path):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the warm llm-do interpreter did not start (exit {process.poll()})")
            time.sleep(0.02)
        _server = (process, path)
        return path


def _stop(process: subprocess.Popen[bytes], place: str) -> None:
    process.kill()
    process.wait()
    if process.stdin is not None:
        process.stdin.close()
    shutil.rmtree(place, ignore_errors=True)


def run(
    args: list[str], stdin: str, cwd: Path | None, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run `llm-do ARGS` in a process forked from the warm interpreter; like `subprocess.run(text=True)`."""
    return start(args, stdin, cwd, env).wait(timeout)


class Started:
    """A command running in a process forked from the warm interpreter: its `pid`, and `wait` for its end."""

    def __init__(
        self, args: list[str], connection: socket.socket, threads: list[threading.Thread], outputs: dict[str, bytes]
    ) -> None:
        self.args = args
        self._connection = connection
        self._threads = threads
        self._outputs = outputs  # filled by the reading threads
        self._replies = connection.makefile("rb")
        self.pid: int = json.loads(self._replies.readline())["pid"]

    def wait(self, timeout: float) -> subprocess.CompletedProcess[str]:
        """Wait for the command to end; kill it (and raise `TimeoutExpired`) after `timeout` seconds."""
        self._connection.settimeout(timeout)
        try:
            try:
                line = self._replies.readline()
            except TimeoutError:
                os.kill(self.pid, signal.SIGKILL)
                for thread in self._threads:
                    thread.join()
                raise subprocess.TimeoutExpired(["llm-do", *self.args], timeout) from None
            code = json.loads(line)["code"]
            for thread in self._threads:
                thread.join()
        finally:
            self._replies.close()
            self._connection.close()
        return subprocess.CompletedProcess(
            ["llm-do", *self.args], code, _text(self._outputs.get("out", b"")), _text(self._outputs.get("err", b""))
        )


def start(args: list[str], stdin: str, cwd: Path | None, env: dict[str, str]) -> Started:
    """Start `llm-do ARGS` in a process forked from the warm interpreter, its stdin fed `stdin`."""
    path = _socket(env)
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    request = {"args": args, "cwd": str(cwd or os.getcwd()), "env": env}
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(path)
    socket.send_fds(connection, [json.dumps(request).encode()], [in_read, out_write, err_write])
    for fd in (in_read, out_write, err_write):
        os.close(fd)
    outputs: dict[str, bytes] = {}
    threads = [
        threading.Thread(target=_write, args=(in_write, stdin.encode())),
        threading.Thread(target=_read, args=(out_read, outputs, "out")),
        threading.Thread(target=_read, args=(err_read, outputs, "err")),
    ]
    for thread in threads:
        thread.start()
    return Started(args, connection, threads, outputs)


def _write(fd: int, data: bytes) -> None:
    try:
        with open(fd, "wb") as pipe:
            pipe.write(data)
    except BrokenPipeError:
        pass


def _read(fd: int, outputs: dict[str, bytes], name: str) -> None:
    with open(fd, "rb") as pipe:
        outputs[name] = pipe.read()


def _text(data: bytes) -> str:
    return data.decode().replace("\r\n", "\n").replace("\r", "\n")  # as subprocess.run(text=True) reads it


# -- the command on PATH (for shell command lines) -------------------------------------------------

SOCKET_VARIABLE = "CLI_WARM_SOCKET"
"""Where the `llm-do` script of `command_on_path` finds the warm interpreter (not passed on to the command)."""


def command_on_path(env: dict[str, str], directory: Path) -> dict[str, str]:
    """`env` with an `llm-do` script in `directory` first on PATH: a shell command line (pipes, redirections
    and exit codes included) then runs `llm-do` in a process forked from the warm interpreter."""
    script = directory / "llm-do"
    script.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -S {shlex.quote(__file__)} --command "$@"\n')
    script.chmod(0o755)
    return {**env, SOCKET_VARIABLE: _socket(env), "PATH": f"{directory}{os.pathsep}{env.get('PATH', '')}"}


def _client(args: list[str]) -> int:
    """Run `llm-do ARGS` on this process's stdin, stdout and stderr, forked from the warm interpreter; its exit code."""
    env = dict(os.environ)
    path = env.pop(SOCKET_VARIABLE)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(path)
        request = {"args": args, "cwd": os.getcwd(), "env": env}
        socket.send_fds(connection, [json.dumps(request).encode()], [0, 1, 2])
        with connection.makefile("rb") as replies:
            replies.readline()  # the pid
            code: int = json.loads(replies.readline())["code"]
    return code if code >= 0 else 128 - code  # killed by a signal: as a shell reports it


if __name__ == "__main__":
    if sys.argv[1] == "--command":
        sys.exit(_client(sys.argv[2:]))
    serve(sys.argv[1])
