"""Overrides for one run: each run sees its own swapped objects, and no concurrent run ever does."""

from __future__ import annotations

import asyncio
import gc
import logging
import weakref
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest
from dependency_injector import containers, providers
from dependency_injector.wiring import Provide, inject
from pydantic_ai import Agent

from containers import AgentContainer
from llm_do import (
    AgentEntry,
    ConfigurationError,
    RunLocalSingleton,
    Runtime,
    RuntimeConfig,
    SessionLocalSingleton,
    Toolset,
    tool,
)
from llm_do.testing import Turn, answering, tool_call, track_leaks


class Db:
    def __init__(self, name: str = "real") -> None:
        self.name = name
        self.closed = False

    def cleanup(self) -> None:
        self.closed = True


class Service:
    """A global built from the database: rebuilt for a run that overrides the database."""

    made: ClassVar[weakref.WeakSet[Service]] = weakref.WeakSet()
    built_from: ClassVar[list[str]] = []

    def __init__(self, db: Db) -> None:
        self.db = db
        Service.made.add(self)
        Service.built_from.append(db.name)


class Lookup(Toolset):
    def __init__(self, db: Db, service: Service) -> None:
        self.db = db
        self.service = service

    @tool(read_only=True)
    async def which(self) -> str:
        """Which database this call reads."""
        await asyncio.sleep(0.01)  # concurrent runs overlap here
        return f"{self.db.name}/{self.service.db.name}"


class Ledger:
    def __init__(self, db: Db) -> None:
        self.db = db
        self.cleaned = False

    def cleanup(self) -> None:
        self.cleaned = True


class App(AgentContainer):
    db = providers.Singleton(Db)
    service = providers.Singleton(Service, db=db)
    lookup = providers.Factory(Lookup, db=db, service=service)
    ledger = RunLocalSingleton(Ledger, db=db)


def reader(name: str = "reader", toolsets: tuple[str, ...] = ("lookup",)) -> AgentEntry:
    def answer(turn: Turn) -> Any:
        return tool_call("which") if turn.step == 0 else str(turn.returned("which"))

    return AgentEntry(Agent(answering(answer)), name=name, toolsets=list(toolsets))


@pytest.fixture
async def runtime() -> AsyncIterator[Runtime]:
    async with Runtime(App(), entries=[reader()]) as opened:
        yield opened


async def test_concurrent_runs_each_see_only_their_own_database(runtime: Runtime) -> None:
    cases = [Db(f"case{i}") for i in range(6)]
    results = await asyncio.gather(
        *(runtime.run("reader", "which?", overrides={App.db: case}) for case in cases),
        runtime.run("reader", "which?"),
    )
    assert [result.output for result in results] == [*(f"case{i}/case{i}" for i in range(6)), "real/real"]


async def test_a_global_built_from_an_overridden_provider_is_the_runs_own(runtime: Runtime) -> None:
    container: Any = runtime.container
    real = container.service()
    result = await runtime.run("reader", "which?", overrides={"db": Db("case")})
    assert result.output == "case/case"
    assert container.service() is real and real.db.name == "real"  # the process's global is untouched
    assert (await runtime.run("reader", "which?")).output == "real/real"


async def test_keys_may_be_the_containers_provider_its_classs_or_a_name(runtime: Runtime) -> None:
    container: Any = runtime.container
    for key in (container.db, App.db, "db"):
        assert (await runtime.run("reader", "?", overrides={key: Db("k")})).output == "k/k"


async def test_a_key_that_names_no_provider_is_refused_naming_it(runtime: Runtime) -> None:
    with pytest.raises(ConfigurationError, match=r"overrides: 'dbb' is not a provider of the runtime's container"):
        await runtime.run("reader", "?", overrides={"dbb": Db()})
    stray = providers.Singleton(Db)
    with pytest.raises(ConfigurationError, match="is not a provider of the runtime's container"):
        await runtime.run("reader", "?", overrides={stray: Db()})
    with pytest.raises(ConfigurationError, match="configuration option"):
        await runtime.run("reader", "?", overrides={App.config.model: "test"})


async def test_a_given_object_is_never_torn_down_and_what_the_run_made_is(runtime: Runtime) -> None:
    given = Ledger(Db("given"))
    result = await runtime.run("reader", "?", overrides={App.ledger: given})
    assert result.per_run["ledger"] is given and not given.cleaned

    made = await runtime.run("reader", "?", overrides={App.ledger: providers.Factory(Ledger, db=App.db)})
    ledger = made.per_run["ledger"]
    assert isinstance(ledger, Ledger) and ledger is not given and ledger.cleaned


async def test_a_per_run_object_is_built_from_the_runs_override(runtime: Runtime) -> None:
    result = await runtime.run("reader", "?", overrides={App.db: Db("case")})
    assert result.per_run["ledger"].db.name == "case"


async def test_a_process_wide_override_is_beaten_by_a_runs_and_undone_as_usual(runtime: Runtime) -> None:
    container: Any = runtime.container
    assert (await runtime.run("reader", "?", overrides={App.db: Db("run")})).output == "run/run"
    with container.db.override(Db("process")):
        container.service.reset()
        assert (await runtime.run("reader", "?")).output == "process/process"
        assert (await runtime.run("reader", "?", overrides={App.db: Db("run")})).output == "run/run"
        assert (await runtime.run("reader", "?")).output == "process/process"
    container.service.reset()
    assert (await runtime.run("reader", "?")).output == "real/real"


async def test_nested_and_parallel_calls_see_the_runs_override() -> None:
    def boss(turn: Turn) -> Any:
        if turn.step == 0:
            return [tool_call("which"), tool_call("reader", input="which?"), tool_call("reader", input="which?")]
        return f"{turn.returned('which')} {turn.returns[1]} {turn.returns[2]}"

    entries = [AgentEntry(Agent(answering(boss)), name="boss", toolsets=["lookup", "reader"]), reader()]
    async with Runtime(App(), entries=entries) as runtime:
        outputs = await asyncio.gather(
            runtime.run("boss", "go", overrides={App.db: Db("a")}),
            runtime.run("boss", "go", overrides={App.db: Db("b")}),
        )
    assert [result.output for result in outputs] == ["a/a a/a a/a", "b/b b/b b/b"]


class Pool:
    def __init__(self, url: str) -> None:
        self.url = url
        self.open = True


async def open_pool(url: str) -> AsyncIterator[Pool]:
    pool = Pool(url)
    try:
        yield pool
    finally:
        pool.open = False


class PoolReader(Toolset):
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    @tool(read_only=True)
    def url(self) -> str:
        """The pool's address."""
        return self.pool.url


class Pools(containers.DeclarativeContainer):
    url = providers.Object("postgres://real")
    pool = providers.Resource(open_pool, url=url)
    reader = providers.Factory(PoolReader, pool=pool)


async def test_a_resource_built_from_an_override_is_opened_for_the_run_and_shut_down_after() -> None:
    seen: list[Pool] = []

    def answer(turn: Turn) -> Any:
        return tool_call("url") if turn.step == 0 else str(turn.returned("url"))

    class Peek(PoolReader):
        def __init__(self, pool: Pool) -> None:
            super().__init__(pool)
            seen.append(pool)

    container = Pools()
    container.reader.override(providers.Factory(Peek, pool=container.pool))
    async with Runtime(container, entries=[AgentEntry(Agent(answering(answer)), name="r", toolsets=["reader"])]) as rt:
        await container.init_resources()  # type: ignore[misc]
        first, second = await asyncio.gather(
            rt.run("r", "?", overrides={Pools.url: "postgres://case"}), rt.run("r", "?")
        )
        assert (first.output, second.output) == ("postgres://case", "postgres://real")
        by_url = {pool.url: pool for pool in seen}
        case_pool, real_pool = by_url["postgres://case"], by_url["postgres://real"]
        assert not case_pool.open  # shut down with its run
        assert real_pool.open  # the process's, until the runtime closes
    assert not real_pool.open


class Sandbox:
    def __init__(self, db: Db) -> None:
        self.db = db


class WithSessions(App):
    sandbox = SessionLocalSingleton(Sandbox, db=App.db)


async def test_a_sessions_overrides_reach_its_runs_and_its_objects() -> None:
    async with Runtime(WithSessions(), entries=[reader()]) as runtime:
        session = await runtime.session("s1", overrides={"db": Db("session")})
        other = await runtime.session("s2")
        first = await session.run("reader", "?")
        assert first.output == "session/session"
        assert session.per_session["sandbox"].db.name == "session"
        assert (await other.run("reader", "?")).output == "real/real"
        assert other.per_session["sandbox"].db.name == "real"
        with pytest.raises(ConfigurationError, match="give the overrides to the session instead"):
            await session.run("reader", "?", overrides={"db": Db("run")})
        with pytest.raises(Exception, match="open already"):
            await runtime.session("s1", overrides={"db": Db("again")})


async def test_a_live_run_sees_its_overrides(runtime: Runtime) -> None:
    async with runtime.stream("reader", "?", overrides={App.db: Db("live")}, model_events=False) as live:
        async for _ in live:
            pass
    assert (await live.result()).output == "live/live"


class Wired(Toolset):
    """A toolset whose tool reads the database through code wired with dependency-injector's `Provide`."""

    @tool(read_only=True)
    def which(self) -> str:
        """Which database the application's own code reads."""
        return database_name()


@inject
def database_name(db: Db = Provide[App.db]) -> str:
    return db.name


class WiredApp(App):
    wired = providers.Factory(Wired)


async def test_code_wired_with_provide_sees_the_runs_override() -> None:
    container = WiredApp()
    container.wire(modules=[__name__])
    try:
        async with Runtime(container, entries=[reader(toolsets=("wired",))]) as runtime:
            first, second = await asyncio.gather(
                runtime.run("reader", "?", overrides={WiredApp.db: Db("case")}), runtime.run("reader", "?")
            )
    finally:
        container.unwire()
    assert (first.output, second.output) == ("case", "real")


async def test_nothing_a_run_was_given_or_rebuilt_outlives_it() -> None:
    given = [Db(f"leak{i}") for i in range(3)]
    with track_leaks() as leaks:
        async with Runtime(App(), entries=[reader()]) as runtime:
            await asyncio.gather(*(runtime.run("reader", "?", overrides={App.db: db}) for db in given))
            assert sorted(name for name in Service.built_from if name.startswith("leak")) == ["leak0", "leak1", "leak2"]
            gc.collect()
            assert not [service for service in Service.made if service.db in given]  # gone with their runs
            leaks.assert_no_leaks()


async def test_a_resource_rebuilt_for_a_run_that_hangs_as_it_closes_is_given_up_after_the_cleanup_budget(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A run's end waits for what its overrides rebuilt as for any object it owns: within the cleanup budget."""

    async def stuck_pool(url: str) -> AsyncIterator[Pool]:
        yield Pool(url)
        if url == "postgres://stuck":
            await asyncio.Event().wait()  # a server that never answers the goodbye

    class Stuck(containers.DeclarativeContainer):
        url = providers.Object("postgres://real")
        pool = providers.Resource(stuck_pool, url=url)
        reader = providers.Factory(PoolReader, pool=pool)

    def answer(turn: Turn) -> Any:
        return tool_call("url") if turn.step == 0 else str(turn.returned("url"))

    caplog.set_level(logging.ERROR, logger="llm_do")
    entries = [AgentEntry(Agent(answering(answer)), name="r", toolsets=["reader"])]
    config = RuntimeConfig(cleanup_timeout=0.2)
    async with Runtime(Stuck(), entries=entries, config=config) as runtime:
        async with asyncio.timeout(30):  # a guard: before, the run waited for the pool forever
            result = await runtime.run("r", "?", overrides={Stuck.url: "postgres://stuck"})
        assert result.output == "postgres://stuck"
    assert any("did not finish within 0.2s" in record.getMessage() for record in caplog.records)
