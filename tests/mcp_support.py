"""Real MCP servers for the tests: the fastmcp counter server on stdio or on streamable HTTP (uvicorn,
loopback only), a model that follows a plan written in its prompt, and a look at live server processes."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from llm_do import AgentEntry

SERVER = Path(__file__).parent / "mcp_servers" / "counter_server.py"
STUBBORN = Path(__file__).parent / "mcp_servers" / "stubborn_server.py"

HOLDING = """
from pathlib import Path

from llm_do import entry


@entry(toolsets=["stubborn"])
async def main(scope, text):
    return await scope.call_tool("hold", {"marker": str(Path(__file__).with_name("holding"))})
"""


def _counter_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("counter_server_in_process", SERVER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


COUNTER = _counter_module()
"""The counter server's module, imported: its `server` can serve in process."""


def in_process() -> MCPToolset[Any]:
    """A toolset for the counter server in this process (fastmcp's in-memory transport): no process to start."""
    return MCPToolset(COUNTER.server)


def stdio_toolset(**env: str) -> MCPToolset[Any]:
    """A plain pydantic-ai toolset for the counter server, as users declare it."""
    if env:
        return MCPToolset(StdioTransport(sys.executable, [str(SERVER)], env=env))
    return MCPToolset(SERVER)


COUNTER_TOML = f'command = "python"\nargs = ["{SERVER}"]\n'
"""The counter server's lines in a `[mcp_servers.NAME]` table of project.toml."""


def write_project(root: Path, toml: str, **files: str) -> Path:
    """A project directory: `project.toml` and `files` (`clerk__worker` is the file clerk.worker)."""
    root.mkdir(exist_ok=True)
    (root / "project.toml").write_text(toml)
    for name, text in files.items():
        (root / name.replace("__", ".")).write_text(text)
    return root


def plan(*steps: tuple[str, dict[str, Any]] | str) -> str:
    """A prompt for `plan_model`: the tool calls to make, one per model request, in order."""
    return json.dumps([[step, {}] if isinstance(step, str) else list(step) for step in steps])


def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    first = messages[0]
    assert isinstance(first, ModelRequest)
    prompt = next(part.content for part in first.parts if part.part_kind == "user-prompt")
    steps = json.loads(str(prompt))
    done = sum(isinstance(message, ModelResponse) for message in messages)
    if done < len(steps):
        tool, args = steps[done]
        return ModelResponse(parts=[ToolCallPart(tool, args)])
    results = [
        part.content if isinstance(part, ToolReturnPart) else f"error: {part.content}"
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart | RetryPromptPart)
    ]
    return ModelResponse(parts=[TextPart(json.dumps(results))])


def plan_model() -> FunctionModel:
    """Calls the tools its prompt lists, then answers with the JSON list of what they returned."""
    return FunctionModel(_respond, model_name="plan")


def agent_entry(name: str, toolsets: list[str]) -> AgentEntry:
    return AgentEntry(Agent(plan_model()), name=name, toolsets=toolsets)


def answers_of(result: Any) -> list[Any]:
    """What the tools returned in a run of `plan_model`, numbers parsed."""
    return [_parsed(item) for item in json.loads(result.output)]


def _parsed(item: Any) -> Any:
    if isinstance(item, str):
        try:
            return json.loads(item)
        except ValueError:
            return item
    return item


def server_processes(script: str = SERVER.name) -> list[int]:
    """Live (not zombie) processes of an MCP server script started by this test process."""
    found = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if script.encode() not in cmdline:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state, ppid = fields[0], int(fields[1])
        if ppid == me and state != "Z":
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def http_server(port: int) -> Iterator[subprocess.Popen[bytes]]:
    """The counter server on streamable HTTP (uvicorn), on 127.0.0.1:`port`, until the block ends."""
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the HTTP MCP server exited: {process.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the HTTP MCP server did not listen within 60s") from None
                time.sleep(0.05)
        yield process
    finally:
        process.kill()
        process.wait()
        if process.stderr is not None:
            process.stderr.close()


def stubborn_project(root: Path, *, slow_start: float = 0) -> Path:
    """A project whose entry `main` calls the tool `hold` of the stubborn server (global), which creates
    the file `holding` and sleeps; the server and its child write their pids to `pids`. With
    `slow_start`, the server waits that long before answering the handshake."""
    root.mkdir(parents=True, exist_ok=True)
    env = f"STUBBORN_PIDS = {json.dumps(str(root / 'pids'))}, STUBBORN_SLOW_START = '{slow_start}'"
    (root / "project.toml").write_text(
        'entry = "main"\nworkers = []\n\n[mcp_servers.stubborn]\ncommand = "python"\n'
        f"args = [{json.dumps(str(STUBBORN))}]\nenv = {{ {env} }}\nstartup_timeout = 600\n"
    )
    (root / "flows.py").write_text(HOLDING)
    return root


def stubborn_pids(root: Path, count: int = 2, within: float = 120) -> list[int]:
    """The pids the stubborn server of `stubborn_project(root)` wrote (server and child), once written."""
    deadline = time.monotonic() + within
    while True:
        found = (root / "pids").read_text().split() if (root / "pids").exists() else []
        if len(found) >= count:
            return [int(pid) for pid in found]
        if time.monotonic() > deadline:
            raise AssertionError(f"the stubborn server did not write its pids within {within}s")
        time.sleep(0.05)


def wait_for(path: Path, within: float = 120) -> None:
    deadline = time.monotonic() + within
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear within {within}s")
        time.sleep(0.05)


def gone_within(pids: list[int], seconds: float) -> list[int]:
    """Wait up to `seconds` for every process of `pids` to end; those still alive then."""
    deadline = time.monotonic() + seconds
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]
