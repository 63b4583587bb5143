"""A small model that makes the same call again after it was refused, replayed from its recorded tool calls
(`tests/real_model/tool-calls.jsonl`): denied under `--reject-all`, failed (`agent_create` of a name taken), and
approved and done (`write_text` of the same file, again and again). Each repeat is answered with a tool error and
not run; past `repeated_calls` the run ends with `RepeatedCall`, naming the call, long before the request limit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..real_model.projects import NOTES, desk, run, worker
from ..real_model.server import RecordedServer
from ..real_model.toolcalls import recorded_line, replies_in, tool_exchanges

BYE = "Write bye.txt saying goodbye."
DENIED = "The call to 'write_text' was not run: the same call was denied before, and it is not asked again."


def told(server: RecordedServer) -> list[str]:
    """What each request told the model last (its last message's text)."""
    return [str(got.body["messages"][-1]["content"]) for got in server.received]


def rejected(project: Path, **env: str) -> tuple[Any, str, int, RecordedServer]:
    """The writer under --reject-all: exchange 96 (its first call, denied), then the model's replies in the loop
    recorded in exchange 99 (the same call, 19 times, until llm-do was stopped)."""
    return run(
        project, "writer", BYE, [96], borrowed=replies_in(99, first=1), recorded=tool_exchanges(),
        flags=["--reject-all"], **env,
    )  # fmt: skip


def test_a_denied_call_made_again_is_not_run_and_the_run_ends_naming_it(tmp_path: Path) -> None:
    document, stderr, code, server = rejected(desk(tmp_path / "desk"))
    assert code == 1, stderr
    assert server.served == [96, 99001, 99002, 99003]  # not 19 requests, nor 50
    assert told(server)[1].startswith("The call to 'write_text' was not run: it needs approval")
    assert told(server)[2] == (
        '{"error":"' + DENIED + ' Do not make it again: do something else, or answer and say what could not be done."}'
    )
    assert told(server)[3] == told(server)[2]
    assert document["error"] == (
        "RepeatedCall: entry 'writer' made the call write_text(path='bye.txt', text='Goodbye.') again 3 times after it "
        "was denied (The call to 'write_text' was not run: it needs approval (toolset 'filesystem' policy: tool "
        "'write_text' is 'ask') and approval_mode is 'reject_all'. Do not retry the same call.); none of them was run, "
        "and the run was ended (limit repeated_calls=2, set by LLM_DO_LIMITS__REPEATED_CALLS). A model going round in "
        "circles stops here: give it clearer instructions, or one that heeds what its tools say."
    )
    assert not (tmp_path / "desk" / "bye.txt").exists()


def test_repeated_calls_is_set_like_every_limit_and_0_lets_calls_repeat(tmp_path: Path) -> None:
    once = desk(tmp_path / "once", extra={"writer": "limits: {repeated_calls: 1}\n"})
    document, _, code, server = rejected(once)
    assert code == 1
    assert server.served == [96, 99001, 99002]
    assert "(limit repeated_calls=1, set by limits.repeated_calls in writer.worker)" in document["error"]
    document, _, code, server = rejected(
        desk(tmp_path / "off"), LLM_DO_LIMITS__REPEATED_CALLS="0", LLM_DO_LIMITS__RUN_REQUESTS="6"
    )
    assert code == 1
    assert len(server.served) == 6  # each repeat denied again, as before: the request limit ends the run
    assert all(text.startswith("The call to 'write_text' was not run: it needs approval") for text in told(server)[1:])
    assert document["error"].startswith("RunOverLimit: the run reached its limit of 6 model requests")


def test_a_call_approved_and_done_made_again_and_again_right_after_ends_the_run(tmp_path: Path) -> None:
    # Exchanges 102-109: approved (for the session), the write ran; the model wrote the same file seven more times.
    # Each repeat runs, as approved; past repeated_calls the run ends.
    project = desk(tmp_path / "desk")
    document, stderr, code, server = run(
        project, "writer", "Write note2.txt saying approved.", [102], borrowed=replies_in(109, first=1),
        recorded=tool_exchanges(), flags=["-v", "--approve-all"],
    )  # fmt: skip
    assert code == 1, stderr
    assert server.served == [102, 109001, 109002, 109003]
    assert told(server)[1:] == ["created 'note2.txt' (8 bytes)"] + ["replaced 'note2.txt' (8 bytes)"] * 2
    assert document["error"].startswith(
        "RepeatedCall: entry 'writer' made the call write_text(path='note2.txt', text='approved') again 3 times right "
        "after it ran, with nothing else run since (created 'note2.txt' (8 bytes)); the last was not run, and the run "
        "was ended (limit repeated_calls=2, set by LLM_DO_LIMITS__REPEATED_CALLS)."
    )
    assert document["usage"]["tool_calls"] == 3


def maker(root: Path) -> Path:
    """The recorded session's project of one worker with `dynamic_agents` (instructions as sent in exchange 61)."""
    root.mkdir(parents=True)
    (root / "notes.txt").write_text(NOTES)
    instructions = recorded_line(61)["request"]["messages"][0]["content"]
    (root / "maker.worker").write_text(worker("maker", instructions, ["dynamic_agents", "filesystem_readonly"]))
    return root


MEETING = "When is the meeting with the auditors? It is in notes.txt."


def test_a_failed_call_made_again_with_nothing_run_since_is_not_run(tmp_path: Path) -> None:
    # Exchanges 61-70: `agent_call` of an agent never made, then `agent_create` of the name 'maker', taken by the
    # entry itself, eight times over.
    document, stderr, code, server = run(
        maker(tmp_path / "maker"),
        "maker",
        MEETING,
        [61],
        borrowed=replies_in(70, first=1),
        recorded=tool_exchanges(),
        flags=("--approve-all",),  # agent_create asks, by default
    )
    assert code == 1, stderr
    assert server.served == [61, 70001, 70002, 70003, 70004]
    assert "the name 'maker' is taken" in told(server)[2]
    assert told(server)[3] == (
        '{"error":"The call to \'agent_create\' was not run: the same call failed before, and nothing has run since '
        'that could change that. Do not make it again: change what you pass, do something else, or answer."}'
    )
    assert document["error"].startswith("RepeatedCall: entry 'maker' made the call agent_create(name='maker', ")
    assert "again 3 times after it failed, with nothing else run since (the name 'maker' is taken" in document["error"]


def test_a_call_of_an_agent_never_made_says_that_agent_create_makes_one(tmp_path: Path) -> None:
    _, _, _, server = run(
        maker(tmp_path / "maker"),
        "maker",
        MEETING,
        [61],
        borrowed=replies_in(70, first=1),
        recorded=tool_exchanges(),
        flags=("--approve-all",),  # agent_create asks, by default
    )
    assert told(server)[1] == (
        "{\"error\":\"'maker' cannot call 'reader': it is neither an entry (maker) nor an agent made in this run or "
        "kept by its session (none); fix the name, or make it first: agent_create(name='reader', instructions=...), "
        'then call it"}'
    )
