"""Record and replay models: a real OpenAI client recorded and replayed offline, nested and parallel
calls replayed deterministically, clear errors for missing answers and unknown formats, atomic files."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage

from llm_do import AgentEntry, Runtime, RuntimeConfig, tool
from llm_do.models import (
    MissingResponse,
    Recording,
    RecordingError,
    RecordingModel,
    ReplayModel,
)
from llm_do.testing import Step, Turn, answering, tool_call

from ..counter import Counter

API_KEY = "sk-test-never-recorded-4242"


# a real OpenAI client against a local OpenAI-compatible server


def completion(message: dict[str, Any], finish: str, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{prompt_tokens}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-local",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


class JsonServer(BaseHTTPRequestHandler):
    """Answers each POST to `endpoint` with `answer(body)` as JSON, keeping (Authorization, body) in `seen`."""

    endpoint = "/v1/chat/completions"
    seen: list[tuple[str, dict[str, Any]]]

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append((self.headers.get("Authorization", ""), body))
        if self.path != self.endpoint:
            self.send_error(404)
            return
        data = json.dumps(self.answer(body)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class ChatServer(JsonServer):
    """Answers the first turn with a tool call, and a conversation holding a tool result with text."""

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        tool_results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if tool_results:
            return completion({"content": f"The total is {tool_results[-1]}."}, "stop", 31, 6)
        call = {"id": "call_abc", "type": "function", "function": {"name": "add", "arguments": '{"amount": 2}'}}
        return completion({"content": None, "tool_calls": [call]}, "tool_calls", 25, 9)


@contextmanager
def chat_server(
    handler: type[JsonServer] = ChatServer,
) -> Iterator[tuple[str, list[tuple[str, dict[str, Any]]]]]:
    """An OpenAI-compatible server on loopback answering with `handler`: its base URL, and what it was sent."""
    seen: list[tuple[str, dict[str, Any]]] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (handler,), {"seen": seen}))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def counter_runtime(model: models.Model) -> Runtime:
    adder = AgentEntry(Agent(instructions="Use the counter."), name="adder", toolsets=["counter"])
    return Runtime(None, entries=[adder], toolsets={"counter": Counter}, config=RuntimeConfig(model=model))


async def test_a_real_openai_client_is_recorded_and_replayed_offline(tmp_path: Path) -> None:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    path = tmp_path / "session.json"
    allowed = models.ALLOW_MODEL_REQUESTS
    models.ALLOW_MODEL_REQUESTS = True
    try:
        with chat_server() as (base_url, seen):
            real = OpenAIChatModel("gpt-local", provider=OpenAIProvider(base_url=base_url, api_key=API_KEY))
            async with RecordingModel(real, path) as recorder, counter_runtime(recorder) as runtime:
                live = await runtime.run("adder", "Add two.")
    finally:
        models.ALLOW_MODEL_REQUESTS = allowed
    assert [auth for auth, _ in seen] == [f"Bearer {API_KEY}"] * 2, "the real client went over HTTP"
    assert live.output == "The total is 2."
    assert (live.usage.requests, live.usage.input_tokens, live.usage.output_tokens) == (2, 56, 15)

    saved = path.read_text()
    assert API_KEY not in saved and "Authorization" not in saved and "Bearer" not in saved
    data = json.loads(saved)
    assert data["version"] == 1 and len(data["responses"]) == 2
    assert [item["request_index"] for item in data["responses"]] == [0, 1]
    assert data["responses"][0]["chain"] == ["adder"]

    assert models.ALLOW_MODEL_REQUESTS is False  # the server is gone and requests are refused: replay is offline
    async with counter_runtime(ReplayModel.from_file(path)) as runtime:
        replayed = await runtime.run("adder", "Add two.")
    assert replayed.output == live.output
    assert replayed.usage == live.usage
    assert len(seen) == 2


# nested, parallel and concurrent runs


def boss_or_helper(turn: Turn) -> Step:
    """The boss asks two helpers and the counter in parallel; each helper adds, then answers."""
    if turn.prompt.startswith("task "):
        if turn.step == 0:
            return [
                tool_call("helper", input=f"left of {turn.prompt}"),
                tool_call("helper", input=f"right of {turn.prompt}"),
                tool_call("add", amount=len(turn.prompt)),
            ]
        return f"boss[{turn.prompt}]: " + " | ".join(map(str, turn.returns))
    if turn.step == 0:
        return tool_call("add", amount=len(turn.prompt))
    return f"helper({turn.prompt})={turn.returns[0]}"


def team(model: models.Model) -> Runtime:
    boss = AgentEntry(Agent(instructions="Delegate."), name="boss", toolsets=["helper", "counter"])
    helper = AgentEntry(Agent(instructions="Add."), name="helper", toolsets=["counter"], description="Helps.")
    return Runtime(None, entries=[boss, helper], toolsets={"counter": Counter}, config=RuntimeConfig(model=model))


TASKS = [f"task {name}" for name in ("alpha", "beta", "gamma", "delta-long")]


async def record_team(path: Path) -> dict[str, tuple[str, Any]]:
    async with RecordingModel(answering(boss_or_helper), path) as recorder, team(recorder) as runtime:
        results = await asyncio.gather(*(runtime.run("boss", task) for task in TASKS))
    return {task: (result.output, result.usage) for task, result in zip(TASKS, results, strict=True)}


async def test_nested_parallel_and_concurrent_runs_replay_deterministically(tmp_path: Path) -> None:
    path = tmp_path / "team.json"
    recorded = await record_team(path)
    assert recorded["task alpha"][0] == (
        "boss[task alpha]: helper(left of task alpha)=18 | helper(right of task alpha)=19 | 10"
    )
    entries = json.loads(path.read_text())["responses"]
    assert len(entries) == len(TASKS) * 6, "per task: two boss requests and two per helper call"
    assert {tuple(item["chain"]) for item in entries} == {("boss",), ("boss", "helper")}

    replay = ReplayModel.from_file(path)
    async with team(replay) as runtime:
        for _ in range(3):
            order = TASKS[::-1] + TASKS
            results = await asyncio.gather(*(runtime.run("boss", task) for task in order))
            for task, result in zip(order, results, strict=True):
                assert (result.output, result.usage) == recorded[task]


async def test_tool_calls_replay_with_deterministic_ids(tmp_path: Path) -> None:
    path = tmp_path / "team.json"
    await record_team(path)
    replay = ReplayModel.from_file(path)
    ids: list[list[str]] = []
    async with team(replay) as runtime:
        for _ in range(2):
            result = await runtime.run("boss", "task beta")
            first = result.messages[1]
            assert isinstance(first, ModelResponse)
            ids.append([part.tool_call_id for part in first.parts if isinstance(part, ToolCallPart)])
    assert ids[0] == ids[1] and len(set(ids[0])) == 3
    assert all(tool_call_id.startswith("replay_") for tool_call_id in ids[0])


async def test_a_missing_answer_names_the_chain_the_request_and_how_to_re_record(tmp_path: Path) -> None:
    path = tmp_path / "team.json"
    await record_team(path)
    async with team(ReplayModel.from_file(path)) as runtime:
        with pytest.raises(MissingResponse) as missing:
            await runtime.run("boss", "task omega")
    message = str(missing.value)
    assert f"{path} has no recorded response for entry chain boss, request #0" in message
    assert "prompt 'task omega'" in message
    assert f"RecordingModel(<a real model>, {str(path)!r})" in message
    assert missing.value.request.chain == ("boss",)


async def test_a_nested_miss_names_the_nested_call_and_the_tool_returns(tmp_path: Path) -> None:
    path = tmp_path / "team.json"
    await record_team(path)

    class Doubled(Counter):
        @tool
        def add(self, amount: int) -> int:
            """Add twice to the counter and return the total."""
            self.value += 2 * amount
            return self.value

    replay = ReplayModel.from_file(path)
    boss = AgentEntry(Agent(instructions="Delegate."), name="boss", toolsets=["helper", "counter"])
    helper = AgentEntry(Agent(instructions="Add."), name="helper", toolsets=["counter"], description="Helps.")
    runtime = Runtime(None, entries=[boss, helper], toolsets={"counter": Doubled}, config=RuntimeConfig(model=replay))
    async with runtime:
        with pytest.raises(MissingResponse) as missing:
            await runtime.run("boss", "task alpha")
    assert "entry chain boss > helper, request #1 of its agent run, asking tool returns: add -> 36" in str(
        missing.value
    )


# the file


async def test_recordings_merge_and_a_re_recording_replaces_its_answers(tmp_path: Path) -> None:
    path = tmp_path / "merged.json"
    script = answering(lambda turn: f"first answer to {turn.prompt}")
    echo = AgentEntry(Agent(), name="echo")

    async def record(model: models.Model, prompt: str) -> None:
        recorder = RecordingModel(model, path)
        async with recorder, Runtime(None, entries=[echo], config=RuntimeConfig(model=recorder)) as runtime:
            await runtime.run("echo", prompt)

    for prompt in ("one", "two"):
        await record(script, prompt)
    await record(answering(lambda turn: f"second answer to {turn.prompt}"), "two")
    assert len(json.loads(path.read_text())["responses"]) == 2
    async with Runtime(None, entries=[echo], config=RuntimeConfig(model=ReplayModel.from_file(path))) as runtime:
        assert (await runtime.run("echo", "one")).output == "first answer to one"
        assert (await runtime.run("echo", "two")).output == "second answer to two"


async def test_a_request_asked_twice_in_one_recording_replays_its_first_answer_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "twice.json"
    answers = iter(["first", "second"])
    changing = FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart(next(answers))]))
    echo = AgentEntry(Agent(), name="echo")
    recorder = RecordingModel(changing, path)
    async with recorder, Runtime(None, entries=[echo], config=RuntimeConfig(model=recorder)) as runtime:
        live = [(await runtime.run("echo", "same")).output for _ in range(2)]
    assert live == ["first", "second"]
    warnings = [record.getMessage() for record in caplog.records if record.name == "llm_do.models"]
    assert len(warnings) == 1
    assert str(path) in warnings[0] and "entry chain echo, request #0" in warnings[0]
    assert "keeps the first answer" in warnings[0]
    async with Runtime(None, entries=[echo], config=RuntimeConfig(model=ReplayModel.from_file(path))) as runtime:
        assert (await runtime.run("echo", "same")).output == "first"


async def test_re_recording_over_a_file_that_is_not_a_recording_says_what_it_replaced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"version": 1, "responses": [{"entyr": "echo", "response": {"parts": []}}]}))
    echo = AgentEntry(Agent(), name="echo")
    recorder = RecordingModel(answering(lambda turn: "hi"), path)
    async with recorder, Runtime(None, entries=[echo], config=RuntimeConfig(model=recorder)) as runtime:
        await runtime.run("echo", "hello")
    assert len(Recording.load(path)) == 1
    warnings = [record.getMessage() for record in caplog.records if record.name == "llm_do.models"]
    assert len(warnings) == 1
    assert f"{path}: responses[0]: unknown field 'entyr'" in warnings[0]
    assert "The file was replaced by the new recording: its entries were not kept" in warnings[0]


def test_an_unknown_format_version_is_refused_with_advice(tmp_path: Path) -> None:
    path = tmp_path / "future.json"
    path.write_text(json.dumps({"version": 2, "responses": []}))
    with pytest.raises(RecordingError, match=r"format version 2 is not supported .*version 1.*re-record it"):
        ReplayModel.from_file(path)
    path.write_text("{not json")
    with pytest.raises(RecordingError, match="not JSON"):
        ReplayModel.from_file(path)
    path.write_text(json.dumps({"version": 1, "responses": [{"key": "k"}]}))
    with pytest.raises(RecordingError, match=r"responses\[0\]: each entry of 'responses' needs a 'response'"):
        ReplayModel.from_file(path)
    with pytest.raises(RecordingError, match="no such recording"):
        ReplayModel.from_file(tmp_path / "absent.json")


def test_a_failed_save_leaves_the_old_file_whole_and_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "kept.json"
    Recording.from_script(["hello"]).save(path)
    before = path.read_bytes()
    unserialisable = Recording.from_script([ToolCallPart("add", {"amount": object()})])
    with pytest.raises(Exception, match="object"):
        unserialisable.save(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.json"]

    directory = tmp_path / "a-directory.json"
    directory.mkdir()
    with pytest.raises(OSError):
        Recording.from_script(["hello"]).save(directory)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-directory.json", "kept.json"]
    assert list(directory.iterdir()) == []


# scripts and streaming


@pytest.mark.parametrize(
    ("step", "problem"),
    [
        ({"request_index": "1"}, r"responses\[0\]: 'request_index' must be a whole number from 0, got '1'"),
        ({"request_index": -1}, r"responses\[0\]: 'request_index' must be a whole number from 0, got -1"),
        ({"request_index": True}, r"responses\[0\]: 'request_index' must be a whole number from 0, got True"),
        ({"entyr": "greeter"}, r"responses\[0\]: unknown field 'entyr' \(an entry has: response, entry, "),
    ],
)
def test_a_script_step_whose_fields_would_match_any_request_is_refused(
    tmp_path: Path, step: dict[str, Any], problem: str
) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"version": 1, "responses": [{**step, "response": {"parts": []}}]}))
    with pytest.raises(RecordingError, match=problem):
        ReplayModel.from_file(path)


async def test_a_script_recording_drives_an_agent_and_keeps_usage(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    Recording.from_script(
        [
            ToolCallPart("add", {"amount": 3}),
            ModelResponse(parts=[TextPart("added")], usage=RequestUsage(input_tokens=40, output_tokens=2)),
        ],
        entry="adder",
    ).save(path)
    async with counter_runtime(ReplayModel.from_file(path)) as runtime:
        result = await runtime.run("adder", "anything")
    assert result.output == "added"
    assert (result.usage.requests, result.usage.input_tokens, result.usage.tool_calls) == (2, 40, 1)
    other = AgentEntry(Agent(), name="other")
    async with Runtime(None, entries=[other], config=RuntimeConfig(model=ReplayModel.from_file(path))) as runtime:
        with pytest.raises(MissingResponse, match="entry chain other, request #0"):
            await runtime.run("other", "hi")


def test_exact_answers_win_over_script_steps() -> None:
    recording = Recording.from_script(["any prompt"]).add_script(["for hi"], prompt="hi")
    agent = Agent(ReplayModel(recording))
    assert agent.run_sync("hi").output == "for hi"
    assert agent.run_sync("hello").output == "any prompt"


async def test_streamed_runs_record_and_replay(tmp_path: Path) -> None:
    path = tmp_path / "stream.json"
    recorder = RecordingModel(TestModel(custom_output_text="streamed words arrive"), path)
    async with recorder, Agent(recorder).run_stream("say it") as live:
        live_text = [chunk async for chunk in live.stream_text(debounce_by=None)]
        live_usage = live.usage
    async with Agent(ReplayModel.from_file(path)).run_stream("say it") as replayed:
        replayed_text = [chunk async for chunk in replayed.stream_text(debounce_by=None)]
        assert replayed.usage == live_usage
    assert live_text[-1] == replayed_text[-1] == "streamed words arrive"


async def test_a_conversation_holding_a_lone_surrogate_is_recorded_and_replayed(tmp_path: Path) -> None:
    """A lone surrogate (text decoded with `surrogateescape`, or a provider's `\\ud800` escape) cannot be UTF-8
    encoded: the request's key is still computed, and the file is written with JSON's escape for it."""
    path = tmp_path / "odd.json"
    odd = "bytes \udcff that were not UTF-8"

    def echo(messages: list[ModelMessage], info: Any) -> ModelResponse:
        return ModelResponse(parts=[TextPart(f"you said: {odd}")])

    adder = AgentEntry(Agent(), name="echo")
    recorder = RecordingModel(FunctionModel(echo), path)
    async with recorder, Runtime(None, entries=[adder], config=RuntimeConfig(model=recorder)) as runtime:
        recorded = await runtime.run("echo", odd)
    assert recorded.output == f"you said: {odd}"
    assert "\\udcff" in path.read_text(encoding="ascii")
    async with Runtime(None, entries=[adder], config=RuntimeConfig(model=ReplayModel.from_file(path))) as runtime:
        assert (await runtime.run("echo", odd)).output == recorded.output
