"""A short conversation with a real model served on this machine: what worked, and how fast.

    make real-model URL=http://127.0.0.1:11434/v1 MODEL=qwen2.5-coder:1.5b   # a server you run (Ollama, vLLM, ...)
    make real-model GGUF=path/to/model.gguf                                  # served here by llama.cpp

With `URL` and `MODEL`, the checks run against that OpenAI-compatible server. With `GGUF`, a model file you
downloaded yourself is served on 127.0.0.1 by llama.cpp's `llama-server` (or, when it is not on PATH, by
llama-cpp-python's `python -m llama_cpp.server`) for the time of the checks. No model is downloaded: no
well-kept, plainly named package of model weights was found on PyPI or in Debian.

The checks run a copy of `examples/local_model` as `openai-chat:MODEL`, streamed, through llm-do's public API:

1. a tool call, then an answer: `files` reads todo.md (`read_text`) and names what is on the list;
2. an agent called as a tool: `asker` hands the question to `reader`, and the answer has the invoice's amount.

For each: whether it worked (and if not, why: its error, or what llm-do's checks said of the replies), the
requests and tokens, the seconds from the start to the first text the model streamed, and the output tokens
per second of the whole run. Not part of `make test`; the suite replays a recorded session through this script.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "local_model"


@dataclass(frozen=True)
class Check:
    name: str
    entry: str
    prompt: str
    expected: str
    """Text the answer must hold."""


CHECKS = (
    Check("a tool call, then an answer", "files", "What is on the todo list? It is in todo.md.", "TLS certificate"),
    Check("an agent called as a tool", "asker", "How much is the cloud invoice? It is in todo.md.", "412"),
)


@dataclass
class Outcome:
    check: Check
    worked: bool
    why: str
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    first_text: float | None = None
    tool_calls: int = 0


async def run_check(check: Check, project: Path, model: str) -> Outcome:
    from llm_do import run_report
    from llm_do.project import load_project

    started = time.monotonic()
    first: list[float] = []
    async with load_project(project, model=f"openai-chat:{model}") as loaded:
        try:
            result = await _streamed(loaded.runtime, check, started, first)
        except Exception as error:
            outcome = Outcome(check, False, f"{type(error).__name__}: {' '.join(str(error).split())}")
            report = run_report(error)
            if report is not None:
                _count(outcome, report.usage)
            outcome.seconds, outcome.first_text = time.monotonic() - started, first[0] if first else None
            return outcome
    warnings = [f"{call.entry}: {warning}" for call in result.calls for warning in call.warnings]
    answer = str(result.output)
    if warnings:
        worked, why = False, "; ".join(warnings)
    elif check.expected not in answer:
        worked, why = False, f"the answer does not say {check.expected!r}: {' '.join(answer.split())[:160]!r}"
    else:
        worked, why = True, " ".join(answer.split())[:160]
    outcome = Outcome(check, worked, why)
    _count(outcome, result.usage)
    outcome.seconds, outcome.first_text = time.monotonic() - started, first[0] if first else None
    return outcome


async def _streamed(runtime: Any, check: Check, started: float, first: list[float]) -> Any:
    """The check's run, streamed: its result (or its error); `first` gets the seconds to the first text."""
    from pydantic_ai.messages import PartDeltaEvent, PartStartEvent, TextPart, TextPartDelta

    from llm_do import CallEvent

    async with runtime.stream(check.entry, check.prompt) as run:
        async for event in run:
            if first or not isinstance(event, CallEvent):
                continue
            inner = event.event
            if (isinstance(inner, PartStartEvent) and isinstance(inner.part, TextPart)) or (
                isinstance(inner, PartDeltaEvent) and isinstance(inner.delta, TextPartDelta)
            ):
                first.append(time.monotonic() - started)
        return await run.result()


def _count(outcome: Outcome, usage: Any) -> None:
    outcome.requests, outcome.tool_calls = usage.requests, usage.tool_calls
    outcome.input_tokens, outcome.output_tokens = usage.input_tokens, usage.output_tokens


def report(outcomes: list[Outcome], url: str, model: str) -> str:
    lines = [f"model {model!r} at {url}", ""]
    header = f"{'check':30} {'result':7} {'requests':>8} {'tools':>5} {'in':>6} {'out':>5} {'seconds':>8}"
    lines.append(f"{header} {'first text':>10} {'out tok/s':>9}")
    for item in outcomes:
        rate = item.output_tokens / item.seconds if item.seconds > 0 else 0.0
        first = f"{item.first_text:.2f}" if item.first_text is not None else "-"
        lines.append(
            f"{item.check.name:30} {'ok' if item.worked else 'FAILED':7} {item.requests:>8} {item.tool_calls:>5} "
            f"{item.input_tokens:>6} {item.output_tokens:>5} {item.seconds:>8.1f} {first:>10} {rate:>9.1f}"
        )
    lines.append("")
    lines.extend(f"{item.check.name}: {'ok' if item.worked else 'FAILED'}: {item.why}" for item in outcomes)
    worked = sum(item.worked for item in outcomes)
    lines.append(f"{worked} of {len(outcomes)} checks worked")
    return "\n".join(lines)


async def main_async(url: str, model: str) -> int:
    os.environ["LLM_DO_OPENAI_BASE_URL"] = url
    os.environ.setdefault("LLM_DO_OPENAI_API_KEY", "not-needed")
    with tempfile.TemporaryDirectory(prefix="llm-do-real-model-") as folder:
        project = Path(folder) / "local_model"
        shutil.copytree(EXAMPLE, project)
        outcomes = [await run_check(check, project, model) for check in CHECKS]
    print(report(outcomes, url, model))
    return 0


@contextmanager
def served(gguf: Path, ready_within: float) -> Iterator[str]:
    """`gguf` served on 127.0.0.1 by llama-server (or llama-cpp-python) until the block ends: its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    if shutil.which("llama-server"):
        command = ["llama-server", "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port), "--jinja"]
    else:
        if importlib.util.find_spec("llama_cpp") is None:
            raise SystemExit(
                "GGUF: neither llama.cpp's llama-server (on PATH) nor llama-cpp-python (pip install "
                "'llama-cpp-python[server]') is installed to serve it; install one, or run your own server and "
                "pass URL= and MODEL="
            )
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1"]
        command += ["--port", str(port)]
    url = f"http://127.0.0.1:{port}/v1"
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + ready_within
        while True:
            if server.poll() is not None:
                tail = (server.stderr.read() if server.stderr else "")[-2000:]
                raise SystemExit(f"the model server stopped while starting (exit {server.returncode}):\n{tail}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise SystemExit(f"the model server did not answer at {url} within {ready_within:g} s") from None
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("URL"), help="an OpenAI-compatible server's base URL")
    parser.add_argument("--model", default=os.environ.get("MODEL"), help="the model's name on that server")
    parser.add_argument("--gguf", default=os.environ.get("GGUF"), help="a GGUF model file to serve here")
    parser.add_argument("--ready-within", type=float, default=180.0, help="seconds a served model may take to load")
    args = parser.parse_args()
    if args.gguf:
        gguf = Path(args.gguf)
        if not gguf.is_file():
            parser.exit(2, f"GGUF={gguf}: no such file; give the path of a .gguf model file you downloaded\n")
        with served(gguf, args.ready_within) as url:
            return asyncio.run(main_async(url, args.model or "local"))
    if not (args.url and args.model):
        parser.exit(
            2,
            "give an OpenAI-compatible server and a model on it (make real-model URL=http://127.0.0.1:11434/v1 "
            "MODEL=qwen2.5-coder:1.5b, for Ollama), or a GGUF model file to serve here (make real-model "
            "GGUF=path/to/model.gguf, with llama.cpp's llama-server on PATH). No model is downloaded: no well-kept, "
            "plainly named package of model weights was found on PyPI or in Debian. See docs/local-models.md.\n",
        )
    return asyncio.run(main_async(args.url, args.model))


if __name__ == "__main__":
    sys.exit(main())
