"""The pytest plugin, loaded from its entry point in a separate pytest process, as users get it."""

from __future__ import annotations

import subprocess
import sys

import pytest

import llm_do.testing

APP = '''
from dependency_injector import providers
from pydantic_ai import Agent

from containers import AgentContainer
from llm_do import AgentEntry, Toolset, ToolPolicy, tool

kept = []


class Vault(Toolset):
    default_policy = ToolPolicy()  # these tests are about the testing kit, not approvals

    def __init__(self, kind="real"):
        self.kind = kind

    @tool
    def peek(self) -> str:
        """Say which vault this is."""
        return self.kind

    @tool
    def keep(self) -> str:
        """Keep this toolset forever (a leak)."""
        kept.append(self)
        return "kept"


class App(AgentContainer):
    vault = providers.Factory(Vault)


keeper = AgentEntry(Agent(), name="keeper", toolsets=["vault"])
'''

CONFTEST = """
import pytest

from app import keeper


@pytest.fixture
def llm_do_entries():
    return [keeper]
"""

TESTS = """
from dependency_injector import providers

from app import App, Vault, keeper
from llm_do.testing import tool_call

seen = []


def test_1_overrides_then_fails(llm_do_override):
    llm_do_override(App.vault, providers.Factory(Vault, "fake"))
    llm_do_override(App.config.max_depth, 0)
    assert App().vault().kind == "fake"
    assert False, "deliberate failure after overriding"


def test_2_nothing_leaked_from_the_failed_test():
    assert not App.vault.overridden and not App.config.overridden
    assert App().vault().kind == "real"


async def test_3_runtime_over_a_fresh_container(llm_do_runtime, llm_do_container, llm_do_script):
    assert llm_do_runtime.container is llm_do_container
    seen.append(llm_do_container)
    model = llm_do_script(tool_call("peek"), lambda turn: f"vault says {turn.returned('peek')}")
    with keeper.agent.override(model=model):
        assert (await llm_do_runtime.run("keeper", "go")).output == "vault says real"


async def test_4_the_next_runtime_gets_another_container(llm_do_runtime):
    assert llm_do_runtime.container is not seen[0]


def test_5_unused_steps_fail_a_passing_test(llm_do_script):
    llm_do_script("a", "b")


def test_6_unused_steps_do_not_pile_onto_a_failure(llm_do_script):
    llm_do_script("a")
    assert False, "deliberate failure with an unused script"


async def test_7_a_leak_fails_a_passing_test(llm_do_leaks, llm_do_runtime, llm_do_script):
    with keeper.agent.override(model=llm_do_script(tool_call("keep"), "kept")):
        await llm_do_runtime.run("keeper", "go")
"""

NO_HYPOTHESIS = ("-p", "no:hypothesispytest")
"""Hypothesis's pytest plugin imports all of Hypothesis (about 2 s) when the run ends, used or not; these runs
never use it."""

INI = """
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
llm_do_container = app:App
"""


@pytest.mark.long
def test_fixtures_work_from_the_entry_point_and_overrides_never_leak(pytester: pytest.Pytester) -> None:
    pytester.makefile(".ini", pytest=INI)
    pytester.makepyfile(app=APP, conftest=CONFTEST, test_kit=TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *NO_HYPOTHESIS, "-v")
    result.assert_outcomes(passed=5, failed=2, errors=2)
    result.stdout.fnmatch_lines_random(
        [
            "*test_1_overrides_then_fails FAILED*",
            "*test_2_nothing_leaked_from_the_failed_test PASSED*",
            "*test_3_runtime_over_a_fresh_container PASSED*",
            "*test_4_the_next_runtime_gets_another_container PASSED*",
            "*test_5_unused_steps_fail_a_passing_test ERROR*",
            "*test_6_unused_steps_do_not_pile_onto_a_failure FAILED*",
            "*test_7_a_leak_fails_a_passing_test ERROR*",
            "E *ScriptError: scripted model 'scripted' used 0 of 2 steps; never used: 'a', 'b'",
            "E *LeakError: 1 leak(s) after their scope ended:",
            "E * - Vault of toolset 'vault' (per_call) of entry 'keeper' outlived its scope; made by Vault (app.py:*); "
            "held by a list in global 'kept' of module app",
        ]
    )
    assert "used 0 of 1 steps" not in result.stdout.str()


def test_a_bad_container_option_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".ini", pytest="[pytest]\nllm_do_container = nowhere\n")
    pytester.makepyfile(test_it="def test_it(llm_do_container):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *NO_HYPOTHESIS)
    result.stdout.fnmatch_lines(["*llm_do_container = 'nowhere': *write it as 'package.module:ContainerClass'*"])


def test_loading_the_plugin_imports_neither_pydantic_ai_nor_dependency_injector() -> None:
    code = (
        "import sys, llm_do.testing.plugin\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pydantic_ai', 'dependency_injector'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n", done.stderr


@pytest.mark.parametrize("name", llm_do.testing.__all__)
def test_every_name_of_the_testing_kit_imports_from_it(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from llm_do.testing import {name}", namespace)
    assert namespace[name] is getattr(llm_do.testing, name)
    assert name in dir(llm_do.testing)


DECLARED_APP = '''
from dependency_injector import containers, providers
from pydantic_ai import Agent

from llm_do import AgentEntry, RuntimeResource, ToolPolicy, Toolset, tool

closed = []


class Clock(Toolset):
    @tool
    def now(self) -> str:
        """The time."""
        return "noon"


class Resources:
    def close(self):
        closed.append(True)


def opened():
    yield Resources()
    closed.append("pool")


assistant = AgentEntry(Agent(), name="assistant", toolsets=["clock"])


class Container(containers.DeclarativeContainer):
    __self__ = providers.Self()
    pool = providers.Resource(opened)
    clock = providers.Factory(Clock)
    runtime = RuntimeResource(__self__, entries=[assistant], policies={"clock": ToolPolicy(tools={"now": "ask"})})
'''

DECLARED_TESTS = """
from app import Container, assistant, closed
from llm_do.testing import tool_call


async def test_1_the_runtime_is_the_one_the_container_declares(llm_do_container, llm_do_runtime, llm_do_script):
    assert llm_do_runtime is await llm_do_container.runtime()
    model = llm_do_script(tool_call("now"), lambda turn: turn.returned("now"))
    with assistant.agent.override(model=model):
        result = await llm_do_runtime.run("assistant", "time?", approver=lambda ask: asked.append(ask) or "approve")
    assert result.output == "noon"
    assert [request.tool for request in asked] == ["now"]  # the declared policy holds


asked = []


def test_2_the_containers_resources_were_closed_after_the_test():
    assert closed == ["pool"]
"""


def test_the_runtime_fixture_is_the_runtime_the_container_declares(pytester: pytest.Pytester) -> None:
    pytester.makefile(".ini", pytest=INI.replace("app:App", "app:Container"))
    pytester.makepyfile(app=DECLARED_APP, test_declared=DECLARED_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *NO_HYPOTHESIS, "-v")
    result.assert_outcomes(passed=2)
