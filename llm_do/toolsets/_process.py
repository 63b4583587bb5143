"""Run one program in its own process group, with capped output and a timeout, and leave nothing behind.

The program starts a new session (`start_new_session=True`), so it and every process it forks share
one process group whose id is its pid. Whenever the run ends (the program exited, the timeout
passed, or the awaiting task was cancelled) the group gets SIGTERM, then SIGKILL after a short
grace if anything in it is still alive, so no child or grandchild outlives the run. If llm-do itself
is killed meanwhile, `llm_do.process.children` ends the group. A process that leaves the group on purpose
(`setsid`, `setpgid`) is out of reach.

We use `loop.subprocess_exec` (what `asyncio.create_subprocess_exec` is built on) with our own
protocol: it reports the program's exit as soon as it happens, while `Process.wait()` also waits
for the pipes to close on newer Pythons, which a background grandchild can keep open forever.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..process import children

__all__ = ["Completed", "run_in_process_group"]

_PROC = "/proc"


@dataclass(frozen=True, slots=True)
class Completed:
    """What a run produced. `returncode` is negative when a signal ended the program."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    stdout_dropped: int
    """Bytes of stdout beyond the cap that were read and thrown away."""
    stderr_dropped: int
    timed_out: bool
    pipes_left_open: bool
    """A process outside the group kept the output open after the run; what it wrote later was not read."""


class _Capped:
    """Keeps the first `limit` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.chunks: list[bytes] = []
        self.kept = 0
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.limit - self.kept
        if room > 0:
            self.chunks.append(data[:room])
            self.kept += min(room, len(data))
        self.dropped += max(0, len(data) - max(room, 0))

    def value(self) -> bytes:
        return b"".join(self.chunks)


class _Collector(asyncio.SubprocessProtocol):
    def __init__(self, limit: int) -> None:
        loop = asyncio.get_running_loop()
        self.streams = {1: _Capped(limit), 2: _Capped(limit)}
        self.exited: asyncio.Future[None] = loop.create_future()
        self.finished: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self.streams[fd].add(data.encode() if isinstance(data, str) else data)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:  # exited and every pipe closed
        if not self.finished.done():
            self.finished.set_result(None)


async def run_in_process_group(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    time_limit: float,
    max_output: int,
    kill_grace: float,
) -> Completed:
    """Run `argv` (no shell) in a new process group and end the whole group before returning.

    On cancellation the group is ended the same way (SIGTERM, then SIGKILL after `kill_grace`;
    SIGKILL at once if cancelled again) and `CancelledError` propagates.
    """
    loop = asyncio.get_running_loop()
    spawning = asyncio.ensure_future(
        loop.subprocess_exec(
            lambda: _Collector(max_output),
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            **children.spawn_options(kill_grace),  # its own process group, which cannot outlive llm-do
        )
    )
    try:
        transport, collector = await asyncio.shield(spawning)
    except asyncio.CancelledError:
        await _end_spawned(spawning, kill_grace)  # the program may already run: end it before giving up
        raise
    except BaseException:
        children.spawn_failed()
        raise
    group = transport.get_pid()
    children.guard(group, kill_grace)
    try:
        timed_out = not await _within(collector.exited, time_limit)
        await end_process_group(group, kill_grace)
        await _within(collector.exited, kill_grace)  # after SIGKILL, only the reaping is left
        pipes_left_open = not await _within(collector.finished, kill_grace)
    except BaseException:
        await end_process_group(group, kill_grace)
        raise
    finally:
        children.release(group)
        transport.close()
    out, err = collector.streams[1], collector.streams[2]
    return Completed(
        returncode=transport.get_returncode(),
        stdout=out.value(),
        stderr=err.value(),
        stdout_dropped=out.dropped,
        stderr_dropped=err.dropped,
        timed_out=timed_out,
        pipes_left_open=pipes_left_open,
    )


async def _end_spawned(spawning: asyncio.Future[tuple[asyncio.SubprocessTransport, _Collector]], grace: float) -> None:
    try:
        transport, _ = await spawning
    except asyncio.CancelledError:
        spawning.add_done_callback(_kill_when_spawned)  # cancelled again: no grace, but no orphan
        raise
    except Exception:
        children.spawn_failed()
        return  # it failed to start
    try:
        await end_process_group(transport.get_pid(), grace)
    finally:
        children.release(transport.get_pid())
        transport.close()


def _kill_when_spawned(spawning: asyncio.Future[tuple[asyncio.SubprocessTransport, _Collector]]) -> None:
    if spawning.cancelled() or spawning.exception() is not None:
        children.spawn_failed()
        return
    transport, _ = spawning.result()
    _signal(transport.get_pid(), signal.SIGKILL)
    children.release(transport.get_pid())
    transport.close()


async def _within(future: asyncio.Future[None], seconds: float) -> bool:
    """Wait up to `seconds` for `future`; whether it is done. Cancelling the wait leaves it alone."""
    done, _ = await asyncio.wait({future}, timeout=seconds)
    return bool(done)


async def end_process_group(group: int, grace: float) -> None:
    """SIGTERM every process of `group`; SIGKILL the group if anything still runs after `grace` seconds,
    then wait (as long again, at least a second) until the killed processes are gone.

    SIGKILL is also sent when this wait is cancelled, so a second cancellation cannot leave
    processes behind.
    """
    if not _signal(group, signal.SIGTERM):
        return  # nothing left in the group
    ended = False
    try:
        ended = await _ended_within(group, grace)
    finally:
        if not ended:
            _signal(group, signal.SIGKILL)
    if not ended:
        await _ended_within(group, max(grace, 1.0))  # a signal is delivered when its target next runs


async def _ended_within(group: int, seconds: float) -> bool:
    """Poll until nothing in `group` runs; whether that happened within `seconds`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    pause = 0.005
    while loop.time() < deadline:
        await asyncio.sleep(min(pause, max(0.0, deadline - loop.time())))
        if not group_is_alive(group):
            return True
        pause = min(pause * 2, 0.1)
    return False


def group_is_alive(group: int) -> bool:
    """Whether a process of `group` is still running (zombies waiting to be reaped do not count)."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _has_running_member(group)


def _has_running_member(group: int) -> bool:
    """Read /proc where there is one: a group of zombies only (a container whose init does not reap
    orphans) is finished. Without /proc, assume something still runs."""
    try:
        pids = [name for name in os.listdir(_PROC) if name.isdigit()]
    except OSError:
        return True
    for pid in pids:
        try:
            with open(f"{_PROC}/{pid}/stat", "rb") as file:
                stat = file.read()
        except OSError:
            continue  # it ended while we looked
        state, _parent, member_of = stat[stat.rindex(b")") + 2 :].split(maxsplit=3)[:3]
        if int(member_of) == group and state not in (b"Z", b"X"):
            return True
    return False


def _signal(group: int, signum: int) -> bool:
    """Send `signum` to `group`; False when nothing in it could be signalled (gone, or not ours)."""
    try:
        os.killpg(group, signum)
    except OSError:
        return False
    return True
