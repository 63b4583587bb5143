"""The public facades keep every name they have, each importable; a lazy facade's table and its imports agree.

The facades users import from are `llm_do`, `llm_do.testing`, `llm_do.mcp`, `llm_do.jobs`, `llm_do.web` and
`containers`. Their names are pinned here: a file moving inside llm_do must never take one away.
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

PACKAGE = Path(__file__).parents[2] / "llm_do"

PUBLIC = {
    "llm_do": """AgentEntry AgentStarted Approval ApprovalChoice ApprovalDecided ApprovalDenied ApprovalNotPending
        ApprovalRequest ApprovalRequested ApprovalUnavailable Approver Attachment AttachmentError AttachmentInfo
        AttachmentSettings CallEnded CallEvent CallRecord CallScope CallStarted CallTag CapturablePerRunWarning
        ConfigurationError Decision Entry FunctionEntry HandleClosed HandleOpened HandleRolledBack Handles
        HistoryConflict HistoryError HistoryStore InMemoryHistoryStore InvalidSettings LiveRun LlmDoError
        LlmDoSettings LogEntry MaxDepthExceeded PolicySettings PostgresHistoryStore ResponseCompleted Rule RunFailed
        RunFinished RunLocalSingleton RunReport RunResult RunState Runtime RuntimeClosed RuntimeConfig Scope ScopeError
        ScopeMismatch Session SessionBusy SessionError SessionLocalSingleton StoredHistory StreamEvent ToolPolicy
        Toolset ToolsetError ToolsetSpec UnknownHandle Verdict continue_trace current_traceparent entry
        inject_trace_context open_handles reveal run_report tool""",
    "llm_do.testing": """AnswerPolicy ChatClient ChatReply ChatResponseError LeakCheck LeakError LifespanError
        Overrides Question Returned ScriptError ScriptedModel SeenToolCall Step ToolCall Turn answering asgi_client
        assert_no_leaks call_tree cancelled_run_report override read_vercel_stream response returned serve_lifespan
        settle tool_call track_leaks""",
    "llm_do.mcp": """McpOptions McpServer McpServerError McpServersError OwnedStdioTransport RootRefused
        ServerCommandNotFound confined_roots own_mcp_toolsets""",
    "llm_do.jobs": """DecisionRefused FINAL_STATUSES InvalidJobRequest JobEntry JobInfo JobNotFound JobQueue JobRecord
        JobSettings JobStatus PendingApproval RetryStrategy RunParked RuntimeFactory WorkerOptions WorkerShutdown
        current_job expire_approvals recover_stalled_jobs remove_old_journals run_worker""",
    "llm_do.web": """Access ChatAction ChatLimits ChatRefused RunStopped SSE_HEADERS SdkVersion
        ToolApprovalResponseChunk chat_router decision_of questions_end_on_signal sdk_lines sse_response vercel_chunks
        vercel_sse""",
    "containers": "AgentContainer BuiltinToolsets",
}


@pytest.mark.parametrize("facade", sorted(PUBLIC))
def test_a_facade_keeps_every_public_name_and_each_imports(facade: str) -> None:
    module = importlib.import_module(facade)
    names = set(PUBLIC[facade].split())
    assert names <= set(module.__all__), f"{facade} lost {sorted(names - set(module.__all__))}"
    for name in sorted(module.__all__):
        assert getattr(module, name) is not None, f"{facade}.{name}"
    exec(f"from {facade} import *", {})  # the star import works too


def lazy_facades() -> list[Path]:
    """Every package of llm_do whose names are imported on first use (an `_EXPORTS` table)."""
    return [path for path in sorted(PACKAGE.rglob("__init__.py")) if "_EXPORTS" in path.read_text()]


@pytest.mark.parametrize("init", lazy_facades(), ids=lambda path: str(path.parent.relative_to(PACKAGE.parent)))
def test_a_lazy_facades_table_matches_its_imports_for_type_checkers(init: Path) -> None:
    tree = ast.parse(init.read_text())
    table: dict[str, tuple[str, ...]] = {}
    imported: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "_EXPORTS":
            assert node.value is not None
            table = ast.literal_eval(node.value)
        if isinstance(node, ast.If):  # if TYPE_CHECKING:
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom):
                    for alias in statement.names:
                        assert alias.asname == alias.name, f"{init}: re-export {alias.name} as {alias.name}"
                        imported.setdefault(statement.module or "", set()).add(alias.name)
    assert {module: set(names) for module, names in table.items()} == imported


@pytest.mark.parametrize("name", ["Session", "RunScope", "CallScope"])
def test_what_only_the_runtime_makes_has_no_public_constructor(name: str) -> None:
    import llm_do
    from llm_do.run import RunScope

    cls = RunScope if name == "RunScope" else getattr(llm_do, name)
    with pytest.raises(TypeError, match=f"{name} has no public constructor: the runtime makes it"):
        cls()


LAZY_PACKAGE = """
from __future__ import annotations

from typing import TYPE_CHECKING

from llm_do._lazy import lazy_imports

if TYPE_CHECKING:
    from ._heavy import Heavy as Heavy, made as made

__getattr__, __dir__ = lazy_imports(globals())
"""


def test_a_lazy_package_lists_its_names_once_and_imports_each_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `if TYPE_CHECKING:` block is the package's one list: its `__all__`, and where each name is imported from
    when it is first asked for (not before)."""
    package = tmp_path / "lazy_package"
    package.mkdir()
    (package / "__init__.py").write_text(LAZY_PACKAGE)
    (package / "_heavy.py").write_text("class Heavy:\n    pass\n\n\ndef made() -> Heavy:\n    return Heavy()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lazy_package", raising=False)
    module = importlib.import_module("lazy_package")
    try:
        assert module.__all__ == ["Heavy", "made"]
        assert {"Heavy", "made"} <= set(dir(module))
        assert "lazy_package._heavy" not in sys.modules
        assert isinstance(module.made(), module.Heavy)
        assert module.Heavy.__module__ == "lazy_package._heavy"
        with pytest.raises(AttributeError, match="has no attribute 'Light'"):
            module.Light  # noqa: B018
    finally:
        for name in ("lazy_package", "lazy_package._heavy"):
            sys.modules.pop(name, None)


class _LoaderWithoutSource(importlib.abc.Loader):
    """A loader that runs a module's file but cannot give its source, as pytest's assertion rewriter (which loads a
    pytest plugin's package, such as llm_do's own) cannot."""

    def exec_module(self, module: ModuleType) -> None:
        assert module.__file__ is not None
        exec(compile(Path(module.__file__).read_text(), module.__file__, "exec"), vars(module))


def test_a_lazy_package_loaded_by_a_loader_without_its_source_reads_its_names_from_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "lazy_package_nosource"
    package.mkdir()
    (package / "__init__.py").write_text(LAZY_PACKAGE)
    (package / "_heavy.py").write_text("class Heavy:\n    pass\n\n\ndef made() -> Heavy:\n    return Heavy()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = importlib.util.spec_from_file_location(
        "lazy_package_nosource",
        package / "__init__.py",
        loader=_LoaderWithoutSource(),
        submodule_search_locations=[str(package)],
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "lazy_package_nosource", module)
    spec.loader.exec_module(module)
    try:
        assert module.__all__ == ["Heavy", "made"]
        assert isinstance(module.made(), module.Heavy)
    finally:
        sys.modules.pop("lazy_package_nosource._heavy", None)
