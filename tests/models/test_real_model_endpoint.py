"""A real model's endpoint through the command, on the recorded HTTP server: where a dead endpoint was,
the model's name with and without `--record`, and what a recording keeps of the endpoint."""

from __future__ import annotations

import json
from pathlib import Path

from ..cli_projects import llm_do
from ..real_model.httplog import exchanges
from ..real_model.projects import desk
from ..real_model.server import recorded_server

QUESTION = "When is the meeting with the auditors? It is in notes.txt."
ANSWERED = [33, 34]  # read_text, then a text answer


def test_the_model_is_named_alike_with_and_without_record(tmp_path: Path) -> None:
    project = desk(tmp_path / "desk")
    names = []
    for record in ((), ("--record", str(tmp_path / "session.json"))):
        with recorded_server(exchanges(), ANSWERED) as (url, server):
            question = "What is on the todo list? It is in todo.md."
            ran = llm_do(
                "run", project, question, "--entry", "files", "-m", "openai-chat:qwen", "-v", "--json", *record,
                env={"LLM_DO_OPENAI_BASE_URL": url},
            )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert server.served == ANSWERED
        names.append(json.loads(ran.stdout)["calls"][0]["model"])
    assert names == ["openai-chat:qwen", "openai-chat:qwen"]


def test_a_recording_keeps_nothing_of_the_endpoint_and_replays_the_same(tmp_path: Path) -> None:
    project = desk(tmp_path / "desk")
    recording = tmp_path / "session.json"
    with recorded_server(exchanges(), ANSWERED) as (url, server):
        gateway = url.replace("/v1", "/gw-token-5f3e9a/v1")  # an internal gateway, a token in its path
        live = llm_do(
            "run", project, "What is on the todo list? It is in todo.md.", "--entry", "files",
            "-m", "openai-chat:qwen", "-v", "--json", "--record", recording,
            env={"LLM_DO_OPENAI_BASE_URL": gateway},
        )  # fmt: skip
    assert live.returncode == 0, live.stderr
    assert server.received[0].path == "/gw-token-5f3e9a/v1/chat/completions"
    saved = recording.read_text()
    for kept in ("gw-token-5f3e9a", "127.0.0.1", "chatcmpl-"):
        assert kept not in saved
    responses = [item["response"] for item in json.loads(saved)["responses"]]
    assert {(r["provider_url"], r["provider_response_id"], r["provider_details"]) for r in responses} == {(None,) * 3}
    assert [response["model_name"] for response in responses] == ["qwen", "qwen"]  # what replay shows is kept

    replayed = llm_do(
        "run", project, "What is on the todo list? It is in todo.md.", "--entry", "files",
        "-m", f"replay:{recording}", "--json",
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr
    first, second = json.loads(live.stdout), json.loads(replayed.stdout)
    assert (second["output"], second["usage"]) == (first["output"], first["usage"])


def test_a_dead_endpoint_names_its_address_its_setting_and_how_long_it_was_tried(tmp_path: Path) -> None:
    project = desk(tmp_path / "desk")
    with recorded_server(exchanges(), ANSWERED) as (url, _):
        pass  # the server is gone: nothing listens at its address any more
    address = url.replace("http://", "http://llm:hunter2@")  # a password in the URL
    ran = llm_do(
        "run", project, QUESTION, "--entry", "files", "-m", "openai-chat:qwen", "--json",
        env={"LLM_DO_OPENAI_BASE_URL": address},
    )  # fmt: skip
    assert ran.returncode == 1
    error = json.loads(ran.stdout)["error"]
    assert "hunter2" not in error and "hunter2" not in ran.stderr
    shown = url.replace("http://", "http://llm:***@")
    assert error.startswith(
        f"ModelUnreachable: could not connect to the model server at {shown} (set by LLM_DO_OPENAI_BASE_URL) "
        "for model 'qwen' of entry 'files': connection refused (Connect call failed ('127.0.0.1', "
    )
    assert " s, the client's retries included. Start the server, or set LLM_DO_OPENAI_BASE_URL to the address" in error
    tried = float(error.split("tried for ")[1].split(" s,")[0])
    assert tried > 0
    assert ran.stderr.strip() == f"llm-do: error: {error}"  # the same line as without --json
