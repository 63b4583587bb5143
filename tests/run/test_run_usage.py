"""Each call's usage counts its own tool calls as pydantic-ai counts them (`RunUsage.tool_calls`): the
calls of a run add up to pydantic-ai's total, failed and cancelled runs included."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RunUsage

from llm_do import AgentEntry, CallRecord, RunReport, Runtime, RuntimeConfig, ToolPolicy, Toolset, run_report, tool
from llm_do.testing import answering, cancelled_run_report, tool_call

started = asyncio.Event()


class Desk(Toolset):
    default_policy = ToolPolicy()  # only `guarded` asks (its own requires_approval)

    @tool(thread=False)  # quick: on the loop, so that it has returned before a tool called beside it starts
    def ok(self) -> str:
        """Succeed."""
        return "fine"

    @tool
    def broken(self) -> str:
        """Fail as a tool error."""
        raise ToolFailed("the desk is broken")

    @tool
    def again(self) -> str:
        """Ask the model to try again."""
        raise ModelRetry("try again")

    @tool(requires_approval=True)
    def guarded(self) -> str:
        """Needs approval."""
        return "guarded ran"

    @tool
    def explode(self) -> str:
        """Fail the run."""
        raise RuntimeError("exploded")

    @tool
    async def hang(self) -> str:
        """Wait until cancelled."""
        started.set()
        await asyncio.Event().wait()
        return "unreachable"


def own(result_calls: tuple[CallRecord, ...]) -> dict[str, int]:
    return {record.entry: record.usage.tool_calls for record in result_calls}


def assert_adds_up(calls_: tuple[CallRecord, ...], total: RunUsage) -> None:
    for field in ("requests", "tool_calls", "input_tokens", "output_tokens"):
        assert sum(getattr(record.usage, field) for record in calls_) == getattr(total, field), field


def runtime(*entries: AgentEntry, mode: Literal["approve_all", "reject_all"] = "approve_all") -> Runtime:
    return Runtime(None, entries=list(entries), toolsets={"desk": Desk}, config=RuntimeConfig(approval_mode=mode))


@pytest.mark.parametrize(("mode", "parent_calls"), [("approve_all", 4), ("reject_all", 3)])
async def test_each_call_counts_the_tool_calls_it_ran_and_the_calls_add_up_to_pydantic_ais_total(
    mode: Literal["approve_all", "reject_all"], parent_calls: int
) -> None:
    child = AgentEntry(
        Agent(answering(lambda turn: [tool_call("ok"), tool_call("ok")] if turn.step == 0 else "child done")),
        name="child",
        toolsets=["desk"],
    )
    parent = AgentEntry(
        Agent(
            answering(
                lambda turn: [
                    [
                        tool_call("ok"),
                        tool_call("broken"),
                        tool_call("again"),
                        tool_call("guarded"),
                        tool_call("child", input="go"),
                    ],
                    tool_call("ok"),
                    "done",
                ][turn.step]
            )
        ),
        name="parent",
        toolsets=["desk", "child"],
    )
    async with runtime(parent, child, mode=mode) as rt:
        result = await rt.run("parent", "go")
    # parent: ok, child and ok again, and guarded when approved; never broken (failed), again
    # (retried) nor guarded when denied. The child counts its own two.
    assert own(result.calls) == {"parent": parent_calls, "child": 2}
    assert result.usage.tool_calls == parent_calls + 2  # pydantic-ai's own count of the run
    assert_adds_up(result.calls, result.usage)


class Answer(BaseModel):
    value: int


@pytest.mark.parametrize(("strategy", "counted"), [("early", 1), ("exhaustive", 2)])
async def test_output_tools_and_calls_skipped_after_the_final_result_do_not_count(
    strategy: Literal["early", "exhaustive"], counted: int
) -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("ok", {})])
        final = info.output_tools[0].name
        return ModelResponse(parts=[ToolCallPart(final, {"value": 1}), ToolCallPart("ok", {})])

    entry = AgentEntry(
        Agent(FunctionModel(respond), output_type=Answer, end_strategy=strategy), name="answerer", toolsets=["desk"]
    )
    async with runtime(entry) as rt:
        result = await rt.run("answerer", "go")
    assert result.output == Answer(value=1)
    [returns] = [[p for p in m.parts if isinstance(p, ToolReturnPart)] for m in result.messages[-1:]]
    assert len(returns) == 2  # the output tool's "Final result processed." and the last ok (run or skipped)
    assert own(result.calls) == {"answerer": counted}
    assert result.usage.tool_calls == counted


async def test_a_failed_run_reports_each_calls_usage_up_to_the_failure() -> None:
    child = AgentEntry(
        Agent(answering(lambda turn: tool_call("ok") if turn.step == 0 else tool_call("explode"))),
        name="child",
        toolsets=["desk"],
    )
    parent = AgentEntry(
        Agent(answering(lambda turn: tool_call("ok") if turn.step == 0 else tool_call("child", input="go"))),
        name="parent",
        toolsets=["desk", "child"],
    )
    async with runtime(parent, child) as rt:
        with pytest.raises(RuntimeError, match="exploded") as raised:
            await rt.run("parent", "go")
    report = run_report(raised.value)
    assert isinstance(report, RunReport)
    assert [(record.entry, record.outcome) for record in report.calls] == [("parent", "error"), ("child", "error")]
    assert own(report.calls) == {"parent": 1, "child": 1}  # the ok each ran before the child's explode
    assert [record.usage.requests for record in report.calls] == [2, 2]
    assert report.usage.tool_calls == 2
    assert_adds_up(report.calls, report.usage)
    assert [entry.entry for entry in report.log] == ["child", "parent"]  # the failed calls' messages are logged


async def test_a_cancelled_run_reports_the_tool_calls_that_returned_before_it() -> None:
    entry = AgentEntry(
        Agent(answering(lambda turn: tool_call("ok") if turn.step == 0 else [tool_call("ok"), tool_call("hang")])),
        name="waiter",
        toolsets=["desk"],
    )
    async with runtime(entry) as rt:
        report = await cancelled_run_report(rt, "waiter", "go", started)
    [record] = report.calls
    assert (record.outcome, record.usage.requests) == ("cancelled", 2)
    assert record.usage.tool_calls == report.usage.tool_calls
    assert record.usage.tool_calls == 2  # both oks: the second returned before hang started


async def test_a_continued_conversation_counts_only_the_new_turn_failed_or_not() -> None:
    script = answering(
        lambda turn: [tool_call("ok"), "one", tool_call("ok"), tool_call("ok"), "two", tool_call("explode")][turn.step]
    )  # by responses so far
    entry = AgentEntry(Agent(script), name="talker", toolsets=["desk"])
    async with runtime(entry) as rt:
        first = await rt.run("talker", "first")
        second = await rt.run("talker", "second", message_history=first.messages)
        with pytest.raises(RuntimeError, match="exploded") as raised:
            await rt.run("talker", "third", message_history=second.messages)
    assert own(first.calls) == {"talker": 1} and own(second.calls) == {"talker": 2}
    assert [record.usage.requests for record in (*first.calls, *second.calls)] == [2, 3]
    assert second.usage.tool_calls == 2
    report = run_report(raised.value)
    assert report is not None
    [record] = report.calls
    assert (record.usage.requests, record.usage.tool_calls) == (1, 0)  # the history is not this call's
    assert record.usage == report.usage


def test_the_results_llm_do_does_not_count_are_pydantic_ais_stand_ins() -> None:
    from pydantic_ai import _tool_execution

    from llm_do._compat import NOT_RUN_RESULTS

    stand_ins = {
        value
        for name, value in vars(_tool_execution).items()
        if isinstance(value, str) and name.startswith(("_FINAL_RESULT", "_RETRY_WINS", "_OUTPUT_", "_TOOL_SKIPPED"))
    }
    assert stand_ins == NOT_RUN_RESULTS
