"""Limits on a real model, on the recorded HTTP server: the token cap every request carries, a runaway reply
ended by `request_timeout` (the cancellation reaching the server), a run ended by `run_timeout` and by
`run_requests`; each error names the limit and the setting, file or key that set it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterable
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import models

from llm_do.project import load_project

from ..cli_projects import llm_do
from ..real_model.httplog import exchanges
from ..real_model.projects import FILES, desk, worker
from ..real_model.server import RecordedServer, recorded_server

TODO = "What is on the todo list? It is in todo.md."
ANSWERED = [33, 34]


def run(
    project: Path, prompt: str, answers: list[int], *, entry: str = "files", drip: int | None = None, **env: str
) -> tuple[Any, int, RecordedServer]:
    with recorded_server(exchanges(), answers, drip=drip) as (url, server):
        ran = llm_do(
            "run", project, prompt, "--entry", entry, "-m", "openai-chat:qwen", "-v", "--json",
            env={"LLM_DO_OPENAI_BASE_URL": url, **env},
        )  # fmt: skip
    if ran.returncode == 0:
        assert server.served == answers, ran.stderr
    assert ran.stdout, f"the command wrote no JSON (exit {ran.returncode}): {ran.stderr}"
    return json.loads(ran.stdout), ran.returncode, server


def sent_caps(server: RecordedServer) -> list[tuple[object, object]]:
    return [(got.body.get("max_tokens"), got.body.get("max_completion_tokens")) for got in server.received]


async def test_every_request_carries_a_token_cap_that_a_worker_can_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = desk(tmp_path / "desk")
    for name, extra in (("capped", "limits: {max_tokens: 256}\n"), ("own", "model_settings: {max_tokens: 100}\n")):
        (project / f"{name}.worker").write_text(worker(name, FILES, ["filesystem_readonly"], extra=extra))
    monkeypatch.delenv("LLM_DO_LIMITS__MAX_TOKENS", raising=False)
    assert sent_caps(await in_process(project, "files", monkeypatch)) == [(8192, None)] * 2
    # `max_tokens`, the field OpenAI-compatible servers read, not OpenAI's newer `max_completion_tokens`
    assert sent_caps(await in_process(project, "capped", monkeypatch)) == [(256, None)] * 2  # the worker's limit
    assert sent_caps(await in_process(project, "own", monkeypatch)) == [(100, None)] * 2  # its model_settings win
    monkeypatch.setenv("LLM_DO_LIMITS__MAX_TOKENS", "0")
    assert sent_caps(await in_process(project, "files", monkeypatch)) == [(None, None)] * 2  # 0: none sent


async def in_process(project: Path, entry: str, monkeypatch: pytest.MonkeyPatch) -> RecordedServer:
    """Run `entry` of `project` on the todo question in this process, streamed (as the recorded runs were)."""
    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", True)

    async def handler(ctx: object, events: AsyncIterable[object]) -> None:
        async for _ in events:
            pass

    with recorded_server(exchanges(), ANSWERED) as (url, server):
        monkeypatch.setenv("LLM_DO_OPENAI_BASE_URL", url)
        async with load_project(project, model="openai-chat:qwen", event_stream_handler=handler) as loaded:
            await loaded.run(entry, TODO)
    assert server.served == ANSWERED
    return server


def test_a_runaway_reply_is_cancelled_at_request_timeout(tmp_path: Path) -> None:
    project = desk(tmp_path / "desk", extra={"files": "limits: {request_timeout: 1.5}\n"})
    document, code, server = run(project, TODO, [], drip=44)  # exchange 44's long reply, streamed without end
    assert code == 1
    assert len(server.received) == 1
    assert server.gone.wait(10)  # the client closed the stream: the server stopped generating
    assert document["error"] == (
        "RequestTookTooLong: a model request of entry 'files' to 'qwen' took longer than 1.5 s and was cancelled "
        "(limit request_timeout=1.5, set by limits.request_timeout in files.worker). A reply that never ends (a "
        "small model repeating itself) stops here; if the model is only slow, raise the limit."
    )
    assert document["calls"][0]["outcome"] == "error"


def test_a_run_is_cancelled_at_run_timeout(tmp_path: Path) -> None:
    (root := desk(tmp_path / "desk")).joinpath("project.toml").write_text("[limits]\nrun_timeout = 1.5\n")
    document, code, server = run(root, TODO, [], drip=44, LLM_DO_LIMITS__REQUEST_TIMEOUT="0")
    assert code == 1
    assert len(server.received) == 1
    assert server.gone.wait(10)
    assert document["error"].startswith(
        "RunTookTooLong: the run of entry 'files' took longer than 1.5 s and was cancelled (limit run_timeout=1.5, "
        "set by limits.run_timeout in project.toml)."
    )


def test_a_run_stops_at_run_requests(tmp_path: Path) -> None:
    meeting = "When is the meeting with the auditors? It is in notes.txt."
    document, code, server = run(desk(tmp_path / "desk"), meeting, [2, 3, 4, 5, 6], LLM_DO_LIMITS__RUN_REQUESTS="3")
    assert code == 1
    assert server.served == [2, 3, 4]
    assert document["error"].startswith(
        "RunOverLimit: the run reached its limit of 3 model requests in entry 'files' (The next request would exceed "
        "the request_limit of 3) (limit run_requests=3, set by LLM_DO_LIMITS__RUN_REQUESTS)."
    )
    assert document["usage"]["requests"] == 3
