"""`-vv`: the model's text as it streams. A reply that is one long line shows as it comes, not when its line ends,
and the text of the line a run ends in is shown however the run ends: a timeout, a server that goes away, Ctrl-C.
The recorded reply is exchange 98 of `tests/real_model/tool-calls.jsonl`: `1, 2, 3, ..., 30`, 109 tokens streamed
in 61 s of which `-vv` showed nothing, until llm-do was stopped."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from pydantic_ai.messages import PartDeltaEvent, PartEndEvent, PartStartEvent, TextPart, TextPartDelta

from llm_do import CallTag
from llm_do.cli.watch import Board
from llm_do.events import CallEvent

from ..cli_projects import llm_do, start_llm_do
from ..real_model.projects import desk
from ..real_model.server import recorded_server
from ..real_model.toolcalls import streamed_text, tool_exchanges

COUNTING = streamed_text(98)


def shown(stderr: str) -> str:
    """The streamed text `-vv` showed, its pieces put back together."""
    return "".join(line.removeprefix("files .. ") for line in stderr.splitlines() if line.startswith("files .. "))


@pytest.mark.parametrize("end", ["hang", "drop"])
def test_the_line_a_run_ends_in_is_shown_at_a_timeout_and_when_the_server_goes_away(tmp_path: Path, end: str) -> None:
    project = desk(tmp_path / "desk", extra={"files": "limits: {request_timeout: 2}\n"})
    with recorded_server(tool_exchanges(), stall=(COUNTING, end)) as (url, _):
        ran = llm_do(
            "run", project, "Count from 1 to 2000.", "--entry", "files", "-m", "openai-chat:qwen", "-vv",
            env={"LLM_DO_OPENAI_BASE_URL": url},
        )  # fmt: skip
    assert ran.returncode == 1
    assert (
        "RequestTookTooLong" in ran.stderr if end == "hang" else "ModelUnreachable: lost the connection" in ran.stderr
    )
    assert shown(ran.stderr) == COUNTING
    assert ran.stderr.index("files .. 1, 2, 3") < ran.stderr.index("llm-do: error:")


def test_the_line_a_run_ends_in_is_shown_at_ctrl_c(tmp_path: Path) -> None:
    with recorded_server(tool_exchanges(), stall=(COUNTING, "hang")) as (url, server):
        started = start_llm_do(
            "run", desk(tmp_path / "desk"), "Count from 1 to 2000.", "--entry", "files", "-m", "openai-chat:qwen",
            "-vv", env={"LLM_DO_OPENAI_BASE_URL": url},
        )  # fmt: skip
        assert server.sent.wait(60)
        time.sleep(0.5)  # for the command to read what was sent: a Ctrl-C first would leave less to show
        os.kill(started.pid, signal.SIGINT)
        ran = started.wait(60)
    assert ran.returncode == 130
    assert shown(ran.stderr) and COUNTING.startswith(shown(ran.stderr))
    assert "interrupted" in ran.stderr


TAG = CallTag("call_1", None, "files", 0, ("files",), None)


def streamed(board: Board, *pieces: str) -> None:
    board.see(CallEvent(TAG, PartStartEvent(index=0, part=TextPart(pieces[0]))))
    for piece in pieces[1:]:
        board.see(CallEvent(TAG, PartDeltaEvent(index=0, delta=TextPartDelta(piece))))


def test_the_text_of_a_line_not_ended_is_shown_once_it_has_waited() -> None:
    now = [0.0]
    echoed: list[str] = []
    board = Board(verbosity=2, echo=lambda kind, where, text: echoed.append(text), clock=lambda: now[0])
    streamed(board, "1, ", "2, ")
    assert echoed == []  # a line may still end: wait
    now[0] = 0.6
    for piece in (", 3", ", 4\n5"):
        board.see(CallEvent(TAG, PartDeltaEvent(index=0, delta=TextPartDelta(piece))))
    assert echoed == ["1, 2, , 3", ", 4"]  # shown after flush_after (0.5 s), then the line's end
    board.see(CallEvent(TAG, PartEndEvent(index=0, part=TextPart("..."))))
    assert echoed[-1] == "5"
    board.see(CallEvent(TAG, PartDeltaEvent(index=0, delta=TextPartDelta("6"))))
    board.flush()
    assert echoed[-1] == "6" and len(echoed) == 4
