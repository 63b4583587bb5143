"""Entries and a JobQueue for tests/jobs/test_jobs.py; worker processes import it (`tests.jobs_app:queue`).

Each entry writes what it did to the file named in its input, so the test (another process) can see
which worker ran it and whether its teardown ran.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dependency_injector import providers
from opentelemetry import trace
from pydantic import BaseModel
from pydantic_ai import Agent

from containers import AgentContainer
from llm_do import AgentEntry, CallScope, Runtime, ToolPolicy, Toolset, entry, tool
from llm_do.jobs import JobEntry, JobQueue, current_job
from llm_do.testing import Step, Turn, answering, tool_call


def _note(path: str, line: str) -> None:
    with Path(path).open("a") as file:
        file.write(f"{line}\n")


class Notes(Toolset):
    """Per call: notes lines to a file; its teardown notes `teardown <job id> <pid>`."""

    default_policy = ToolPolicy()  # declared: its calls need no approval (the jobs tests are not about approvals)

    def __init__(self) -> None:
        self.path: str | None = None

    @tool
    async def note(self, path: str, line: str) -> str:
        """Append `line` to the file at `path`."""
        self.path = path
        _note(path, line)
        return "noted"

    async def cleanup(self) -> None:
        job = current_job()
        if self.path is not None and job is not None:
            _note(self.path, f"teardown {job.id} {os.getpid()}")


class Vault(Toolset):
    """A tool that needs approval: a worker has no terminal to ask on."""

    @tool(requires_approval=True)
    async def open_vault(self) -> str:
        """Open the vault."""
        return "the vault is open"


class JobsApp(AgentContainer):
    notes = providers.Factory(Notes)
    vault = providers.Factory(Vault)


def _vault_answer(turn: Turn) -> Step:
    return tool_call("open_vault") if turn.step == 0 else f"vault said: {turn.returns[0]}"


guarded = AgentEntry(Agent(answering(_vault_answer)), name="guarded", toolsets=["vault"])


@entry(toolsets=["notes"])
async def sleeper(scope: CallScope, input_data: dict[str, Any]) -> str:
    """Notes `started <job> <pid>`, sleeps `seconds` (`then` seconds on a retry if given), notes `finished <job>`."""
    job = current_job()
    assert job is not None
    await scope.call_tool("note", {"path": input_data["path"], "line": f"started {job.id} {os.getpid()}"})
    retry = job.attempt > 1 and "then" in input_data
    await asyncio.sleep(float(input_data["then"] if retry else input_data["seconds"]))
    _note(input_data["path"], f"finished {job.id} attempt {job.attempt}")
    return f"slept {input_data['seconds']}"


@entry
async def boom(scope: CallScope, input_data: Any) -> str:
    raise ValueError(f"boom on {input_data!r}")


@entry
async def nul(scope: CallScope, input_data: Any) -> dict[str, Any]:
    """Returns (or, with `raise`, raises) text with a NUL character in it: `"\\0"` in its input stands for one
    (job inputs cannot hold NUL: procrastinate keeps them as jsonb)."""
    said = str(input_data["text"]).replace("\\0", "\x00")
    if input_data.get("raise"):
        raise ValueError(said)
    return {"said": said}


@entry
async def flaky(scope: CallScope, input_data: Any) -> dict[str, Any]:
    """Fails on its first attempt, succeeds on the next."""
    job = current_job()
    assert job is not None
    if job.attempt == 1:
        raise ConnectionError("the first attempt always fails")
    return {"attempt": job.attempt, "input": input_data}


def _greeting(turn: Turn) -> Step:
    return tool_call("greet_note", path="/dev/null", line="hi") if turn.step == 0 else "hello from the job"


greeter = AgentEntry(
    Agent(answering(_greeting)),
    name="greeter",
    toolsets=["greet_note"],
)


@entry(toolsets=["greeter"])
async def orchestrate(scope: CallScope, input_data: Any) -> str:
    """Calls the greeter agent once: a call tree of two calls."""
    reply = await scope.call_agent("greeter", str(input_data))
    return f"greeter said: {reply}"


@entry
async def traced(scope: CallScope, input_data: Any) -> dict[str, Any]:
    """The trace the run is in, and the traceparent its job carried."""
    job = current_job()
    assert job is not None
    return {"trace_id": format(trace.get_current_span().get_span_context().trace_id, "032x"), "job": job.traceparent}


class Receipt(BaseModel):
    amount: int
    to: str
    at: datetime


@entry
async def receipt(scope: CallScope, input_data: Any) -> Receipt:
    """A pydantic model as the output."""
    return Receipt(amount=10, to=str(input_data), at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))


@entry
async def inspect(scope: CallScope, input_data: Any) -> list[dict[str, Any]]:
    """The files the job's run received, with their bytes in hex."""
    return [{**attachment.info.to_json(), "hex": attachment.data.hex()} for attachment in scope.attachments]


def make_runtime() -> Runtime:
    return Runtime(
        JobsApp(),
        entries=[sleeper, boom, nul, flaky, greeter, orchestrate, traced, guarded, receipt, inspect],
        toolsets={"greet_note": JobsApp.notes},
    )


queue = JobQueue(
    entries=[
        "sleeper",
        "boom",
        "nul",
        JobEntry("flaky", retry=1),
        "greeter",
        "orchestrate",
        "traced",
        "guarded",
        "receipt",
        "inspect",
    ],
    runtime=make_runtime,
)

other_queue = JobQueue(entries=list(queue.entries.values()), runtime=make_runtime, queue="llm_do_other")
"""A second queue declaring the same entries (`tests.jobs_app:other_queue`): it shares their task names."""
