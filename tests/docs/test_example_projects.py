"""The example projects load and run offline from their recordings, with the live handles and real SQLite."""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from llm_do import Approval, ApprovalRequest, RuntimeConfig
from llm_do.errors import MaxDepthExceeded
from llm_do.models import AttachmentMismatch
from llm_do.project import load_project
from llm_do.testing import call_tree

EXAMPLES = Path(__file__).parents[2] / "examples"
REPLAY = "replay:recording.json"


async def run_example(name: str, mode: str = "approve_all", **config: Any) -> Any:
    async with load_project(
        EXAMPLES / name, model=REPLAY, config=RuntimeConfig(approval_mode=mode, **config)
    ) as project:
        return await project.run()


def balances(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT name, balance FROM accounts ORDER BY name").fetchall())


async def test_the_clerk_moves_money_with_the_live_transaction_handle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = tmp_path / "bank.db"
    monkeypatch.setenv("LLM_DO_DATABASE_URL", f"sqlite:///{database}")
    result = await run_example("bank_clerk")
    found = re.fullmatch(
        r"Done: moved 30 from alice to carol in (txn_[0-9a-f]{8}); alice now has 90 and carol has 30\.", result.output
    )
    assert found, result.output
    began = [
        p.content for m in result.messages for p in m.parts if p.part_kind == "tool-return" and p.tool_name == "begin"
    ]
    assert found.group(1) in began  # the handle this run's database opened, not the recorded one
    assert (result.usage.requests, result.usage.input_tokens, result.usage.output_tokens) == (5, 359, 256)
    assert result.usage.tool_calls == 5
    assert balances(database) == {"alice": 90, "bob": 80, "carol": 30}


async def test_a_refused_commit_leaves_the_money_where_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    database = tmp_path / "bank.db"
    monkeypatch.setenv("LLM_DO_DATABASE_URL", f"sqlite:///{database}")
    result = await run_example("bank_clerk", "reject_all")
    assert re.fullmatch(
        r"The commit of txn_[0-9a-f]{8} was not approved, so I rolled it back and nothing moved: "
        r"alice still has 120 and carol has 0\.",
        result.output,
    ), result.output
    assert (result.usage.requests, result.usage.input_tokens, result.usage.output_tokens) == (6, 498, 344)
    assert balances(database) == {"alice": 120, "bob": 80, "carol": 0}


async def test_without_a_database_setting_each_run_starts_from_the_opening_balances(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LLM_DO_DATABASE_URL", raising=False)
    outputs = [(await run_example("bank_clerk")).output for _ in range(2)]
    assert all(output.endswith("alice now has 90 and carol has 30.") for output in outputs)
    assert outputs[0] != outputs[1]  # two runs, two fresh transaction handles


SUMMARY = (
    "Container traffic rose 8% to 2.1 million and ship waits fell below a day. New automated cranes "
    "(38 boxes an hour, against 25) drove most of the gain. Rail lags: a third of containers still leave "
    "by truck on congested roads. The board plans a second rail terminal by 2027 and wants the region to "
    "share the cost."
)


async def test_the_summarizer_calls_itself_on_each_half_two_levels_deep() -> None:
    result = await run_example("summarizer")
    assert result.output == SUMMARY
    assert (result.usage.requests, result.usage.input_tokens, result.usage.output_tokens) == (10, 1049, 564)
    assert call_tree(result).splitlines() == [
        "summarize (ok)",
        "  summarize (ok)",
        "    summarize (ok)",
        "    summarize (ok)",
        "  summarize (ok)",
        "    summarize (ok)",
        "    summarize (ok)",
    ]
    # each call sees only its own part: the top call's conversation holds the halves, never a leaf summary
    # of a paragraph it did not summarize itself before its children answered
    first_request = result.messages[0]
    assert "Rail links lag behind" in str(first_request.parts[-1].content)
    assert len(result.messages) == 4  # prompt, two calls, their two summaries, the answer: one level only


async def test_max_depth_stops_the_summarizer_from_going_deeper() -> None:
    assert (await run_example("summarizer", max_depth=2)).output == SUMMARY
    with pytest.raises(MaxDepthExceeded) as raised:
        await run_example("summarizer", max_depth=1)
    assert raised.value.chain == ("summarize", "summarize", "summarize")


async def test_the_orchestrator_asks_both_workers_at_once() -> None:
    result = await run_example("orchestrator")
    assert result.output == (
        "Review of: Move the team's weekly meeting from Monday morning to Thursday afternoon.\n\n"
        "For: Thursday afternoons free Monday mornings for planning, and the week's results are in by then.\n"
        "Against: Thursday clashes with the release freeze, and decisions taken then wait over the weekend."
    )
    assert (result.usage.requests, result.usage.input_tokens, result.usage.output_tokens) == (2, 124, 31)
    assert sorted(call_tree(result).splitlines()[1:]) == ["  critic (ok)", "  researcher (ok)"]


REVIEW = (
    "The reviewer checked data/chart.png against data/sales.csv: "
    "The chart is not faithful: east (the chart shows 650, the data 400) is wrong."
)


async def test_the_review_desk_hands_a_chart_and_its_data_to_the_reviewer_after_approval() -> None:
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Approval:
        asked.append(request)
        return Approval.approve()

    project_dir = EXAMPLES / "review_desk"
    async with load_project(
        project_dir, model=REPLAY, config=RuntimeConfig(approval_mode="prompt"), approver=approver
    ) as project:
        result = await project.run()
    assert result.output == REVIEW
    chart, sales = (project_dir / "data" / name for name in ("chart.png", "sales.csv"))
    [request] = asked
    assert [(info.name, info.media_type, info.size) for info in request.attachments] == [
        ("data/chart.png", "image/png", chart.stat().st_size),
        ("data/sales.csv", "text/csv", sales.stat().st_size),
    ]
    reviewer = next(call for call in result.calls if call.entry == "reviewer")
    assert reviewer.attachments == request.attachments


async def test_the_review_desk_replay_refuses_a_changed_chart(tmp_path: Path) -> None:
    copy = tmp_path / "review_desk"
    shutil.copytree(EXAMPLES / "review_desk", copy)
    chart = copy / "data" / "chart.png"
    chart.write_bytes(chart.read_bytes()[:-12] + b"\x00" * 12)
    async with load_project(copy, model=REPLAY, config=RuntimeConfig(approval_mode="approve_all")) as project:
        with pytest.raises(AttachmentMismatch, match=r"'data/chart\.png' was 473 bytes with sha256 093b4b936612"):
            await project.run()


async def test_bootstrapping_makes_an_evaluator_and_has_every_deck_evaluated(tmp_path: Path) -> None:
    copy = tmp_path / "bootstrapping"
    shutil.copytree(EXAMPLES / "bootstrapping", copy, ignore=shutil.ignore_patterns("evaluations"))
    asked: list[tuple[str, str, tuple[str, ...]]] = []

    def approver(request: ApprovalRequest) -> Approval:
        asked.append((request.toolset, request.tool, tuple(request.chain)))
        return Approval.approve()

    async with load_project(
        copy, model=REPLAY, config=RuntimeConfig(approval_mode="prompt"), approver=approver
    ) as project:
        result = await project.run()
    assert result.output.splitlines() == [
        "input/acme.md: created 'evaluations/acme.md' (117 bytes)",
        "input/zeta.md: created 'evaluations/zeta.md' (158 bytes)",
    ]
    assert "**Verdict:** GO" in (copy / "evaluations" / "acme.md").read_text()
    assert "**Verdict:** PASS" in (copy / "evaluations" / "zeta.md").read_text()
    assert sorted(asked) == [
        ("dynamic_agents", "agent_create", ("main",)),
        ("filesystem", "mkdir", ("main",)),
        ("filesystem", "write_text", ("main",)),
        ("filesystem", "write_text", ("main",)),
    ]
    top, *made = result.calls
    assert [(call.entry, call.parent, call.depth, call.usage.requests) for call in made] == [
        ("pitch_evaluator", top.id, 1, 1)
    ] * 2
    assert result.usage.requests == 8  # six of main's, one per deck of the evaluator's
    assert "pitch_evaluator" in call_tree(result)


async def test_the_orchestrating_tool_runs_workers_its_caller_does_not_list() -> None:
    result = await run_example("orchestrating_tool")
    assert result.output == "Commercial panels went from about 15-16% to 21-23% efficiency in ten years."
    top, *children = result.calls
    assert top.toolsets == ("research",)
    assert sorted(call.entry for call in children) == ["query_expander", "searcher", "searcher", "synthesizer"]
    assert {(call.parent, call.depth) for call in children} == {(top.id, 1)}
