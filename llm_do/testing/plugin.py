"""The pytest plugin (entry point `llm_do`): fixtures over `llm_do.testing`.

Override `llm_do_container` and `llm_do_entries` in your conftest.py (or set the ini option
`llm_do_container = "package.module:Container"`) to get `llm_do_runtime` over your own app.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # imported by the fixtures that use them: pytest loads this plugin in every run
    from llm_do import Entry, Runtime

    from .leaks import LeakCheck
    from .overrides import Overrides
    from .script import ScriptedModel, Step

__all__ = [
    "llm_do_container",
    "llm_do_entries",
    "llm_do_leaks",
    "llm_do_override",
    "llm_do_runtime",
    "llm_do_script",
]

_passed = pytest.StashKey[bool]()

try:  # async fixtures need pytest-asyncio's decorator in its strict mode; anyio takes plain ones
    from pytest_asyncio import fixture as _async_fixture
except ImportError:  # pragma: no cover - depends on the user's plugins
    _async_fixture = pytest.fixture  # type: ignore[assignment]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "llm_do_container",
        "module:attribute of the container class (or factory) that the llm_do_container fixture calls",
        default="",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[_passed] = report.passed
    return report


def _test_passed(request: pytest.FixtureRequest) -> bool:
    passed: bool = request.node.stash.get(_passed, False)
    return passed


@pytest.fixture
def llm_do_container(request: pytest.FixtureRequest) -> Any:
    """A fresh container for each test: the ini option `llm_do_container`, called; None when unset. A container
    class whose `wiring_config` wires the application's modules is made without wiring them (`unwired`): they
    stay wired to the application's own container."""
    target = str(request.config.getini("llm_do_container"))
    if not target:
        return None
    module, _, attribute = target.partition(":")
    try:
        factory = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        raise pytest.UsageError(
            f"llm_do_container = {target!r}: {error}; write it as 'package.module:ContainerClass'"
        ) from None
    from .wiring import unwired

    return unwired(factory)


@pytest.fixture
def llm_do_entries() -> list[Entry]:
    """The entries `llm_do_runtime` loads; override this fixture to return yours."""
    return []


@_async_fixture
async def llm_do_runtime(llm_do_container: Any, llm_do_entries: list[Entry]) -> AsyncIterator[Runtime]:
    """The runtime the test runs entries on, closed after the test: the container's own when it declares one
    (`RuntimeResource`) and `llm_do_entries` names none, opened and closed with the container's resources as the
    application's lifespan does; else a `Runtime` over `llm_do_container` with `llm_do_entries`."""
    from llm_do import Runtime, RuntimeResource

    declared = [
        provider
        for provider in getattr(llm_do_container, "providers", {}).values()
        if isinstance(provider, RuntimeResource)
    ]
    if llm_do_entries or not declared:
        async with Runtime(llm_do_container, entries=llm_do_entries) as runtime:
            yield runtime
        return
    if len(declared) > 1:
        raise pytest.UsageError(
            f"{type(llm_do_container).__name__} declares {len(declared)} RuntimeResource providers: "
            "override the llm_do_runtime fixture to say which one the tests use"
        )
    started = llm_do_container.init_resources()
    if started is not None:
        await started
    try:
        yield await declared[0]()
    finally:
        closed = llm_do_container.shutdown_resources()
        if closed is not None:
            await closed


@pytest.fixture
def llm_do_override() -> Iterator[Overrides]:
    """`llm_do_override(provider, replacement)`: an override undone after the test, even when it fails."""
    from .overrides import Overrides

    with Overrides() as overrides:
        yield overrides


@pytest.fixture
def llm_do_script(request: pytest.FixtureRequest) -> Iterator[Callable[..., ScriptedModel]]:
    """`llm_do_script(*steps, tools=None)` makes a `ScriptedModel`; a passing test must use every step."""
    from .script import ScriptedModel

    made: list[ScriptedModel] = []

    def script(*steps: Step, tools: Any = None, name: str = "scripted") -> ScriptedModel:
        model = ScriptedModel(*steps, tools=tools, name=name)
        made.append(model)
        return model

    yield script
    if _test_passed(request):
        for model in made:
            model.assert_done()


@pytest.fixture
def llm_do_leaks(request: pytest.FixtureRequest) -> Iterator[LeakCheck]:
    """Track what scopes adopt during the test; after a passing test, fail on any leak."""
    from .leaks import track_leaks

    with track_leaks() as check:
        yield check
        if _test_passed(request):
            check.assert_no_leaks()
