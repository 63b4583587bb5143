"""Handles: explicit toolset state the model passes back; unknown handles are readable, forgotten ones undone."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import pytest
from pydantic_ai import Agent

from llm_do import AgentEntry, Handles, Runtime, RuntimeConfig, ToolPolicy, Toolset, UnknownHandle, open_handles, tool
from llm_do.testing import Step, Turn, answering, tool_call

sys.path.insert(0, str(Path(__file__).parents[2] / "examples" / "ledger"))
from ledger_app import App, clerk, db_path_in


def test_open_get_pop_and_readable_errors() -> None:
    handles: Handles[str] = Handles("page")
    first = handles.open("one")
    second = handles.open("two")
    assert first.startswith("page_") and len(first) == len("page_") + 8 and first != second
    assert handles.get(first) == "one"
    assert handles.pop(first) == "one"
    with pytest.raises(UnknownHandle) as caught:
        handles.get(first)
    assert caught.value.message == (
        f"Unknown handle {first!r}: it is not open here (never opened, or already closed). Open page handles: {second}."
    )
    assert list(handles) == [second] and second in handles and len(handles) == 1
    handles.pop(second)
    with pytest.raises(UnknownHandle, match=r"No page handle is open; open one first\."):
        handles.pop("page_00000000")
    with pytest.raises(ValueError, match="identifier"):
        Handles("not a prefix")


async def test_close_all_releases_newest_first_and_survives_a_failing_release() -> None:
    released: list[str] = []

    def release(name: str) -> None:
        released.append(name)
        if name == "b":
            raise RuntimeError("cannot release b")

    handles: Handles[str] = Handles("res", on_forget=release)
    for name in "abc":
        handles.open(name)
    await handles.close_all()
    assert released == ["c", "b", "a"]
    assert len(handles) == 0


APPROVE_ALL = RuntimeConfig(approval_mode="approve_all")  # the example's policy asks before a commit


def app_at(tmp_path: Path) -> App:
    app = App()
    app.config.db_path.from_value(db_path_in(tmp_path))
    return app


async def test_the_example_clerk_commits_through_a_handle(tmp_path: Path) -> None:
    app = app_at(tmp_path)
    async with Runtime(app, entries=[clerk], config=APPROVE_ALL) as runtime:
        result = await runtime.run("clerk", "Move 10 from A to B")
    assert result.output.startswith("Done: txn_") and result.output.endswith(" committed.")
    assert app.database().balances() == {"A": 90, "B": 60}
    assert open_handles() == []


async def test_a_forgotten_transaction_is_rolled_back_not_committed(tmp_path: Path) -> None:
    def forgetful(turn: Turn) -> Step:
        if turn.step == 0:
            return tool_call("begin")
        if turn.step == 1:
            return tool_call("transfer", txn=turn.returns[0], source="A", target="B", amount=30)
        return "I moved it (but never committed)"

    app = app_at(tmp_path)
    entry = AgentEntry(Agent(answering(forgetful)), name="forgetful", toolsets=["db"])
    async with Runtime(app, entries=[entry]) as runtime:
        result = await runtime.run("forgetful", "go")
    assert result.output == "I moved it (but never committed)"
    assert app.database().balances() == {"A": 100, "B": 50}
    assert open_handles() == []


async def test_an_unknown_handle_reaches_the_model_and_the_run_goes_on(tmp_path: Path) -> None:
    def confused(turn: Turn) -> Step:
        if turn.step == 0:
            return tool_call("begin")
        if turn.step == 1:
            return tool_call("commit", txn="txn_deadbeef")
        if turn.step == 2:
            seen = str(turn.returns[0])
            return tool_call("commit", txn=seen.split("Open txn handles: ")[1].rstrip("."))
        return str(turn.returns[0])

    app = app_at(tmp_path)
    entry = AgentEntry(Agent(answering(confused)), name="confused", toolsets=["db"])
    async with Runtime(app, entries=[entry], config=APPROVE_ALL) as runtime:
        result = await runtime.run("confused", "go")
    assert result.output.endswith(" committed")
    log = str(result.log[0].messages)
    assert "Unknown handle 'txn_deadbeef'" in log


class Transaction:
    """Rolled back when forgotten; `hang` makes its rollback wait forever (a silent network)."""

    def __init__(self, name: str, events: list[str], hang: bool) -> None:
        self.name, self.events, self.hang = name, events, hang

    async def rollback(self) -> None:
        self.events.append(f"rollback {self.name}")
        if self.hang:
            await asyncio.Event().wait()
        self.events.append(f"rolled back {self.name}")


async def test_a_forgotten_handle_whose_release_hangs_is_given_up_and_the_others_are_still_rolled_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each forgotten handle has the cleanup budget of its own: one that never rolls back does not keep the
    others (their connections, their locks) open."""
    events: list[str] = []

    class Database(Toolset):
        def __init__(self) -> None:
            self.txns: Handles[Transaction] = Handles("txn")

        @tool
        async def begin(self, name: str, hang: bool) -> str:
            """Open a transaction."""
            return self.txns.open(Transaction(name, events, hang))

    def script(turn: Turn) -> Step:
        if turn.step == 0:
            return tool_call("begin", name="first", hang=False)
        if turn.step == 1:
            return tool_call("begin", name="stuck", hang=True)
        return "forgot both"

    caplog.set_level(logging.ERROR, logger="llm_do")
    job = AgentEntry(Agent(answering(script)), name="job", toolsets=["db"])
    config = RuntimeConfig(cleanup_timeout=0.2)
    async with Runtime(
        None, entries=[job], toolsets={"db": Database}, policies={"db": ToolPolicy()}, config=config
    ) as runtime:
        assert (await runtime.run("job", "go")).output == "forgot both"
    assert events == ["rollback stuck", "rollback first", "rolled back first"]
    [timeout] = [record.getMessage() for record in caplog.records if "did not finish" in record.getMessage()]
    assert "toolset 'db' (per_call) of entry 'job'" in timeout and "forgotten handle txn_" in timeout
    assert open_handles() == []
