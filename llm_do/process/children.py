"""Process groups llm-do starts (MCP servers, shell commands) never outlive the llm-do process, however it ends.

Each program runs in a process group of its own, which llm-do ends when it is done with it. When
llm-do cannot (it was killed with SIGKILL, or crashed), two things end the groups anyway:

- A guardian: a small process in a session of its own (one per llm-do process, started before the
  first group), which reads a pipe whose other end only llm-do holds. Each new group registers
  itself there before its program runs, and llm-do says when a group has ended. When the pipe
  closes with groups still registered, llm-do is gone: the guardian sends each group SIGTERM, then
  SIGKILL after the group's grace period. This reaches the program's own children too (npx's node,
  uvx's python), and works on every POSIX system.
- On Linux the program also gets SIGKILL as its parent-death signal (`prctl(PR_SET_PDEATHSIG)`). The
  kernel sends it when the thread that started the program ends: an event loop's thread, which
  outlives what the loop runs. If llm-do died before the signal was set, the child kills itself.

Both are set up in the child between fork and exec (`preexec_fn`), so there is no moment when a
started program is not covered. Spawn with `spawn_options(grace)`, then call `guard(group, grace)`
once the spawn returned (or `spawn_failed()` if it raised), and `release(group)` once the group has
ended.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["guard", "release", "spawn_failed", "spawn_options"]

logger = logging.getLogger("llm_do")

_PR_SET_PDEATHSIG = 1

GUARDIAN = """# llm-do guardian: ends the process groups of an llm-do process that died before it could
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)

def alive(group):
    try:
        os.killpg(group, 0)
    except OSError:
        return False
    return True

groups = {}
for line in sys.stdin.buffer:
    sign, group, grace = line.split()
    if sign == b"+":
        groups[int(group)] = float(grace)
    elif sign == b"-":
        groups.pop(int(group), None)
    else:  # a spawn failed after its child registered: forget the groups that no longer exist
        groups = {group: grace for group, grace in groups.items() if alive(group)}
if not groups:
    sys.exit()
for group in groups:
    try:
        os.killpg(group, signal.SIGTERM)
    except OSError:
        pass
deadline = time.monotonic() + max(groups.values())
while time.monotonic() < deadline and any(alive(group) for group in groups):
    time.sleep(0.05)
for group in groups:
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
"""
"""The guardian's program: reads `+ GROUP GRACE`, `- GROUP 0` and `? 0 0` (prune) lines; at end of
input, ends the groups still registered."""


class _Guardian:
    """This process's guardian, its pipe and the groups it was told of."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.process: subprocess.Popen[bytes] | None = None
        self.pipe: int | None = None
        self.groups: dict[int, float] = {}
        self.failed = False

    def pipe_ready(self) -> int | None:
        """The pipe to the guardian, started (and told of every group) if there is none."""
        if self.pipe is None and not self.failed and self._start():
            self.tell("".join(f"+ {group} {grace}\n" for group, grace in self.groups.items()))
        return self.pipe

    def tell(self, lines: str) -> None:
        if self.pipe is None or not lines:
            return
        try:
            os.write(self.pipe, lines.encode())
        except OSError:  # it was killed
            self._forget()

    def _start(self) -> bool:
        if not sys.executable:
            self.failed = True  # an embedded interpreter: the parent-death signal is what is left
            logger.debug("no guardian for child process groups: sys.executable is unknown")
            return False
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", GUARDIAN],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # out of reach of signals sent to llm-do's group or terminal
            )
        except OSError as error:
            self.failed = True
            logger.warning("could not start the guardian of child process groups (%s)", error)
            return False
        assert self.process.stdin is not None
        self.pipe = os.dup(self.process.stdin.fileno())  # unbuffered writes; not inherited by other programs
        self.process.stdin.close()
        return True

    def _forget(self) -> None:
        process = self._drop()
        if process is not None:
            with contextlib.suppress(OSError):
                process.poll()  # reaped if it has exited

    def _drop(self) -> subprocess.Popen[bytes] | None:
        """Close the pipe (the guardian reads its end) and let go of the guardian; the guardian."""
        if self.pipe is not None:
            with contextlib.suppress(OSError):
                os.close(self.pipe)
        self.pipe = None
        process, self.process = self.process, None
        return process

    def close(self) -> None:
        """At exit: close the pipe (the guardian ends the groups still registered) and reap the guardian."""
        with self.lock:
            process = self._drop()
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=0.5)  # at once when no group is left; else it goes on without us


_guardian = _Guardian()


def _reset_in_child() -> None:
    """A forked child has no guardian and no groups of its own (its parent's guardian stays its parent's)."""
    global _guardian
    old = _guardian
    _guardian = _Guardian()
    if old.pipe is not None:
        with contextlib.suppress(OSError):
            os.close(old.pipe)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_in_child)
atexit.register(lambda: _guardian.close())


def spawn_options(grace: float) -> dict[str, Any]:
    """Keyword arguments for `subprocess.Popen` (or asyncio's `subprocess_exec`) of a program that must not
    outlive this process: a new session (so a process group of its own), registered with the guardian
    (SIGTERM, then SIGKILL after `grace` seconds, if this process dies first), and on Linux the
    parent-death signal."""
    options: dict[str, Any] = {"start_new_session": True}
    if os.name != "posix":
        return options
    guardian = _guardian
    with guardian.lock:
        pipe = guardian.pipe_ready()
        if pipe is not None:
            # The child's own copy: a forked child's at-fork hook, which runs before `prepare`, closes the
            # guardian's. Closed here once the spawn has let go of `prepare`.
            pipe = os.dup(pipe)
    prctl = _prctl()
    if pipe is None and prctl is None:
        return options
    parent = os.getpid()
    kill = int(signal.SIGKILL)
    registration = f"+ %d {grace}\n".encode()

    def prepare() -> None:  # in the child, between fork and exec (its new session is already made)
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, kill, 0, 0, 0)
            if os.getppid() != parent:  # the parent died before the signal was set: it will never come
                os.kill(os.getpid(), kill)
        if pipe is not None:
            # Not killed by SIGPIPE (the child has its default back) if the guardian has just died.
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGPIPE, signal.SIG_IGN)
            with contextlib.suppress(OSError):
                os.write(pipe, registration % os.getpid())
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGPIPE, signal.SIG_DFL)

    if pipe is not None:
        weakref.finalize(prepare, os.close, pipe)
    options["preexec_fn"] = prepare
    return options


def guard(group: int, grace: float) -> None:
    """Note that process group `group` (spawned with `spawn_options(grace)`) runs, until `release(group)`."""
    guardian = _guardian
    with guardian.lock:
        guardian.groups[group] = grace
        # The child registered itself already; this tells whether the guardian is still there. If it was
        # killed, its replacement is told of every group, this one included.
        guardian.tell(f"+ {group} {grace}\n")
        guardian.pipe_ready()


def release(group: int) -> None:
    """Forget process group `group`: it has ended."""
    guardian = _guardian
    with guardian.lock:
        guardian.groups.pop(group, None)
        guardian.tell(f"- {group} 0\n")


def spawn_failed() -> None:
    """A spawn with `spawn_options` raised: its child may have registered before its program failed to
    start, so the guardian forgets the groups that no longer exist."""
    guardian = _guardian
    with guardian.lock:
        guardian.tell("? 0 0\n")


_PRCTL: Any = None


def _prctl() -> Callable[..., int] | None:
    """libc's `prctl` on Linux, loaded once; None elsewhere."""
    global _PRCTL
    if _PRCTL is None:
        _PRCTL = False
        if sys.platform.startswith("linux"):
            import ctypes

            with contextlib.suppress(OSError, AttributeError):
                prctl = ctypes.CDLL(None, use_errno=True).prctl
                prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
                prctl.restype = ctypes.c_int
                _PRCTL = prctl
    return _PRCTL or None
