"""Live runs: `Runtime.stream` yields every call's events, tagged, and answers the run's approvals."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    AgentStreamEvent,
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelMessage,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from llm_do import (
    AgentEntry,
    AgentStarted,
    ApprovalDecided,
    ApprovalNotPending,
    ApprovalRequested,
    CallEnded,
    CallEvent,
    CallScope,
    CallStarted,
    HandleClosed,
    HandleOpened,
    HandleRolledBack,
    Handles,
    LiveRun,
    ResponseCompleted,
    RunFailed,
    RunFinished,
    Runtime,
    RuntimeConfig,
    StreamEvent,
    ToolPolicy,
    Toolset,
    entry,
    run_report,
    tool,
)
from llm_do.testing import ScriptedModel, Turn, tool_call


class Notes(Toolset):
    """Writes notes into a shared list; logs its teardown."""

    def __init__(self, log: list[str], waiting: asyncio.Event | None = None) -> None:
        self.log = log
        self.waiting = waiting
        self.txns: Handles[str] = Handles("txn", on_forget=lambda name: log.append(f"rollback {name}"))

    @tool
    def write(self, text: str) -> str:
        """Write a note."""
        self.log.append(f"write {text}")
        return f"wrote {text}"

    @tool
    def begin(self, name: str) -> str:
        """Open a transaction."""
        return self.txns.open(name)

    @tool
    def commit(self, handle: str) -> str:
        """Commit a transaction."""
        self.log.append(f"commit {self.txns.pop(handle)}")
        return "committed"

    @tool
    async def wait(self) -> str:
        """Wait forever."""
        self.log.append("waiting")
        if self.waiting is not None:
            self.waiting.set()
        await asyncio.Event().wait()
        return "never"

    @tool
    def fail(self) -> str:
        """Fail."""
        raise KeyError("the ledger is gone")

    def cleanup(self) -> None:
        self.log.append("cleanup")


def echo(turn: Turn) -> str:
    return f"helped {turn.prompt}"


def notes_runtime(
    log: list[str],
    *steps: Any,
    policy: ToolPolicy | None = None,
    buffer: int = 256,
    waiting: asyncio.Event | None = None,
    **kwargs: Any,
) -> Runtime:
    clerk = AgentEntry(Agent(ScriptedModel(*steps)), name="clerk", toolsets=["notes"])
    return Runtime(
        None,
        entries=[clerk],
        toolsets={"notes": lambda: Notes(log, waiting)},
        policies={"notes": policy if policy is not None else ToolPolicy()},  # declared: allowed unless a test says
        config=RuntimeConfig(stream_buffer=buffer),
        **kwargs,
    )


async def collect(run: LiveRun) -> list[StreamEvent]:
    return [event async for event in run]


def texts(events: list[StreamEvent]) -> list[str]:
    return [
        part.content
        for event in events
        if isinstance(event, ResponseCompleted)
        for part in event.response.parts
        if isinstance(part, TextPart)
    ]


# -- tags and the call tree ------------------------------------------------------------------


async def test_every_call_of_the_tree_streams_tagged_with_its_call_and_its_parents_tool_call() -> None:
    boss = AgentEntry(
        Agent(ScriptedModel([tool_call("helper", input="a"), tool_call("helper", input="b")], "both helped")),
        name="boss",
        toolsets=["helper"],
    )
    helper = AgentEntry(Agent(ScriptedModel(echo, echo)), name="helper")
    async with Runtime(None, entries=[boss, helper]) as runtime, runtime.stream("boss", "go") as run:
        events = await collect(run)
    assert isinstance(events[-1], RunFinished) and events[-1].result.output == "both helped"
    asked = {  # the boss's tool calls: tool_call_id -> the input it gave
        event.event.part.tool_call_id: event.event.part.args_as_dict()["input"]
        for event in events
        if isinstance(event, CallEvent) and isinstance(event.event, FunctionToolCallEvent)
    }
    assert len(asked) == 2
    children = {event.call.id: event.call for event in events if isinstance(event, CallStarted) and event.call.depth}
    assert len(children) == 2
    for tag in children.values():
        assert (tag.parent, tag.entry, tag.chain) == ("call_1", "helper", ("boss", "helper"))
        own = [event for event in events if event.call is not None and event.call.id == tag.id]
        assert all(event.call == tag for event in own)  # every event of the child carries the same tag
        assert texts(own) == [f"helped {asked[tag.tool_call_id]}"]  # the right parent tool call
        assert any(isinstance(event, CallEvent) and isinstance(event.event, PartStartEvent) for event in own)
        ended = [event for event in own if isinstance(event, CallEnded)]
        assert [(event.outcome, event.usage.requests) for event in ended] == [("ok", 1)]
    top = [event.call for event in events if isinstance(event, CallStarted) and event.call.depth == 0]
    assert [(tag.id, tag.parent, tag.tool_call_id) for tag in top] == [("call_1", None, None)]
    assert sum(isinstance(event, AgentStarted) for event in events) == 3
    results = [
        event for event in events if isinstance(event, CallEvent) and isinstance(event.event, FunctionToolResultEvent)
    ]
    assert {event.event.part.content for event in results} == {"helped a", "helped b"}


async def test_handles_opened_closed_and_rolled_back_join_the_stream() -> None:
    log: list[str] = []
    script = [tool_call("begin", name="a"), tool_call("begin", name="b")]
    runtime = notes_runtime(log, script, lambda turn: tool_call("commit", handle=turn.returns[0]), "done")
    async with runtime, runtime.stream("clerk", "go") as run:
        events = await collect(run)
    opened = [event.handle for event in events if isinstance(event, HandleOpened)]
    assert len(opened) == 2
    assert [event.handle for event in events if isinstance(event, HandleClosed)] == [opened[0]]
    assert [event.handle for event in events if isinstance(event, HandleRolledBack)] == [opened[1]]
    assert all(event.call is not None and event.call.id == "call_1" for event in events[:-1])
    assert log == ["commit a", "rollback b", "cleanup"]


# -- approvals --------------------------------------------------------------------------------


async def test_decide_approves_denies_and_approves_for_the_session_from_the_stream() -> None:
    log: list[str] = []
    runtime = notes_runtime(
        log,
        tool_call("write", text="one"),
        tool_call("write", text="two"),
        tool_call("write", text="two"),  # the same call: approved for the session already
        tool_call("write", text="three"),
        "done",
        policy=ToolPolicy(default="ask"),
    )
    answers = iter([("approve", None), ("approve_for_session", None), ("deny", "not three")])
    seen: list[StreamEvent] = []
    async with runtime, runtime.stream("clerk", "go") as run:
        async for event in run:
            seen.append(event)
            if isinstance(event, ApprovalRequested):
                await asyncio.sleep(0)  # the question reaches the approver, or is answered by its session
                if event.request in run.pending:
                    assert run.pending == (event.request,)
                    run.decide(event.request.approval_id, *next(answers))
    assert log == ["write one", "write two", "write two", "cleanup"]
    decided = [
        (event.request.args["text"], event.approved, event.why) for event in seen if isinstance(event, ApprovalDecided)
    ]
    assert decided == [
        ("one", True, None),
        ("two", True, None),
        ("two", True, None),
        ("three", False, "the approver denied it: not three"),
    ]
    denied = [
        event.event.part.content
        for event in seen
        if isinstance(event, CallEvent) and isinstance(event.event, FunctionToolResultEvent)
    ]
    assert "not three" in denied[-1]
    assert run.pending == ()


async def test_a_decision_for_an_id_not_pending_is_refused_naming_it_and_what_is_pending() -> None:
    log: list[str] = []
    runtime = notes_runtime(log, tool_call("write", text="one"), "done", policy=ToolPolicy(default="ask"))
    async with runtime, runtime.stream("clerk", "go") as run:
        with pytest.raises(ApprovalNotPending, match=r"'apr_nope'.*pending: none"):
            run.decide("apr_nope", "approve")
        async for event in run:
            if isinstance(event, ApprovalRequested):
                await asyncio.sleep(0)
                pending = event.request.approval_id
                with pytest.raises(ApprovalNotPending) as refused:
                    run.decide("apr_0000000000000000", "approve")
                assert refused.value.pending == (pending,)
                assert pending in str(refused.value)
                run.decide(pending, "approve")
                with pytest.raises(ApprovalNotPending):
                    run.decide(pending, "deny")  # answered already
    assert log == ["write one", "cleanup"]


# -- isolation, backpressure, leaving, failures ---------------------------------------------


async def test_two_concurrent_streams_never_mix_their_events() -> None:
    clerk = AgentEntry(Agent(ScriptedModel(*[echo] * 10)), name="clerk")
    async with Runtime(None, entries=[clerk]) as runtime:

        async def watch(prompt: str) -> list[StreamEvent]:
            async with runtime.stream("clerk", prompt) as run:
                return await collect(run)

        streams = await asyncio.gather(*(watch(f"run {n}") for n in range(10)))
    for n, events in enumerate(streams):
        assert texts(events) == [f"helped run {n}"]
        streamed = "".join(
            event.event.part.content if isinstance(event.event, PartStartEvent) else event.event.delta.content_delta
            for event in events
            if isinstance(event, CallEvent)
            and (
                (isinstance(event.event, PartStartEvent) and isinstance(event.event.part, TextPart))
                or (isinstance(event.event, PartDeltaEvent) and isinstance(event.event.delta, TextPartDelta))
            )
        )
        assert streamed == f"helped run {n}"
        assert isinstance(events[-1], RunFinished) and events[-1].result.output == f"helped run {n}"


async def test_a_slow_consumer_makes_the_run_wait_and_loses_nothing() -> None:
    log: list[str] = []
    words = " ".join(f"w{n}" for n in range(60))
    runtime = notes_runtime(log, words, buffer=4)
    async with runtime, runtime.stream("clerk", "go") as run:
        events = run.__aiter__()
        first = await anext(events)
        assert isinstance(first, CallStarted)
        for _ in range(500):  # the run gets the loop to itself: it streams until the buffer is full, then waits
            await asyncio.sleep(0)
        assert log == []  # still waiting for the consumer: its teardown has not run
        rest = [event async for event in events]
    assert log == ["cleanup"]
    streamed = "".join(
        event.event.part.content if isinstance(event.event, PartStartEvent) else event.event.delta.content_delta
        for event in rest
        if isinstance(event, CallEvent) and isinstance(event.event, PartStartEvent | PartDeltaEvent)
    )
    assert streamed == words
    assert isinstance(rest[-1], RunFinished) and rest[-1].result.output == words


async def test_a_consumer_that_leaves_early_cancels_the_run_and_its_teardown_runs() -> None:
    log: list[str] = []
    waiting = asyncio.Event()
    runtime = notes_runtime(log, tool_call("wait"), waiting=waiting)
    async with runtime:
        async with runtime.stream("clerk", "go") as run:
            async for event in run:
                if isinstance(event, CallEvent) and isinstance(event.event, FunctionToolCallEvent):
                    await waiting.wait()
                    break
        assert log == ["waiting", "cleanup"]  # cancelled, torn down before the block was left


async def test_a_cancelled_consumer_cancels_the_run_and_its_teardown_runs() -> None:
    log: list[str] = []
    waiting = asyncio.Event()
    runtime = notes_runtime(log, tool_call("wait"), waiting=waiting)

    async def consume() -> None:
        async with runtime.stream("clerk", "go") as run:
            async for _ in run:
                pass

    async with runtime:
        task = asyncio.create_task(consume())
        await waiting.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert log == ["waiting", "cleanup"]


@pytest.mark.parametrize("leaving", ["at a checkpoint", "by break"])
async def test_a_consumer_in_a_cancelled_anyio_scope_leaves_once_the_run_is_torn_down(leaving: str) -> None:
    """As a Starlette response whose client left: anyio cancels the task again at every suspension. Left at a
    checkpoint, the block is left in the cancelled scope; left by `break`, the wait for the run's teardown is what
    gets cancelled, and that cancellation is re-raised as it came, so the scope recognises and absorbs it."""
    log: list[str] = []
    waiting = asyncio.Event()
    runtime = notes_runtime(log, tool_call("wait"), waiting=waiting)
    async with runtime:
        with anyio.CancelScope() as scope:
            async with runtime.stream("clerk", "go") as run:
                async for event in run:
                    if isinstance(event, CallEvent) and isinstance(event.event, FunctionToolCallEvent):
                        await waiting.wait()
                        scope.cancel()
                        if leaving == "by break":
                            break
                        await anyio.lowlevel.checkpoint()
        assert scope.cancelled_caught
        assert log == ["waiting", "cleanup"]


async def test_an_exception_in_consumer_code_propagates_unchanged_and_the_runtime_runs_on() -> None:
    log: list[str] = []
    waiting = asyncio.Event()
    runtime = notes_runtime(log, tool_call("wait"), "second run", waiting=waiting)
    mistake = ValueError("the consumer's own bug")
    async with runtime:
        with pytest.raises(ValueError) as raised:
            async with runtime.stream("clerk", "go") as run:
                async for event in run:
                    if isinstance(event, CallEvent) and isinstance(event.event, FunctionToolCallEvent):
                        await waiting.wait()
                        raise mistake
        assert raised.value is mistake
        assert log == ["waiting", "cleanup"]
        async with runtime.stream("clerk", "again") as again:
            assert (await again.result()).output == "second run"


async def test_a_failed_run_ends_its_stream_with_its_report_and_result_raises_it() -> None:
    log: list[str] = []
    runtime = notes_runtime(log, tool_call("fail"))
    async with runtime, runtime.stream("clerk", "go") as run:
        events = await collect(run)  # iteration itself does not raise
        last = events[-1]
        assert isinstance(last, RunFailed)
        with pytest.raises(KeyError) as raised:
            await run.result()
    assert raised.value is last.error
    assert last.report is not None and last.report is run_report(last.error)
    assert last.report.outcome == "error"
    assert [call.entry for call in last.report.calls] == ["clerk"]
    assert [event.outcome for event in events if isinstance(event, CallEnded)] == ["error"]
    assert log == ["cleanup"]


# -- the runtime's own handler, and streams without model events ------------------------------


async def test_a_raising_runtime_handler_never_fails_the_run_and_is_logged_once_per_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str] = []

    async def handler(ctx: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
        async for event in events:
            seen.append(event.event_kind)
            raise RuntimeError("the handler's bug")

    log: list[str] = []
    runtime = notes_runtime(
        log, tool_call("write", text="a"), "first", tool_call("write", text="b"), "second", event_stream_handler=handler
    )
    async with runtime:
        with caplog.at_level(logging.ERROR, logger="llm_do"):
            assert (await runtime.run("clerk", "go")).output == "first"
            async with runtime.stream("clerk", "go") as run:
                events = await collect(run)
    assert isinstance(events[-1], RunFinished) and events[-1].result.output == "second"
    assert texts(events) == ["second"]  # the stream still has every event the handler left unread
    assert len(seen) == 6  # the handler was called for each node of both runs
    logged = [record for record in caplog.records if "event_stream_handler" in record.getMessage()]
    assert len(logged) == 2  # once per run


async def test_without_model_events_the_requests_are_not_streamed() -> None:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("plain")])

    clerk = AgentEntry(Agent(FunctionModel(answer)), name="clerk")  # no stream_function: it cannot stream
    async with Runtime(None, entries=[clerk]) as runtime, runtime.stream("clerk", "go", model_events=False) as run:
        events = await collect(run)
    assert [type(event) for event in events] == [CallStarted, AgentStarted, CallEnded, RunFinished]
    ended = events[2]
    assert isinstance(ended, CallEnded) and ended.usage.requests == 1


async def test_a_question_whose_call_was_cancelled_is_no_longer_pending() -> None:
    """A child call cancelled while its question waits (its parent gave up on it) and the run goes on:
    the stream says the question was decided (a page stops showing it), and nobody can answer it any more."""
    asked = asyncio.Event()

    @entry(toolsets=["notes"])
    async def scribe(scope: CallScope, text: str) -> str:
        return str(await scope.call_tool("write", {"text": text}))

    @entry(toolsets=["scribe"])
    async def boss(scope: CallScope, text: str) -> str:
        child = asyncio.ensure_future(scope.call_agent("scribe", text))
        waiting = asyncio.ensure_future(asked.wait())
        await asyncio.wait((child, waiting), return_when=asyncio.FIRST_COMPLETED)  # (the child asks, then waits)
        waiting.cancel()
        child.cancel()
        await asyncio.gather(child, waiting, return_exceptions=True)
        return "gave up"

    log: list[str] = []
    seen: list[str] = []
    async with (
        Runtime(
            None,
            entries=[boss, scribe],
            toolsets={"notes": lambda: Notes(log)},
            policies={"notes": ToolPolicy(default="ask")},
        ) as runtime,
        runtime.stream("boss", "the milk") as run,
    ):
        async for event in run:
            if isinstance(event, ApprovalRequested) and event.request.toolset == "notes":
                question = event.request.approval_id
                asked.set()
            elif isinstance(event, ApprovalDecided) and event.request.toolset == "notes":
                seen.append(f"decided approved={event.approved} why={event.why}")
            elif isinstance(event, CallEnded) and event.call.entry == "scribe":
                seen.append(f"scribe {event.outcome}; pending {[request.approval_id for request in run.pending]}")
                with pytest.raises(ApprovalNotPending):
                    run.decide(question, "approve")
        result = await run.result()
    assert seen == [
        "decided approved=False why=the call was cancelled before an answer came",
        "scribe cancelled; pending []",
    ]
    assert (result.output, log) == ("gave up", ["cleanup"])  # never written; the scribe's notes torn down


async def test_a_call_made_from_python_that_needs_no_approval_asks_no_question() -> None:
    @entry(toolsets=["notes"])
    async def scribe(scope: CallScope, text: str) -> str:
        return str(await scope.call_tool("write", {"text": text}))

    @entry(toolsets=["scribe"])
    async def boss(scope: CallScope, text: str) -> str:
        return str(await scope.call_agent("scribe", text))

    log: list[str] = []
    async with (
        Runtime(
            None, entries=[boss, scribe], toolsets={"notes": lambda: Notes(log)}, policies={"notes": ToolPolicy()}
        ) as runtime,
        runtime.stream("boss", "the milk") as run,
    ):
        kinds = [type(event).__name__ async for event in run]
    assert "ApprovalRequested" not in kinds and "ApprovalDecided" not in kinds
    assert log[0] == "write the milk" and kinds[-1] == "RunFinished"
