"""`llm_do.testing` without pytest fixtures: scripted models, overrides, call trees."""

from __future__ import annotations

import pytest
from dependency_injector import providers
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart

from containers import AgentContainer
from llm_do import AgentEntry, LlmDoError, Runtime, ScopeMismatch, SessionLocalSingleton, Toolset, tool
from llm_do.testing import (
    Overrides,
    ScriptedModel,
    ScriptError,
    Step,
    Turn,
    answering,
    call_tree,
    override,
    returned,
    tool_call,
)

pytestmark = pytest.mark.usefixtures("tools_without_a_policy_run")  # not about approvals: undeclared tools run


class Vault(Toolset):
    def __init__(self, kind: str = "real") -> None:
        self.kind = kind
        self.items: dict[str, str] = {}

    @tool
    def store(self, item: str) -> str:
        """Store an item; returns its key."""
        key = f"key-{len(self.items) + 1}"
        self.items[key] = item
        return key

    @tool
    def fetch(self, key: str) -> str:
        """Fetch a stored item."""
        return f"{self.kind}:{self.items[key]}"


class App(AgentContainer):
    vault = providers.Factory(Vault)


def agent_entry(model: ScriptedModel, name: str = "keeper", toolsets: tuple[str, ...] = ("vault",)) -> AgentEntry:
    return AgentEntry(Agent(model), name=name, toolsets=toolsets)


async def run(model: ScriptedModel, prompt: str = "go", *extra: AgentEntry) -> str:
    async with Runtime(App(), entries=[agent_entry(model), *extra]) as runtime:
        return str((await runtime.run("keeper", prompt)).output)


async def test_a_script_plays_calls_parallel_calls_returned_values_and_functions() -> None:
    model = ScriptedModel(
        tool_call("store", item="pen"),
        [tool_call("store", item="ink"), tool_call("fetch", key=returned("store"))],
        lambda turn: f"{turn.prompt}: {' | '.join(map(str, turn.returns))}",
    )
    assert await run(model, "inventory") == "inventory: key-2 | real:pen"
    assert model.remaining == 0
    model.assert_done()
    assert [turn.index for turn in model.turns] == [0, 1, 2]
    assert model.turns[0].offered == ("store", "fetch")
    assert isinstance(model.turns[2], Turn) and model.turns[2].returned("fetch") == "real:pen"


async def test_a_raw_response_step_is_used_as_is() -> None:
    assert await run(ScriptedModel(ModelResponse(parts=[TextPart("raw")]))) == "raw"


async def test_running_out_says_how_far_it_got_and_what_the_agent_sent() -> None:
    model = ScriptedModel(tool_call("store", item="pen"))
    with pytest.raises(ScriptError) as raised:
        await run(model)
    assert str(raised.value) == (
        "scripted model 'scripted' ran out of steps: the agent asked for response 2 but the script has 1; "
        "the agent's last request had: store returned 'key-1'"
    )


async def test_calling_a_tool_the_agent_does_not_offer_is_refused_readably() -> None:
    with pytest.raises(ScriptError) as raised:
        await run(ScriptedModel(tool_call("delete", key="key-1")))
    assert str(raised.value) == (
        "step 1 calls tool 'delete', which the agent does not offer; it offers: store, fetch "
        "(check the entry's toolsets)"
    )


async def test_an_agent_offering_other_tools_than_expected_is_refused() -> None:
    with pytest.raises(ScriptError) as raised:
        await run(ScriptedModel("done", tools=["store", "shred"]))
    assert str(raised.value) == (
        "scripted model 'scripted', response 1: unexpected tool(s) offered: fetch; expected tool(s) not offered: "
        "shred (the script expects exactly: shred, store)"
    )
    assert await run(ScriptedModel("done", tools=["fetch", "store"])) == "done"


async def test_returned_before_the_tool_returned_is_a_script_error() -> None:
    with pytest.raises(ScriptError, match=r"step 1 uses returned\('store'\), but no 'store' call has returned"):
        await run(ScriptedModel(tool_call("fetch", key=returned("store"))))


async def test_a_text_step_for_structured_output_says_what_to_script() -> None:
    class Answer(BaseModel):
        value: int

    entry = AgentEntry(Agent(ScriptedModel("42"), output_type=Answer), name="keeper")
    async with Runtime(None, entries=[entry]) as runtime:
        with pytest.raises(ScriptError, match=r"wants structured output: script tool_call\('final_result', \.\.\.\)"):
            await runtime.run("keeper", "go")
    structured = AgentEntry(Agent(ScriptedModel(tool_call("final_result", value=42)), output_type=Answer), name="k")
    async with Runtime(None, entries=[structured]) as runtime:
        assert (await runtime.run("k", "go")).output == Answer(value=42)


def test_unused_steps_are_reported() -> None:
    model = ScriptedModel(tool_call("store", item="pen"), "stored", lambda turn: "later")
    with pytest.raises(ScriptError) as raised:
        model.assert_done()
    assert str(raised.value) == (
        "scripted model 'scripted' used 0 of 3 steps; never used: tool_call('store'), 'stored', <lambda>(turn)"
    )


async def test_override_swaps_a_provider_and_undoes_it_on_exit_even_after_an_error() -> None:
    app = App()
    with pytest.raises(RuntimeError, match="boom"), override(app.vault, providers.Factory(Vault, "fake")):
        assert app.vault().kind == "fake"
        raise RuntimeError("boom")
    assert not app.vault.overridden and app.vault().kind == "real"


async def test_overrides_reset_also_what_was_stacked_on_top() -> None:
    app = App()
    overrides = Overrides()
    overrides(app.vault, providers.Factory(Vault, "first"))
    app.vault.override(providers.Factory(Vault, "stacked later, never reset"))
    overrides(app.config.max_depth, 0)
    assert (app.vault().kind, app.config.max_depth(), Runtime(app).config.max_depth) == (
        "stacked later, never reset",
        0,
        0,
    )
    overrides.reset()
    assert not app.vault.overridden and app.vault().kind == "real"
    assert app.config.max_depth() == 5


async def test_overriding_a_class_provider_reaches_new_containers_until_reset() -> None:
    with override(App.vault, providers.Factory(Vault, "class-wide")):
        assert App().vault().kind == "class-wide"
    assert App().vault().kind == "real"


async def test_an_override_keeps_the_scope_check() -> None:
    app = App()
    model = ScriptedModel(tool_call("store", item="pen"), "done")
    with override(app.vault, providers.Singleton(Vault, "global")):
        async with Runtime(app, entries=[agent_entry(model)]) as runtime:
            with pytest.raises(TypeError, match=r"Factory is per_call but is overridden by Singleton \(global\)"):
                await runtime.run("keeper", "go")


class SessionApp(AgentContainer):
    pad = SessionLocalSingleton(Vault)


async def test_an_override_of_another_scope_names_the_toolset_and_the_provider_to_use() -> None:
    app = SessionApp()
    model = ScriptedModel(tool_call("store", item="pen"), "done")
    with override(app.pad, providers.Factory(Vault, "per call")):
        async with Runtime(app, entries=[agent_entry(model, toolsets=("pad",))]) as runtime:
            with pytest.raises(LlmDoError) as raised:
                await runtime.run("keeper", "go", session="ada")
    assert isinstance(raised.value, ScopeMismatch) and isinstance(raised.value, TypeError)
    assert str(raised.value) == (
        "toolset 'pad': SessionLocalSingleton is per_session but is overridden by Factory (per_call); "
        "override it with a provider of the same scope (a SessionLocalSingleton) so instances keep their lifetime"
    )


async def test_call_tree_shows_nesting_and_outcomes() -> None:
    helper = agent_entry(ScriptedModel("helped", "helped again"), name="helper", toolsets=())
    model = ScriptedModel(
        [tool_call("helper", input="a"), tool_call("helper", input="b")],
        "both helped",
    )
    async with Runtime(App(), entries=[agent_entry(model, toolsets=("vault", "helper")), helper]) as runtime:
        result = await runtime.run("keeper", "go")
    assert call_tree(result) == "keeper (ok)\n  helper (ok)\n  helper (ok)"
    assert result.usage.requests == 4


async def test_a_turn_tells_the_latest_prompt_and_the_steps_since_it_in_a_conversation() -> None:
    def storing(turn: Turn) -> Step:
        if turn.steps_since_prompt == 0:
            return tool_call("store", item=turn.latest_prompt)
        return f"{turn.latest_prompt} is {turn.returned('store')} (first asked: {turn.prompt}, step {turn.step})"

    keeper = AgentEntry(Agent(answering(storing)), name="keeper", toolsets=["vault"])
    async with Runtime(App(), entries=[keeper]) as runtime:
        first = await runtime.run("keeper", "tea", session="ada")
        second = await runtime.run("keeper", "milk", session="ada")
    assert first.output == "tea is key-1 (first asked: tea, step 1)"
    assert second.output == "milk is key-1 (first asked: tea, step 3)"  # a fresh vault per call; history counts
