"""After runs of every outcome, no per-call or per-run instance is alive and no handle is open;
and `track_leaks` / `assert_no_leaks` report what does leak, naming it and what holds it."""

from __future__ import annotations

import asyncio
import logging
import queue
import re
import threading

import pytest
from dependency_injector import providers
from pydantic_ai import Agent

from containers import AgentContainer
from llm_do import (
    AgentEntry,
    CallScope,
    Handles,
    RunLocalSingleton,
    Runtime,
    ToolPolicy,
    Toolset,
    entry,
    open_handles,
    tool,
)
from llm_do.testing import (
    LeakError,
    ScriptedModel,
    Step,
    Turn,
    answering,
    assert_no_leaks,
    settle,
    tool_call,
    track_leaks,
)

pytestmark = pytest.mark.whole_heap  # the reports name holders found with gc.get_referrers

kept: list[object] = []


class RunLog:
    pass


class Opener:
    """A helper a toolset keeps its own handle map in (the scope does not look inside it)."""

    def __init__(self) -> None:
        self.streams: Handles[list[str]] = Handles("stream")


class Files(Toolset):
    default_policy = ToolPolicy()  # these tests are about scopes, not approvals

    def __init__(self, log: RunLog) -> None:
        self.log = log
        self.open_files: Handles[list[str]] = Handles("file")
        self.opener = Opener()

    @tool
    def create(self) -> str:
        """Open a file; never closed by the model."""
        return self.open_files.open([])

    @tool
    def stream(self) -> str:
        """Open a stream in the helper; never closed."""
        return self.opener.streams.open([])

    @tool
    def keep(self) -> str:
        """Keep this toolset and the run's log in a global list (a leak)."""
        kept.extend([self, self.log])
        return "kept"

    @tool
    async def fail(self) -> str:
        """Fail."""
        raise ValueError("tool failed")

    @tool
    async def hang(self) -> str:
        """Never return."""
        await asyncio.Event().wait()
        return "unreachable"


class Shared(Toolset):
    """Global: alive after every run, never a leak."""

    default_policy = ToolPolicy()  # these tests are about scopes, not approvals

    @tool
    def ping(self) -> str:
        """Ping."""
        return "pong"


class App(AgentContainer):
    run_log = RunLocalSingleton(RunLog)
    files = providers.Factory(Files, log=run_log)
    shared = providers.Singleton(Shared)


def worker() -> AgentEntry:
    def script(turn: Turn) -> Step:
        if turn.step == 0:
            return tool_call("create")
        if turn.step == 1:
            if turn.prompt == "deep":
                return tool_call("worker", input="ok")
            if turn.prompt in ("fail", "hang", "keep", "stream", "ping"):
                return tool_call(turn.prompt)
        return "done"

    return AgentEntry(Agent(answering(script)), name="worker", toolsets=["files", "shared", "worker"])


async def cancel_a_hanging_run(runtime: Runtime) -> None:
    """Start a `hang` run, wait until it has opened its file and hangs, then cancel it."""
    task = asyncio.create_task(runtime.run("worker", "hang"))
    for _ in range(1000):  # the sync `create` tool runs in a worker thread: count time, not loop turns
        if open_handles():
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_nothing_outlives_its_scope_whatever_the_outcome() -> None:
    app = App()
    with track_leaks() as leaks:
        async with Runtime(app, entries=[worker()]) as runtime:
            assert (await runtime.run("worker", "deep")).output == "done"
            assert (await runtime.run("worker", "ping")).output == "done"
            await asyncio.gather(*(runtime.run("worker", "ok") for _ in range(20)))
            with pytest.raises(ValueError, match="tool failed"):
                await runtime.run("worker", "fail")
            await cancel_a_hanging_run(runtime)
        await settle()  # the cancelled run's abandoned async generators are closed by the loop
        assert_no_leaks()
        assert isinstance(app.shared(), Shared), "a global toolset is still alive, and that is no leak"
    assert leaks.leaks() == [] and open_handles() == []


async def test_a_kept_toolset_and_run_object_are_reported_by_provider_and_holder() -> None:
    with track_leaks():
        async with Runtime(App(), entries=[worker()]) as runtime:
            await runtime.run("worker", "keep")
        with pytest.raises(LeakError) as raised:
            assert_no_leaks()
    kept.clear()
    message = str(raised.value)
    lines = message.splitlines()
    assert lines[0] == "2 leak(s) after their scope ended:"
    assert re.fullmatch(
        r"- RunLog of per-run provider 'run_log' outlived its scope; "
        r"made by RunLog \(tests/scopes/test_leaks\.py:\d+\); "
        r"held by (attribute 'log' of a Files, a list in global 'kept' of module tests\.scopes\.test_leaks"
        r"|a list in global 'kept' of module tests\.scopes\.test_leaks, attribute 'log' of a Files)",
        lines[1],
    ), lines[1]
    assert re.fullmatch(
        r"- Files of toolset 'files' \(per_call\) of entry 'worker' outlived its scope; "
        r"made by Files \(tests/scopes/test_leaks\.py:\d+\); "
        r"held by a list in global 'kept' of module tests\.scopes\.test_leaks",
        lines[2],
    ), lines[2]


async def test_a_handle_left_open_in_a_kept_helper_is_reported() -> None:
    helpers: list[Opener] = []

    @entry(toolsets=["files"])
    async def grab(scope: CallScope, input_data: str) -> str:
        await scope.call_tool("stream")  # opened in the helper, which teardown does not look into
        helpers.append(scope.toolset("files").opener)  # type: ignore[attr-defined]
        return "grabbed"

    with track_leaks() as leaks:
        async with Runtime(App(), entries=[grab]) as runtime:
            await runtime.run("grab", "x")
        found = leaks.leaks()
        assert len(found) == 1, found
        assert re.fullmatch(
            r"handle\(s\) stream_[0-9a-f]{8} still open in Handles\('stream'\) not owned by any scope, "
            r"held by attribute 'streams' of a Opener",
            found[0],
        ), found[0]
        helpers.clear()
        assert leaks.leaks() == []


async def test_open_handles_of_a_kept_toolset_name_the_toolset() -> None:
    holder: list[Files] = []

    @entry(toolsets=["files"])
    async def hoard(scope: CallScope, input_data: str) -> str:
        await scope.call_tool("create")
        toolset = scope.toolset("files")
        holder.append(toolset)
        return "hoarded"

    with track_leaks() as leaks:
        async with Runtime(App(), entries=[hoard]) as runtime:
            await runtime.run("hoard", "x")
        holder[0].open_files.open(["reopened after the call"])
        found = leaks.leaks()
    assert len(found) == 3, found
    assert found[0].startswith("RunLog of per-run provider 'run_log' outlived its scope")
    assert found[0].endswith("held by attribute 'log' of a Files")
    assert found[1].startswith("Files of toolset 'files' (per_call) of entry 'hoard' outlived its scope; made by Files")
    assert found[1].endswith("held by a list in variable 'holder' in the closure of " + hoard.func.__qualname__)
    assert re.fullmatch(
        r"handle\(s\) file_[0-9a-f]{8} still open in Handles\('file'\) "
        r"of Files of toolset 'files' \(per_call\) of entry 'hoard'",
        found[2],
    ), found[2]
    holder[0].open_files.pop(next(iter(holder[0].open_files)))


async def test_objects_of_a_running_scope_are_not_leaks() -> None:
    seen: list[str] = []

    @entry(toolsets=["files"])
    async def check_midway(scope: CallScope, input_data: str) -> str:
        await scope.call_tool("create")  # an open handle, in a call that is still running
        try:
            assert_no_leaks()
        except LeakError as error:
            seen.append(str(error))
        return "checked"

    with track_leaks():
        async with Runtime(App(), entries=[check_midway]) as runtime:
            await runtime.run("check_midway", "x")
        assert_no_leaks()
    assert seen == []


async def test_a_leak_names_the_code_that_opened_its_scope() -> None:
    keeper = AgentEntry(Agent(ScriptedModel(tool_call("keep"), "kept")), name="keeper", toolsets=["files"])

    @entry(toolsets=["keeper"])
    async def outer(scope: CallScope, input_data: str) -> str:
        return str(await scope.call_agent("keeper", "hi"))  # this line opens the nested call

    with track_leaks() as leaks:
        async with Runtime(App(), entries=[outer, keeper]) as runtime:
            await runtime.run("outer", "x")
        found = leaks.leaks()
    kept.clear()
    [files] = [line for line in found if line.startswith("Files of")]
    assert re.search(r"in a scope opened at tests/scopes/test_leaks\.py:\d+ in outer; held by", files), files


async def test_a_toolset_held_by_a_function_running_in_a_thread_is_reported_with_where_gc_cannot_look() -> None:
    handoff: queue.SimpleQueue[object] = queue.SimpleQueue()
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        toolset = handoff.get()  # a local of a running function: gc.get_referrers does not see it
        taken.set()
        release.wait()
        del toolset

    @entry(toolsets=["files"])
    async def lend(scope: CallScope, input_data: str) -> str:
        handoff.put(scope.toolset("files"))
        return "lent"

    holder = threading.Thread(target=hold, name="holder")
    holder.start()
    try:
        with track_leaks() as leaks:
            async with Runtime(App(), entries=[lend]) as runtime:
                await runtime.run("lend", "x")
            assert taken.wait(60)
            found = leaks.leaks()
    finally:
        release.set()
        holder.join()
    [files] = [line for line in found if line.startswith("Files of")]
    assert files.endswith(
        "held by nothing visible to gc (which does not see the locals of functions running in threads, "
        "objects frozen by gc.freeze(), or a holder that let go of it while this report was made)"
    ), files


def test_assert_no_leaks_needs_tracking() -> None:
    with pytest.raises(RuntimeError, match=r"needs leak tracking: run the code inside `with track_leaks\(\):`"):
        assert_no_leaks()


class Lookup(Toolset):
    """Finds things the way the application's code does: a helper logs the failure it re-raises."""

    default_policy = ToolPolicy()  # these tests are about scopes, not approvals

    def __init__(self, keep: bool = False) -> None:
        self.keep = keep

    def _find(self, key: str) -> str:
        try:
            raise LookupError(key)
        except LookupError:
            logging.getLogger("app.database").exception("lookup failed")  # a handler keeps the record
            raise

    @tool
    def find(self, key: str) -> str:
        """Find `key`."""
        if self.keep:
            kept.append(self)
        try:
            return self._find(key)
        except LookupError:
            return f"no {key}"


class Records(logging.Handler):
    """Keeps every record, as pytest's log capture does until the test ends."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.parametrize("keep", [False, True])
async def test_a_toolset_held_only_by_a_logged_traceback_is_no_leak(keep: bool) -> None:
    class Logged(AgentContainer):
        lookup = providers.Factory(Lookup, keep=keep)

    records = Records()
    logging.getLogger("app.database").addHandler(records)
    finder = AgentEntry(
        Agent(answering(lambda turn: tool_call("find", key="k") if turn.step == 0 else turn.returned("find"))),
        name="finder",
        toolsets=["lookup"],
    )
    try:
        with track_leaks() as leaks:
            async with Runtime(Logged(), entries=[finder]) as runtime:
                assert (await runtime.run("finder", "find k")).output == "no k"
            found = leaks.leaks()
    finally:
        logging.getLogger("app.database").removeHandler(records)
        kept.clear()
    assert len(records.records) == 1 and records.records[0].exc_info is not None  # the record keeps the frames
    if keep:  # a real holder is still reported
        assert len(found) == 1 and "held by a list in global 'kept'" in found[0], found
    else:
        assert found == []
