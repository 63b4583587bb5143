"""Every internal of pydantic-ai, dependency-injector and fastmcp that llm-do reads (`llm_do._compat`) is still
where it was: a release that moves one fails here, instead of llm-do silently doing less."""

from __future__ import annotations

import warnings
from typing import Any

from dependency_injector import providers
from fastmcp import Client
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from llm_do import _compat

from ..mcp_support import SERVER


def test_each_read_finds_what_it_reads_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", _compat.InternalMissing)
        assert _compat._run_context_getter() is not _compat._no_run_context
        assert _compat._toolset_list_builder() is not False


def test_an_agent_without_tools_of_its_own_lists_the_runs_toolsets_alone() -> None:
    agent: Agent[None, str] = Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("x")])))
    assert _compat.leaves_out_empty_own_toolset(agent)
    given = FunctionToolset([], id="given")
    with agent.override(toolsets=[given]):
        token = _compat.RUN_ALONE.set(agent)
        try:
            assert agent._build_toolset_list() == [given]
        finally:
            _compat.RUN_ALONE.reset(token)
        assert agent._build_toolset_list()[1:] == [given]  # outside llm-do's runs, as pydantic-ai lists them

    @agent.tool_plain
    def own() -> str:
        return "own"

    token = _compat.RUN_ALONE.set(agent)
    try:
        assert len(agent._build_toolset_list()) == 1  # a tool of its own: its toolset stays
    finally:
        _compat.RUN_ALONE.reset(token)


async def test_a_tool_finds_the_run_context_and_its_cancellation_owner() -> None:
    seen: list[Any] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("look", {})])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(respond), deps_type=str)

    @agent.tool
    def look(ctx: RunContext[str]) -> str:
        current = _compat.current_run_context()
        seen.append(current)
        assert current is not None and current.deps == "deps of this run"
        cancellation = getattr(current, "_cancellation", None)
        assert cancellation is not None and hasattr(cancellation, "_owner"), "RunContext._cancellation._owner moved"
        return "seen"

    assert (await agent.run("go", deps="deps of this run")).output == "done"
    assert len(seen) == 1
    _compat.forget_driving_task(seen[0])
    assert seen[0]._cancellation._owner is None
    assert _compat.current_run_context() is None  # outside any run


def test_a_toolsets_chosen_id_is_read() -> None:
    assert _compat.explicit_toolset_id(FunctionToolset([], id="chosen")) == "chosen"
    assert _compat.explicit_toolset_id(FunctionToolset([])) is None


def test_the_results_pydantic_ai_writes_for_calls_it_did_not_run() -> None:
    from pydantic_ai import _tool_execution

    stand_ins = {
        value
        for name, value in vars(_tool_execution).items()
        if isinstance(value, str) and name.startswith(("_FINAL_RESULT", "_RETRY_WINS", "_OUTPUT_", "_TOOL_SKIPPED"))
    }
    assert stand_ins == _compat.NOT_RUN_RESULTS


def test_dependency_injectors_context_local_resolution_and_configuration_root() -> None:
    provide = _compat.context_local_provide()
    assert callable(provide)
    config = providers.Configuration()
    assert _compat.configuration_root(config.some.option) is config


def test_fastmcps_handshake_timeout_can_be_turned_off() -> None:
    client = Client(SERVER)  # not connected: nothing starts
    assert _compat.handshake_timeout_off(client)
    assert client._init_timeout is None


def test_an_mcp_toolsets_per_run_resolution_and_its_clients_log_callback_are_read() -> None:
    from pydantic_ai.mcp import MCPToolset

    toolset: MCPToolset[Any] = MCPToolset(SERVER)  # not connected: nothing starts
    assert hasattr(toolset, "_resolves_per_run") and not _compat.resolves_per_run(toolset)
    assert hasattr(toolset, "_client_options"), "MCPToolset._client_options moved"

    def callback(message: object) -> None:
        return None

    assert _compat.route_logs(toolset, callback)
    assert toolset.client._session_kwargs["logging_callback"] is callback


def test_a_containers_provider_is_found_from_its_classs_and_its_name() -> None:
    from dependency_injector import containers

    class Inner(containers.DeclarativeContainer):
        db = providers.Object("inner")

    class Outer(containers.DeclarativeContainer):
        db = providers.Object("outer")
        inner = providers.Container(Inner)

    with warnings.catch_warnings():
        warnings.simplefilter("error", _compat.InternalMissing)
        container = Outer()
        find = _compat.provider_map(container)
    assert find(Outer.db) is container.db and find("db") is container.db
    assert find(Outer.inner.db) is container.inner.db and find("inner.db") is container.inner.db
    assert find("nothing") is None


def test_a_reply_cut_off_at_its_token_limit_is_told_by_its_error() -> None:
    """pydantic-ai 2.68 raises `OutputTokenLimitExceeded` for a reply that reached `max_tokens` before it held usable
    output; 2.62 to 2.66 have no such class (`IncompleteToolCall`, or a plain `UnexpectedModelBehavior`)."""
    from pydantic_ai import exceptions

    from llm_do import _compat

    kind = _compat.output_token_limit_exceeded()
    assert kind is getattr(exceptions, "OutputTokenLimitExceeded", exceptions.UnexpectedModelBehavior)

    def cut_off(part: TextPart | ToolCallPart) -> Agent[None, str]:
        return Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[part], finish_reason="length")))

    for part in (TextPart(""), ToolCallPart("add", '{"amount": 4')):
        try:
            cut_off(part).run_sync("go")
        except exceptions.UnexpectedModelBehavior as error:
            assert isinstance(error, kind) and _compat.is_output_token_limit(error), repr(error)
        else:
            raise AssertionError(f"a reply cut off at {part!r} did not fail")
    assert not _compat.is_output_token_limit(exceptions.UnexpectedModelBehavior("Received empty model response"))
