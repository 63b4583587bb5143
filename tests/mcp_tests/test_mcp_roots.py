"""MCP roots: directories a server may work in, offered by the client, confined to the project directory
unless a declaration allows more. Tested against the real `@modelcontextprotocol/server-filesystem` (npm,
installed by `make setup` into tests/mcp_servers), which works only in the roots its client offers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import containers, providers
from fastmcp.client.transports import StdioTransport
from pydantic_ai.mcp import MCPToolset

from llm_do import ConfigurationError, Runtime, RuntimeConfig
from llm_do.mcp import confined_roots
from llm_do.project import ProjectError, load_project

from ..mcp_support import SERVER, agent_entry, answers_of, plan, plan_model, server_processes

FILESYSTEM = Path(__file__).parents[1] / "mcp_servers" / "node_modules" / ".bin" / "mcp-server-filesystem"
APPROVE_ALL = RuntimeConfig(approval_mode="approve_all")


def filesystem_server() -> Path:
    if not FILESYSTEM.exists():
        pytest.fail(
            "the MCP server @modelcontextprotocol/server-filesystem is not installed: run `make setup` "
            "(it runs `npm ci --prefix tests/mcp_servers`)"
        )
    return FILESYSTEM


def desk(tmp_path: Path, server: str) -> Path:
    """A project with data/notes.txt, a secret.txt beside it, and `server` declared as `files`."""
    root = tmp_path / "desk"
    (root / "data").mkdir(parents=True)
    (root / "data" / "notes.txt").write_text("milk, eggs")
    (root / "secret.txt").write_text("the password")
    (root / "project.toml").write_text(f'entry = "clerk"\n\n[mcp_servers.files]\n{server}')
    (root / "clerk.worker").write_text("---\ntoolsets: [files]\n---\nRead.")
    return root


def content(answer: Any) -> str:
    """The text of a filesystem tool's answer (its structured content), or its error."""
    return str(answer["content"]) if isinstance(answer, dict) else str(answer)


async def allowed_directories(run: Any) -> str:
    """What the filesystem server allows, once it has taken the roots it asks for after the handshake."""
    for _ in range(100):
        [listed] = answers_of(await run("clerk", plan("list_allowed_directories")))
        if content(listed).strip() != "Allowed directories:":
            return content(listed)
        await asyncio.sleep(0.05)
    raise AssertionError("the filesystem server never took a root")


@pytest.mark.long
async def test_the_filesystem_server_works_in_the_declared_root_and_nowhere_else(tmp_path: Path) -> None:
    root = desk(tmp_path, f'command = "{filesystem_server()}"\nroots = ["data"]\n')
    data = (root / "data").resolve()
    async with load_project(root, model=plan_model(), config=APPROVE_ALL) as project:
        assert await allowed_directories(project.run) == f"Allowed directories:\n{data}"
        steps = plan(
            ("read_text_file", {"path": str(data / "notes.txt")}),
            ("read_text_file", {"path": str(root / "secret.txt")}),
        )
        inside, outside = answers_of(await project.run("clerk", steps))
    assert content(inside) == "milk, eggs"
    assert "Access denied" in content(outside) and "the password" not in content(outside)
    assert server_processes("mcp-server-filesystem") == []


@pytest.mark.long
async def test_roots_declared_in_python_reach_the_filesystem_server(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "notes.txt").write_text("milk, eggs")
    (tmp_path / "secret.txt").write_text("the password")
    command = str(filesystem_server())

    class App(containers.DeclarativeContainer):
        files = providers.Singleton(
            lambda: MCPToolset(StdioTransport(command, []), roots=confined_roots(tmp_path, ["data"]))
        )

    async with Runtime(App(), entries=[agent_entry("clerk", ["files"])], config=APPROVE_ALL) as runtime:
        assert await allowed_directories(runtime.run) == f"Allowed directories:\n{data.resolve()}"
        steps = plan(
            ("read_text_file", {"path": str(data / "notes.txt")}),
            ("read_text_file", {"path": str(tmp_path / "secret.txt")}),
        )
        inside, outside = answers_of(await runtime.run("clerk", steps))
    assert content(inside) == "milk, eggs"
    assert "Access denied" in content(outside)
    assert server_processes("mcp-server-filesystem") == []


def test_a_root_outside_the_project_is_refused_unless_the_declaration_allows_it(tmp_path: Path) -> None:
    outside = tmp_path / "shared"
    outside.mkdir()
    root = desk(tmp_path, f'command = "{SERVER}"\nroots = ["data", "../shared", "missing"]\n')
    (root / "link").symlink_to(outside)
    with pytest.raises(ProjectError) as caught:
        load_project(root, model="test")
    messages = [str(problem) for problem in caught.value.problems]
    assert messages == [
        f"{root / 'project.toml'}:5: MCP server 'files': root '../shared' is {outside}, outside the project "
        f"directory {root}; move it into the project, or set allow_roots_outside_project = true",
        f"{root / 'project.toml'}:5: MCP server 'files': root 'missing' is not a directory ({root / 'missing'})",
    ]
    (root / "project.toml").write_text(f'[mcp_servers.files]\ncommand = "{SERVER}"\nroots = ["link"]\n')
    with pytest.raises(ProjectError, match=r"root 'link' is .*shared, outside the project directory"):
        load_project(root, model="test")
    (root / "project.toml").write_text(
        f'[mcp_servers.files]\ncommand = "{SERVER}"\nroots = ["link", "data"]\nallow_roots_outside_project = true\n'
    )
    load_project(root, model="test")


def test_confined_roots_gives_file_uris_of_directories_in_the_project(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "other").mkdir()
    assert confined_roots(tmp_path, ["data", tmp_path / "other"]) == [
        (tmp_path / "data").resolve().as_uri(),
        (tmp_path / "other").resolve().as_uri(),
    ]
    with pytest.raises(ConfigurationError, match=r"root '\.\.' is .*, outside the project directory .*; move it"):
        confined_roots(tmp_path / "data", [".."])
    assert confined_roots(tmp_path / "data", [".."], allow_outside=True) == [tmp_path.resolve().as_uri()]
