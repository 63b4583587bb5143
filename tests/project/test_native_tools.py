"""Native tools in worker files: parsed with their lines, mapped to pydantic-ai's capabilities, checked against
the model at load (not at the first request), never gated by a policy, listed as such, recorded and replayed."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelResponse, NativeToolCallPart, NativeToolReturnPart, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.native_tools import CodeExecutionTool, ImageGenerationTool, WebFetchTool, WebSearchTool
from pydantic_ai.profiles import ModelProfile

from llm_do import AgentEntry, ConfigurationError, Runtime, RuntimeConfig, ToolPolicy
from llm_do.models import MissingResponse, Recording, RecordingModel
from llm_do.project import ProjectError, WorkerSpec, load_project, parse_worker
from llm_do.testing import ScriptedModel, tool_call

from ..cli_projects import llm_do
from ..models.test_replay import JsonServer, chat_server

FILE = Path("scout.worker")


def parse(frontmatter: str) -> WorkerSpec:
    return parse_worker(f"---\n{textwrap.dedent(frontmatter).strip()}\n---\nSearch.\n", file=FILE)


def worker_problems(frontmatter: str) -> list[tuple[int | None, str]]:
    with pytest.raises(ProjectError) as caught:
        parse(frontmatter)
    return [(problem.line, problem.message) for problem in caught.value.problems]


def project(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (root / name).write_text(textwrap.dedent(content).lstrip())
    return root


def load_problems(root: Path, **kwargs: Any) -> list[tuple[str, int | None, str]]:
    with pytest.raises(ProjectError) as caught:
        load_project(root, **kwargs)
    return [(p.file.name if p.file else "", p.line, p.message) for p in caught.value.problems]


def running(*kinds: type[Any]) -> FunctionModel:
    """A model that runs only these native tool types (and answers 'done')."""
    return FunctionModel(
        lambda messages, info: ModelResponse(parts=[TextPart("done")]),
        profile=ModelProfile(supported_native_tools=frozenset(kinds)),
        model_name="narrow",
    )


# the worker file


def test_native_tools_are_named_in_a_list_or_mapped_to_their_options() -> None:
    listed = parse("native_tools: [web_search, code_execution]")
    assert list(listed.native_tools) == ["web_search", "code_execution"]
    assert listed.native_tools["web_search"].options() == {}
    mapped = parse(
        """
        native_tools:
          web_search: {max_uses: 3, allowed_domains: [docs.python.org]}
          web_fetch: {blocked_domains: [example.com], local: true}
          image_generation: {size: 1K, fallback_image_model: 'openai:gpt-image-2'}
          code_execution:
        """
    )
    assert {name: tool.options() for name, tool in mapped.native_tools.items()} == {
        "web_search": {"max_uses": 3, "allowed_domains": ["docs.python.org"]},
        "web_fetch": {"blocked_domains": ["example.com"], "local": True},
        "image_generation": {"size": "1K", "fallback_image_model": "openai:gpt-image-2"},
        "code_execution": {},
    }
    assert parse("model: test").native_tools == {}


@pytest.mark.parametrize(
    ("frontmatter", "line", "expected"),
    [
        (
            "native_tools: [web_serch]",
            2,
            "native_tools: unknown native tool 'web_serch' (did you mean 'web_search'?); "
            "known: code_execution, image_generation, web_fetch, web_search",
        ),
        ("native_tools:\n  - code_execution\n  - code_execution", 4, "'code_execution' is listed twice"),
        (
            "native_tools:\n  web_search:\n    max_use: 3",
            4,
            "native_tools.web_search: unknown option 'max_use' (did you mean 'max_uses'?); web_search takes: "
            "max_uses, allowed_domains, blocked_domains, search_context_size, user_location, local",
        ),
        ("native_tools:\n  code_execution: {timeout: 3}", 3, "code_execution takes: no options"),
        ("native_tools:\n  web_fetch:\n    max_uses: 0", 4, "native_tools.web_fetch.max_uses: Input should be greater"),
        ("native_tools:\n  web_search: {local: bing}", 3, "native_tools.web_search.local: Input should be"),
        ("native_tools:\n  image_generation: 1K", 3, "native_tools.image_generation: write its options as a mapping"),
        ("native_tools: web_search", 2, "native_tools: write a list of names or a mapping of names to options"),
    ],
)
def test_unknown_tools_options_and_bad_values_are_problems_at_their_lines(
    frontmatter: str, line: int, expected: str
) -> None:
    [(found_line, message)] = worker_problems(frontmatter)
    assert found_line == line
    assert expected in message


def test_a_local_fallback_cannot_carry_a_restriction_it_would_drop() -> None:
    found = worker_problems(
        """
        native_tools:
          web_search: {allowed_domains: [docs.python.org], local: duckduckgo}
          web_fetch: {max_uses: 2, local: true}
        """
    )
    assert found == [
        (
            3,
            "native_tools.web_search: local: a local search cannot apply allowed_domains (pydantic-ai would drop "
            "the fallback); remove local, or remove those options",
        ),
        (
            4,
            "native_tools.web_fetch: local: a local fetch cannot apply max_uses (pydantic-ai would drop the "
            "fallback); remove local, or remove max_uses",
        ),
    ]


# mapped to pydantic-ai's native tools


async def test_each_declared_tool_reaches_the_model_as_pydantic_ais_native_tool(tmp_path: Path) -> None:
    root = project(
        tmp_path / "scouts",
        {
            "scout.worker": """
                ---
                native_tools:
                  web_search: {max_uses: 3, allowed_domains: [docs.python.org], search_context_size: high}
                  web_fetch: {blocked_domains: [example.com]}
                  code_execution:
                  image_generation: {size: 1K, aspect_ratio: "16:9"}
                ---
                Search.
            """,
        },
    )
    script = ScriptedModel("Found it.")
    async with load_project(root, model=script) as loaded:
        assert (await loaded.run("scout", "asyncio timeouts?")).output == "Found it."
    [turn] = script.turns
    assert turn.info.model_request_parameters.native_tools == [
        WebSearchTool(max_uses=3, allowed_domains=["docs.python.org"], search_context_size="high"),
        WebFetchTool(blocked_domains=["example.com"]),
        CodeExecutionTool(),
        ImageGenerationTool(size="1K", aspect_ratio="16:9"),
    ]
    assert turn.offered == ()  # no local fallback was declared, so no function tool stands in


async def test_a_python_entry_gives_its_agent_native_tools_as_usual_beside_gated_toolsets() -> None:
    from pydantic_ai.capabilities import WebSearch

    from llm_do import ApprovalChoice, ApprovalRequest, Toolset, tool

    class Notes(Toolset):
        @tool
        def note(self, text: str) -> str:
            """Keep a note."""
            return "noted"

    asked: list[str] = []

    def approver(request: ApprovalRequest) -> ApprovalChoice:
        asked.append(request.tool)
        return "approve"

    script = ScriptedModel(tool_call("note", text="asyncio.timeout"), "Noted.")
    scout = AgentEntry(Agent(capabilities=[WebSearch(max_uses=1)]), name="scout", toolsets=["notes"])
    runtime = Runtime(
        None,
        entries=[scout],
        toolsets={"notes": Notes},
        policies={"notes": ToolPolicy(default="ask")},
        approver=approver,
        config=RuntimeConfig(model=script, approval_mode="prompt"),
    )
    async with runtime:
        result = await runtime.run("scout", "Search and note.")
    assert result.output == "Noted." and asked == ["note"]
    assert [turn.info.model_request_parameters.native_tools for turn in script.turns] == [
        [WebSearchTool(max_uses=1)]
    ] * 2


# checked before any request


def test_a_model_that_cannot_run_a_declared_tool_is_a_problem_at_load(tmp_path: Path) -> None:
    root = project(
        tmp_path / "scouts",
        {"scout.worker": "---\nnative_tools:\n  web_search:\n  code_execution:\n---\nSearch.\n"},
    )
    [(file, line, message)] = load_problems(root, model=running(WebSearchTool))
    assert (file, line) == ("scout.worker", 4)
    assert message == (
        "worker 'scout': model 'function:narrow' cannot run the native tool 'code_execution' (it runs: web_search); "
        "choose a model that runs it (model: in the worker file, or --model)"
    )
    nothing = load_problems(root, model=running())
    assert [(line, message.split(";")[1].strip()) for _, line, message in nothing] == [
        (
            3,
            "choose a model that runs it (model: in the worker file, or --model), or declare a local fallback "
            "(local: duckduckgo)",
        ),
        (4, "choose a model that runs it (model: in the worker file, or --model)"),
    ]
    # no model yet (llm-do check and list): nothing to check until one is given
    assert list(load_project(root, models_required=False).entries) == ["scout"]
    assert list(load_project(root, model=running(WebSearchTool, CodeExecutionTool)).entries) == ["scout"]


def test_the_model_class_answers_when_the_model_can_be_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = project(tmp_path / "scouts", {"scout.worker": "---\nnative_tools: {web_search: {max_uses: 2}}\n---\nGo.\n"})
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # without its key the model class still answers (built with a stand-in key that is never sent): whether a key
    # is set does not change the verdict
    without_key = load_problems(root, model="openai:gpt-5.2")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-sent")
    [(_, line, message)] = load_problems(root, model="openai:gpt-5.2")
    assert without_key == [(_, line, message)]
    assert line == 2
    assert message == (
        "worker 'scout': model 'openai:gpt-5.2' runs the native tool 'web_search' but cannot apply its max_uses: "
        "remove it, or choose another model"
    )
    [(_, _, message)] = load_problems(root, model="openai-chat:gpt-4o")
    assert "model 'openai-chat:gpt-4o' cannot run the native tool 'web_search' (it runs: none)" in message


def test_without_an_api_key_the_providers_profile_still_tells_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path / "readers", {"reader.worker": "---\nnative_tools: [web_fetch]\n---\nRead.\n"})
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    [(_, line, message)] = load_problems(root, model="openai:gpt-5.2")
    assert line == 2
    assert message.startswith(
        "worker 'reader': model 'openai:gpt-5.2' cannot run the native tool 'web_fetch' "
        "(it runs: code_execution, image_generation, web_search)"
    )


def test_test_and_replay_models_run_every_native_tool(tmp_path: Path) -> None:
    tools = "native_tools: [web_search, web_fetch, code_execution, image_generation]"
    root = project(tmp_path / "scouts", {"scout.worker": f"---\n{tools}\n---\nGo.\n"})
    Recording.from_script(["Replayed."]).save(root / "session.json")
    assert list(load_project(root, model="test").entries) == ["scout"]
    assert list(load_project(root, model="replay:session.json").entries) == ["scout"]


async def test_a_local_fallback_makes_a_tool_fine_on_any_model(tmp_path: Path) -> None:
    fallback = "image_generation: {fallback_image_model: 'openai:gpt-image-2'}"
    root = project(tmp_path / "artists", {"artist.worker": f"---\nnative_tools:\n  {fallback}\n---\nDraw.\n"})
    seen: list[AgentInfo] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info)
        return ModelResponse(parts=[TextPart("no picture today")])

    model = FunctionModel(answer, profile=ModelProfile(supported_native_tools=frozenset()))

    async with load_project(root, model=model) as loaded:
        assert (await loaded.run("artist", "a cat")).output == "no picture today"
    [info] = seen
    assert [tool.name for tool in info.function_tools] == ["generate_image"]  # the fallback stands in
    assert info.model_request_parameters.native_tools == []  # pydantic-ai dropped it for this model


def test_a_fallback_whose_package_is_not_installed_is_a_problem(tmp_path: Path) -> None:
    # The development environment does not install pydantic-ai's duckduckgo extra.
    root = project(
        tmp_path / "scouts", {"scout.worker": "---\nnative_tools:\n  web_search: {local: duckduckgo}\n---\n"}
    )
    [(_, line, message)] = load_problems(root, model="test")
    assert line == 3
    assert message.startswith("native_tools.web_search: WebSearch(local='duckduckgo') requires the `duckduckgo`")
    assert 'pip install "pydantic-ai-slim[duckduckgo]"' in message


# approvals


def test_no_approval_policy_may_name_a_native_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = project(
        tmp_path / "scouts",
        {"scout.worker": "---\nnative_tools: [web_search]\napprovals:\n  web_search: {default: ask}\n---\nGo.\n"},
    )
    [(_, line, message)] = load_problems(root, model="test")
    assert line == 4
    assert message.startswith(
        "approvals: 'web_search' is a native tool: it runs at the model's provider, inside the model's request, so "
        "no approval policy can gate it; remove approvals.web_search"
    )
    # the worker does not have to declare it: the name is a native tool's
    (root / "scout.worker").write_text("---\napprovals: {code_execution: {default: deny}}\n---\nGo.\n")
    [(_, _, message)] = load_problems(root, model="test")
    assert message.startswith("approvals: 'code_execution' is a native tool")

    (root / "scout.worker").write_text("---\nnative_tools: [web_search]\n---\nGo.\n")
    monkeypatch.setenv("LLM_DO_APPROVAL_POLICIES__WEB_SEARCH__DEFAULT", "ask")
    [(_, _, message)] = load_problems(root, model="test")
    assert "an approval policy names 'web_search', a native tool: it runs at the model's provider" in message
    monkeypatch.delenv("LLM_DO_APPROVAL_POLICIES__WEB_SEARCH__DEFAULT")

    searcher = AgentEntry(Agent(), name="searcher")
    with pytest.raises(ConfigurationError, match=r"names 'web_fetch', a native tool: .* remove the policy"):
        Runtime(None, entries=[searcher], policies={"web_fetch": ToolPolicy(default="ask")}, config=RuntimeConfig())


# the command


@pytest.mark.long
def test_list_shows_native_tools_as_not_gated_and_check_reports_a_model_without_them(tmp_path: Path) -> None:
    root = project(
        tmp_path / "scouts",
        {
            "scout.worker": """
                ---
                native_tools:
                  web_search: {max_uses: 3}
                  image_generation: {fallback_image_model: 'openai:gpt-image-2'}
                ---
                Search.
            """,
            "plain.worker": "---\nmodel: test\n---\nHi.\n",
        },
    )
    listed = llm_do("list", root, "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["entry"]: row for row in json.loads(listed.stdout)["entries"]}
    assert "native_tools" not in rows["plain"]
    assert rows["scout"]["approvals"] == {}
    assert rows["scout"]["native_tools"] == [
        {
            "name": "web_search",
            "options": {"max_uses": 3},
            "fallback": None,
            "approval": "not gated: runs at the model's provider",
        },
        {
            "name": "image_generation",
            "options": {"fallback_image_model": "openai:gpt-image-2"},
            "fallback": "openai:gpt-image-2",
            "approval": "not gated: runs at the model's provider; its local fallback is not gated either",
        },
    ]
    table = llm_do("list", root, "--model", "test")
    assert table.returncode == 0, table.stderr
    assert "native tools" in table.stdout and "web_search (max_uses 3)" in table.stdout
    assert "web_search: not gated: runs at the model's provider" in table.stdout

    assert llm_do("check", root, "--model", "test").returncode == 0
    narrow = llm_do("check", root, "--model", "openai:gpt-5.2", "--json", env={"OPENAI_API_KEY": "sk-never-sent"})
    assert narrow.returncode == 1
    [problem] = json.loads(narrow.stdout)["problems"]
    assert (Path(problem["file"]).name, problem["line"]) == ("scout.worker", 3)
    assert (
        "model 'openai:gpt-5.2' runs the native tool 'web_search' but cannot apply its max_uses" in problem["message"]
    )


# recorded and replayed


API_KEY = "sk-test-never-recorded-2424"


class ResponsesServer(JsonServer):
    """OpenAI's Responses API: first a web search (the provider's) and a call to the `note` tool, then text."""

    endpoint = "/v1/responses"

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        if not any(item.get("type") == "function_call_output" for item in body["input"]):
            search = {"type": "search", "query": "asyncio timeout", "sources": [{"type": "url", "url": "https://x.y"}]}
            note = {"name": "note", "arguments": '{"text": "use asyncio.timeout"}'}
            output: list[dict[str, Any]] = [
                {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": search},
                {"type": "function_call", "id": "fc_1", "call_id": "call_1", **note},
            ]
        else:
            text = {"type": "output_text", "text": "Use asyncio.timeout.", "annotations": []}
            output = [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [text]}]
        tokens = {"input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}
        return {
            "id": f"resp_{len(self.seen)}",
            "object": "response",
            "created_at": 1_700_000_000,
            "model": "gpt-5.2",
            "status": "completed",
            "output": output,
            "usage": {"input_tokens": 20, "output_tokens": 5, "total_tokens": 25, **tokens},
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }


NOTES = """
from llm_do import ToolPolicy, Toolset, tool

class Notes(Toolset):
    default_policy = ToolPolicy()  # declared: its calls need no approval

    @tool
    def note(self, text: str) -> str:
        \"\"\"Keep a note.\"\"\"
        return "noted"
"""


def native_parts(messages: list[ModelMessage]) -> list[tuple[str, str, Any]]:
    return [
        (part.part_kind, part.tool_name, part.args if isinstance(part, NativeToolCallPart) else part.content)
        for message in messages
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, NativeToolCallPart | NativeToolReturnPart)
    ]


async def test_native_tool_parts_of_a_real_client_are_recorded_and_replayed_offline(tmp_path: Path) -> None:
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    root = project(
        tmp_path / "scouts",
        {
            "tools.py": NOTES,
            "scout.worker": """
                ---
                toolsets: [notes]
                native_tools:
                  web_search: {allowed_domains: [docs.python.org]}
                  code_execution:
                ---
                Search, then note what you found.
            """,
        },
    )
    path = tmp_path / "session.json"
    allowed = models.ALLOW_MODEL_REQUESTS
    models.ALLOW_MODEL_REQUESTS = True
    try:
        with chat_server(ResponsesServer) as (base_url, seen):
            real = OpenAIResponsesModel("gpt-5.2", provider=OpenAIProvider(base_url=base_url, api_key=API_KEY))
            async with RecordingModel(real, path) as recorder, load_project(root, model=recorder) as loaded:
                live = await loaded.run("scout", "How do I time out a coroutine?")
    finally:
        models.ALLOW_MODEL_REQUESTS = allowed
    assert live.output == "Use asyncio.timeout."
    assert len(seen) == 2
    assert [auth for auth, _ in seen] == [f"Bearer {API_KEY}"] * 2, "the real client went over HTTP"
    sent = {tool["type"]: tool for tool in seen[0][1]["tools"]}
    assert sent["web_search"]["filters"] == {"allowed_domains": ["docs.python.org"]}
    assert sent["code_interpreter"]["container"] == {"type": "auto"}
    assert sent["function"]["name"] == "note"
    expected = [
        ("builtin-tool-call", "web_search", {"query": "asyncio timeout", "type": "search"}),
        (
            "builtin-tool-return",
            "web_search",
            {"status": "completed", "sources": [{"type": "url", "url": "https://x.y"}]},
        ),
    ]
    assert native_parts(live.messages) == expected
    assert API_KEY not in path.read_text()

    assert models.ALLOW_MODEL_REQUESTS is False  # replay is offline
    async with load_project(root, model=f"replay:{path}") as loaded:
        replayed = await loaded.run("scout", "How do I time out a coroutine?")
    assert replayed.output == live.output
    assert native_parts(replayed.messages) == expected
    assert len(seen) == 2

    # a request is keyed by the native tools it sends too: without them, this is another conversation
    (root / "scout.worker").write_text("---\ntoolsets: [notes]\n---\nSearch, then note what you found.\n")
    async with load_project(root, model=f"replay:{path}") as loaded:
        with pytest.raises(MissingResponse):
            await loaded.run("scout", "How do I time out a coroutine?")
