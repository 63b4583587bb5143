"""Replies of a real small model that are not what they seem, replayed from its recorded HTTP through the
command: a tool call written as text, an echoed retry prompt passed up two levels; flagged by default, asked
again with `suspect_output=retry`, run as the call it is with `text_tool_calls`."""

from __future__ import annotations

from pathlib import Path

from ..real_model.projects import bank, desk, run

MEETING = "When is the meeting with the auditors? It is in notes.txt."
TAGGED = [2, 3, 4, 5, 6]  # read_text three times, an empty reply, then `<tool_call>list_dir</tool_call>`


def test_a_tool_call_written_as_text_is_flagged_in_the_record_the_json_and_the_stream(tmp_path: Path) -> None:
    document, stderr, code, server = run(desk(tmp_path / "desk"), "files", MEETING, TAGGED)
    assert code == 0, stderr
    assert server.served == TAGGED
    assert document["output"] == "<tool_call>list_dir</tool_call>"
    call = document["calls"][0]
    assert call["outcome"] == "ok"
    assert call["warnings"] == ["the reply holds tool-call markup (<tool_call>) as text: no tool was run"]
    assert "files !! the reply holds tool-call markup (<tool_call>) as text: no tool was run" in stderr  # -v


def test_an_echoed_retry_prompt_passed_up_two_levels_is_flagged_at_both(tmp_path: Path) -> None:
    question = "How much is the cloud invoice? It is in todo.md."
    document, stderr, code, server = run(desk(tmp_path / "desk"), "asker", question, [22, 23, 24, 25, 26, 27, 28])
    assert code == 0, stderr
    assert server.served == [22, 23, 24, 25, 26, 27, 28]
    assert document["output"] == "Please return text or call a tool."
    asker = document["calls"][0]
    reader = asker["calls"][0]
    echoed = "the reply gives back the retry prompt 'Please return text or call a tool.' instead of an answer"
    assert (asker["entry"], asker["warnings"]) == ("asker", [echoed])
    assert (reader["entry"], reader["warnings"]) == ("reader", [echoed])


def test_with_suspect_output_retry_the_model_is_told_why_and_asked_again(tmp_path: Path) -> None:
    # The recorded model answered "`list_dir`" (exchange 59); what it said after llm-do's retry prompt was never
    # recorded, so an answer it gave elsewhere (exchange 32) is borrowed.
    document, stderr, code, server = run(
        desk(tmp_path / "desk"), "files", "todo.md", [59], borrowed=(32,), LLM_DO_SUSPECT_OUTPUT="retry"
    )
    assert code == 0, stderr
    assert server.served == [59, 32]
    told = server.received[-1].body["messages"][-1]
    assert told["role"] == "user"
    assert "Your reply was not used: it names the tool 'list_dir' instead of calling it." in told["content"]
    assert "call it through function calling (your tools: glob, list_dir, read_text)" in told["content"]
    assert document["output"].startswith("Here is the text from the `todo.md` file")
    assert document["calls"][0]["outcome"] == "ok"
    assert document["calls"][0]["warnings"] == [
        "reply 1: the reply names the tool 'list_dir' instead of calling it; "
        "the model was asked again (suspect_output=retry)"
    ]
    assert "files !! reply 1: the reply names the tool 'list_dir'" in stderr


def test_a_model_that_keeps_writing_calls_as_text_fails_the_run_with_suspect_output_retry(tmp_path: Path) -> None:
    document, _, code, _ = run(
        desk(tmp_path / "desk"), "files", "todo.md", [59], borrowed=(59,), LLM_DO_SUSPECT_OUTPUT="retry"
    )
    assert code == 1
    assert document["kind"] == "error"
    assert document["error"].startswith(
        "RepliesRefused: entry 'files': the model's replies kept looking like unexecuted tool calls or echoed prompts"
    )
    assert "set by LLM_DO_SUSPECT_OUTPUT" in document["error"]
    assert len(document["calls"][0]["warnings"]) == 2


def test_text_tool_calls_runs_a_reply_that_is_only_a_json_call_and_nothing_else(tmp_path: Path) -> None:
    # Exchange 37: a fenced JSON call of `begin`; 40: after begin's handle, `{{"name": "query", ...}}` (not JSON).
    move = "Please move 30 from alice to carol."
    url = bank(tmp_path / "bank.db")
    plain, stderr, code, server = run(desk(tmp_path / "desk"), "clerk", move, [37], LLM_DO_DATABASE_URL=url)
    assert code == 0, stderr
    assert plain["output"].startswith('```json\n{\n  "function": "begin"')  # off by default: flagged, not run
    assert plain["calls"][0]["warnings"] == [
        "the reply is a call to tool 'begin' written as text (JSON): the tool was not run"
    ]
    document, stderr, code, server = run(
        desk(tmp_path / "desk2"), "clerk", move, [37, 40], LLM_DO_DATABASE_URL=url, LLM_DO_TEXT_TOOL_CALLS="true"
    )
    assert code == 0, stderr
    assert server.served == [37, 40]
    sent = server.received[1].body["messages"]
    assert sent[2]["tool_calls"][0]["function"] == {"name": "begin", "arguments": "{}"}
    assert sent[3]["role"] == "tool" and sent[3]["content"].startswith("txn_")  # begin ran: a live handle
    assert document["output"].startswith('{{"name": "query"')
    assert document["calls"][0]["usage"]["tool_calls"] == 1
    assert document["calls"][0]["warnings"] == [
        "reply 1 was a call to tool 'begin' written as JSON text; it was run as that call "
        "(text_tool_calls, LLM_DO_TEXT_TOOL_CALLS)",
        "the reply holds a call to tool 'query' written as text: the tool was not run",
    ]
    assert "clerk !! reply 1 was a call to tool 'begin' written as JSON text; it was run as that call" in stderr
    assert "clerk <- begin -> txn_" in stderr


def test_a_model_that_keeps_replying_nothing_fails_the_run_naming_the_entry_and_what_it_takes(tmp_path: Path) -> None:
    # Exchange 5: after three reads, an empty reply; the model says nothing again after pydantic-ai's retry prompt.
    document, _, code, server = run(desk(tmp_path / "desk"), "files", MEETING, [2, 3, 4, 5], borrowed=(5,))
    assert code == 1
    assert server.served == [2, 3, 4, 5, 5]
    assert document["error"].startswith(
        "RepliesRefused: entry 'files': the model gave no answer the entry takes before its retries ran out "
        "(Exceeded maximum output retries (1)); the last reply was empty, and its answer must be text, or calls of "
        "its tools."
    )


def test_a_model_that_repeats_a_refused_call_fails_the_run_naming_the_tool_and_the_last_refusal(
    tmp_path: Path,
) -> None:
    # Exchange 52: read_text with offset -1 and limit 0, refused; the model asked again makes the same call.
    ask = "Call read_text on notes.txt with offset -1 and limit 0."
    document, _, code, server = run(desk(tmp_path / "desk"), "files", ask, [52], borrowed=(52,))
    assert code == 1
    assert server.served == [52, 52]
    assert document["error"] == (
        "RepliesRefused: entry 'files': the model's calls of tool 'read_text' kept being refused until its retries "
        "ran out (1); the last refusal: offset: Input should be greater than or equal to 0; limit: Input should be "
        "greater than or equal to 1. Give the model clearer instructions or one that calls tools with valid "
        "arguments (in code, the agent's `retries` allows more attempts)."
    )
