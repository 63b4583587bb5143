"""Faults in per-session objects: one that fails to start, to stop, or whose session closes under it. The
session goes on (a later run retries), teardown is bounded and logged, and nothing is left behind."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator
from typing import Any

import pytest
from dependency_injector import containers, providers

from llm_do import CallScope, Runtime, RuntimeConfig, Scope, SessionLocalSingleton, Toolset, ToolsetSpec, entry

from ..mcp_support import alive, server_processes, stdio_toolset


class Unreachable(Exception):
    pass


class Page:
    """A browser page that cannot be opened the first time it is tried."""

    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.open = False

    async def __aenter__(self) -> Page:
        tries = self.events.count("enter")
        self.events.append("enter")
        if tries == 0:
            raise Unreachable("the browser did not start")
        self.open = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.events.append("exit")

    def cleanup(self) -> None:
        self.events.append("cleanup")


class Pages(containers.DeclarativeContainer):
    events = providers.Object([])
    page = SessionLocalSingleton(Page, events)


def looking(container: Pages, name: str) -> Any:
    @entry(name="look")
    async def look(scope: CallScope, data: str) -> bool:
        return bool(getattr(container, name)().open)

    return look


async def test_a_per_session_object_that_fails_to_start_in_the_first_run_is_started_again_by_the_next() -> None:
    container = Pages(events=[])
    events: list[str] = container.events()
    async with Runtime(container, entries=[looking(container, "page")]) as runtime:
        session = await runtime.session("ada")
        with pytest.raises(Unreachable, match="the browser did not start"):
            await session.run("look", "")
        assert (await session.run("look", "")).output is True  # before: handed out unopened, never entered again
        assert set(session.per_session) == {"page"}
        await session.aclose()
    assert events == ["enter", "enter", "exit", "cleanup"]  # entered again; exited and cleaned up once


class SharedPage(Page, Toolset):
    """The same page, as a toolset every run shares."""


class SharedPages(containers.DeclarativeContainer):
    events = providers.Object([])
    shared = providers.Singleton(SharedPage, events)


async def test_a_global_toolset_that_fails_to_start_for_one_run_is_started_again_by_the_next() -> None:
    container = SharedPages(events=[])
    events: list[str] = container.events()

    @entry(name="browse", toolsets=["shared"])
    async def browse(scope: CallScope, data: str) -> bool:
        return bool(container.shared().open)

    async with Runtime(container, entries=[browse]) as runtime:
        with pytest.raises(Unreachable, match="the browser did not start"):
            await runtime.run("browse", "")
        assert (await runtime.run("browse", "")).output is True  # before: handed out unopened
        assert (await runtime.run("browse", "")).output is True
    assert events == ["enter", "enter", "exit", "cleanup"]


class SlowPage(Page):
    """A browser page whose first opening hangs until its run is cancelled."""

    made = 0

    def __init__(self, events: list[str], started: asyncio.Event) -> None:
        super().__init__(events)
        self.started = started
        SlowPage.made += 1

    async def __aenter__(self) -> Page:
        self.events.append("enter")
        if self.events.count("enter") == 1:
            self.started.set()
            await asyncio.Event().wait()  # until cancelled
        self.open = True
        return self


class SlowPages(containers.DeclarativeContainer):
    events = providers.Object([])
    started = providers.Dependency(instance_of=asyncio.Event)
    page = SessionLocalSingleton(SlowPage, events, started)


async def test_a_run_cancelled_while_its_session_opens_a_per_session_object_leaves_it_to_the_next_run() -> None:
    container = SlowPages(events=[], started=asyncio.Event())
    events: list[str] = container.events()
    SlowPage.made = 0
    async with Runtime(container, entries=[looking(container, "page")]) as runtime:
        session = await runtime.session("ada")
        first = asyncio.create_task(session.run("look", ""))
        await container.started().wait()
        first.cancel()  # the client went away while the page opened
        with pytest.raises(asyncio.CancelledError):
            await first
        assert (await session.run("look", "")).output is True  # before: handed out unopened
        await session.aclose()
    assert SlowPage.made == 1  # made once, for the session
    assert events == ["enter", "enter", "exit", "cleanup"]


class Stuck:
    """A sandbox whose release hangs (session 'ada') or fails (session 'bo')."""

    def __init__(self) -> None:
        self.owner = ""

    async def __aenter__(self) -> Stuck:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.owner == "ada":
            await asyncio.Event().wait()
        if self.owner == "bo":
            raise RuntimeError("the sandbox would not stop")


class Sandboxes(containers.DeclarativeContainer):
    sandbox = SessionLocalSingleton(Stuck)


async def test_a_per_session_cleanup_that_hangs_or_fails_is_bounded_logged_with_its_session_and_harms_no_other(
    caplog: pytest.LogCaptureFixture,
) -> None:
    container = Sandboxes()

    @entry(name="claim")
    async def claim(scope: CallScope, owner: str) -> str:
        container.sandbox().owner = owner
        return owner

    config = RuntimeConfig(session_idle_timeout=0.05, cleanup_timeout=0.2)
    with caplog.at_level(logging.ERROR, logger="llm_do"):
        async with asyncio.timeout(10):  # a guard: a hanging cleanup must not hold anything up
            async with Runtime(container, entries=[claim], config=config) as runtime:
                ada, bo = await runtime.session("ada"), await runtime.session("bo")
                await ada.run("claim", "ada")
                await bo.run("claim", "bo")
                await bo.wait_closed()  # idled out; its cleanup failed
                assert (await runtime.run("claim", "cy", session="cy")).output == "cy"  # others go on meanwhile
                await ada.wait_closed()  # its cleanup was given up after cleanup_timeout
                again = await runtime.session("ada")  # the id opens again, with a fresh sandbox
                await again.run("claim", "ada")
            # runtime.aclose() returned, though the reopened session's cleanup hung too
    messages = [record.getMessage() for record in caplog.records]
    assert messages.count("cleanup of per-session provider 'sandbox' of session 'bo' failed") == 1
    hung = "cleanup of per-session provider 'sandbox' of session 'ada' did not finish within 0.2s and was cancelled"
    assert messages.count(hung) == 2


class Desks(containers.DeclarativeContainer):
    desk = SessionLocalSingleton(stdio_toolset)


@entry(name="counting", toolsets=["desk"])
async def counting(scope: CallScope, by: int) -> list[Any]:
    """Bump the session's counter twice (saying how the first bump failed, if it did), and name the server."""
    try:
        first: Any = await scope.call_tool("bump", {"by": by})
    except Exception as error:
        first = str(error)
    return [first, await scope.call_tool("bump", {"by": by}), await scope.call_tool("server_pid")]


@pytest.mark.long
async def test_a_per_session_server_killed_between_runs_is_replaced_for_its_session_only() -> None:
    config = RuntimeConfig(approval_mode="approve_all")
    async with Runtime(Desks(), entries=[counting], config=config) as runtime:
        ada, bo = await runtime.session("ada"), await runtime.session("bo")
        mine, theirs = await asyncio.gather(ada.run("counting", 1), bo.run("counting", 10))  # started together
        pid, other = mine.output[2], theirs.output[2]
        assert pid != other and sorted(server_processes()) == sorted([pid, other])  # one each
        os.kill(pid, signal.SIGKILL)
        first, second, new_pid = (await ada.run("counting", 1)).output
        # The first bump raced the death (a readable tool error) or found it seen (a new server); either way the
        # session goes on, on a new server with a new count.
        assert first == 1 or "The MCP server 'desk' stopped while running tool 'bump'" in first
        assert second == (2 if first == 1 else 1) and new_pid != pid and not alive(pid)
        assert (await bo.run("counting", 10)).output == [30, 40, other]  # Bo's server was not touched
        await ada.aclose()
        assert not alive(new_pid) and server_processes() == [other]
    assert server_processes() == []


class Sandbox(Toolset):
    """A per-session toolset; the client of the run that first opens it goes away just as it has opened."""

    def __init__(self, leaving: list[asyncio.Task[Any]], made: list[Sandbox]) -> None:
        self.leaving = leaving
        self.exited = False
        made.append(self)

    async def __aenter__(self) -> Sandbox:
        if self.leaving:  # the run's caller is cancelled in the same turn of the loop as the sandbox opens
            asyncio.get_running_loop().call_soon(self.leaving.pop().cancel)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.exited = True


async def test_a_run_cancelled_just_as_its_per_session_toolset_opened_leaves_that_one_to_the_session() -> None:
    leaving: list[asyncio.Task[Any]] = []
    made: list[Sandbox] = []

    @entry(name="play", toolsets=["sandbox"])
    async def play(scope: CallScope, data: str) -> int:
        return len(made)

    spec = ToolsetSpec(lambda: Sandbox(leaving, made), Scope.PER_SESSION)
    async with Runtime(None, entries=[play], toolsets={"sandbox": spec}) as runtime:
        session = await runtime.session("ada")
        first = asyncio.create_task(session.run("play", ""))
        leaving.append(first)
        with pytest.raises(asyncio.CancelledError):
            await first
        assert (await session.run("play", "")).output == 1  # before: a second sandbox, the first one kept open
        await session.aclose()
    assert [sandbox.exited for sandbox in made] == [True]


class Halt(BaseException):
    """A stop request that is not an `Exception` (as `KeyboardInterrupt` is not)."""


class Desk:
    """Per session: its cleanup is interrupted by a stop request."""

    def cleanup(self) -> None:
        raise Halt("stop now")


class Line:
    def __init__(self, url: str) -> None:
        self.url, self.open = url, True


LINES: list[Line] = []


async def dial(url: str) -> AsyncIterator[Line]:
    LINES.append(Line(url))
    yield LINES[-1]
    LINES[-1].open = False


class Offices(containers.DeclarativeContainer):
    url = providers.Object("tel://main")
    line = providers.Resource(dial, url=url)  # rebuilt for a session that swaps the url
    desk = SessionLocalSingleton(Desk)


async def test_a_session_whose_cleanup_raises_a_stop_request_still_shuts_down_what_its_overrides_rebuilt() -> None:
    LINES.clear()
    container = Offices()

    @entry(name="call")
    async def call(scope: CallScope, data: str) -> str:
        container.desk()
        return str((await container.line()).url)  # type: ignore[misc]

    async with Runtime(container, entries=[call]) as runtime:
        session = await runtime.session("s", overrides={Offices.url: "tel://branch"})
        assert (await session.run("call", "")).output == "tel://branch"
        with pytest.raises(Halt):
            await session.aclose()
        assert [(line.url, line.open) for line in LINES] == [("tel://branch", False)]
