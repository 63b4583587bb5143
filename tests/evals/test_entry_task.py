"""Evaluations with pydantic-evals: each case runs in a run of its own, with its own database, and cases run at
once without reading each other's."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import providers
from pydantic_ai import Agent
from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import EqualsExpected

from containers import AgentContainer
from llm_do import AgentEntry, LlmDoError, Runtime, Toolset, tool
from llm_do.testing import EntryTask, Turn, answering, tool_call


class Accounts:
    def __init__(self, path: str) -> None:
        self.path = path

    def balance(self, name: str) -> int:
        with sqlite3.connect(self.path) as conn:
            row = conn.execute("SELECT balance FROM accounts WHERE name = ?", (name,)).fetchone()
        return 0 if row is None else int(row[0])


class Teller(Toolset):
    def __init__(self, accounts: Accounts) -> None:
        self.accounts = accounts

    @tool(read_only=True)
    async def balance(self, name: str) -> int:
        """The balance of `name`."""
        await asyncio.sleep(0.01)  # the cases overlap here
        return self.accounts.balance(name)


class Bank(AgentContainer):
    accounts = providers.Singleton(Accounts, path=":memory:")
    teller = providers.Factory(Teller, accounts=accounts)


def answer(turn: Turn) -> Any:
    return tool_call("balance", name=turn.prompt) if turn.step == 0 else str(turn.returns[0])


teller = AgentEntry(Agent(answering(answer)), name="teller", toolsets=["teller"])


def seeded(directory: Path, name: str, balances: dict[str, int]) -> Accounts:
    path = directory / f"{name}.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE accounts (name TEXT PRIMARY KEY, balance INTEGER)")
        conn.executemany("INSERT INTO accounts VALUES (?, ?)", balances.items())
    return Accounts(str(path))


def dataset() -> Dataset[str, str, dict[str, int]]:
    cases = [
        Case(name=f"case{i}", inputs="alice", expected_output=str(i * 10), metadata={"alice": i * 10}) for i in range(6)
    ]
    return Dataset(name="balances", cases=cases, evaluators=[EqualsExpected()])


async def test_cases_at_once_each_read_their_own_database(tmp_path: Path) -> None:
    async with Runtime(Bank(), entries=[teller]) as runtime:
        task: EntryTask[str] = EntryTask(
            runtime, "teller", overrides=lambda case: {Bank.accounts: seeded(tmp_path, case.name, case.metadata)}
        )
        report = await task.evaluate(dataset(), max_concurrency=6)
    assert [case.output for case in report.cases] == [str(i * 10) for i in range(6)]
    assert all(case.assertions["EqualsExpected"].value for case in report.cases)
    assert not report.failures
    first = report.cases[0]
    assert first.metrics["requests"] == 2 and first.metrics["tool_calls"] == 1
    assert first.attributes["calls"] == "teller (ok)"


async def test_process_wide_overrides_would_have_mixed_the_cases(tmp_path: Path) -> None:
    """What the per-case overrides avoid: the same dataset, each case overriding the container for everyone."""
    container = Bank()
    async with Runtime(container, entries=[teller]) as runtime:

        async def shared(inputs: str) -> str:
            case_db = seeded(tmp_path, f"shared{inputs}", {"alice": int(inputs)})
            with container.accounts.override(case_db):
                return str((await runtime.run("teller", "alice")).output)

        cases = [Case(name=f"c{i}", inputs=str(i * 10), expected_output=str(i * 10)) for i in range(6)]
        report = await Dataset(name="shared", cases=cases, evaluators=[EqualsExpected()]).evaluate(
            shared, max_concurrency=6, progress=False
        )
    assert not all(case.assertions["EqualsExpected"].value for case in report.cases)


async def test_a_per_case_model_and_approver(tmp_path: Path) -> None:
    class Payments(Toolset):
        @tool
        def pay(self, amount: int) -> str:
            """Pay `amount`."""
            return f"paid {amount}"

    class Shop(AgentContainer):
        payments = providers.Factory(Payments)

    payer = AgentEntry(Agent(), name="payer", toolsets=["payments"])
    allowed = {"small": 5, "large": 500}

    def model_for(case: Case[Any, Any, Any]) -> Any:
        return answering(
            lambda turn: tool_call("pay", amount=allowed[case.name]) if turn.step == 0 else str(turn.returns[0])
        )

    def approver_for(case: Case[Any, Any, Any]) -> Any:
        return lambda request: "approve" if request.args["amount"] < 100 else "deny"

    async with Runtime(Shop(), entries=[payer]) as runtime:
        task: EntryTask[str] = EntryTask(runtime, payer, model=model_for, case_approver=approver_for)
        report = await task.evaluate(
            Dataset(name="payments", cases=[Case(name="small", inputs="pay"), Case(name="large", inputs="pay")])
        )
    outputs = {case.name: case.output for case in report.cases}
    assert outputs["small"] == "paid 5"
    assert "was not run" in outputs["large"]


async def test_a_per_case_argument_without_the_case_says_how_to_run_it() -> None:
    async with Runtime(Bank(), entries=[teller]) as runtime:
        task: EntryTask[str] = EntryTask(runtime, "teller", overrides=lambda case: {})
        with pytest.raises(LlmDoError, match=r"run the dataset with task.evaluate\(dataset\)"):
            await task("alice")
