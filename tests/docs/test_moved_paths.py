"""Import paths that moved when the package was arranged in rooms keep working for a while: each name of an old
path imports from it, is the object its new path gives, and warns once (a `DeprecationWarning` at the importing
line, naming the new path); docs/migrating.md lists every old path."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from llm_do._moved import MOVED, MOVED_NAMES

OLD_NAMES = {
    "llm_do.approval": "Approval ApprovalChoice ApprovalDenied ApprovalRequest ApprovalUnavailable Approver CHOICES "
    "NATIVE_TOOL_NOT_GATED",
    "llm_do.attachments": "Attachment AttachmentError AttachmentInfo METADATA_KEY TAKES_ATTACHMENTS check_call",
    "llm_do.call": "CallScope Entry current_scope",
    "llm_do.children": "guard release spawn_failed spawn_options",
    "llm_do.dsn": "scrubbed shown_url with_url_shown",
    "llm_do.entries": "AgentEntry Entry FunctionEntry entry entry_toolset",
    "llm_do.gate": "",
    "llm_do.handles": "Handles live_handle_maps open_handles",
    "llm_do.history": "HistoryConflict HistoryError HistoryStore InMemoryHistoryStore StoredHistory",
    "llm_do.history.postgres": "PostgresHistoryStore",
    "llm_do.history_postgres": "PostgresHistoryStore",
    "llm_do.lending": "",
    "llm_do.lifecycle": "",
    "llm_do.live": "ApprovalNotPending LiveRun",
    "llm_do.loading": "CapturablePerRunWarning",
    "llm_do.mcp_roots": "RootRefused check_root confined_roots",
    "llm_do.owned": "",
    "llm_do.owner": "",
    "llm_do.policy": "Decision PolicySettings Rule ToolPolicy Verdict",
    "llm_do.relay": "CHOICES Decidable DecisionRefused DecisionRelay DecisionUndelivered",
    "llm_do.run": "CallRecord LogEntry RunReport RunResult RunState attach_report finished_report outcome_of "
    "run_report usage_json",
    "llm_do.runlocal": "RunLocalSingleton SessionLocalSingleton",
    "llm_do.runscope": "RunScope",
    "llm_do.runtime": "Runtime",
    "llm_do.scopes": "ToolsetSpec",
    "llm_do.session": "Session SessionBusy SessionError",
    "llm_do.settings": "ApprovalMode ApprovalOnDeny AttachmentSettings FilesystemSettings LlmDoSettings RuntimeConfig "
    "reveal",
    "llm_do.signals": "handling",
    "llm_do.toolset": "Toolset known_tool_names tool",
    "llm_do.toolsets.confine": "ALLOWED_PATHS ConfinedRoot PathRefused",
    "llm_do.traced": "TracingObserver",
    "llm_do.tracking": "Adoption Tracker",
}
"""The public names of each old path (its `__all__` before it moved) that some path of llm_do still gives (none, for
the old paths of the core's own workings); two old paths are rooms today (`llm_do.run`, `llm_do.scopes`): their
names listed here are the ones that live elsewhere."""

IMPORTS = """
import importlib, json, sys, warnings
from llm_do._moved import moved_to

found = []
for old, names in json.loads(sys.argv[1]).items():
    for name in names.split():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            namespace = {}
            exec(f"from {old} import {name}", namespace)
            exec(f"from {old} import {name}", namespace)  # once more: no second warning
        new = moved_to(old, name)
        same = namespace[name] is getattr(importlib.import_module(new), name)
        shown = [(w.category.__name__, str(w.message), w.filename) for w in caught]
        found.append([old, name, new, same, shown])
print(json.dumps(found))
"""


def test_every_old_name_imports_from_its_old_path_and_warns_once_naming_the_new_one() -> None:
    done = subprocess.run(
        [sys.executable, "-c", IMPORTS, json.dumps(OLD_NAMES)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    wrong = []
    for old, name, new, same, shown in json.loads(done.stdout):
        expected = [
            [
                "DeprecationWarning",
                f"{old}.{name} is deprecated: import {name} from {new} ({old} will be removed)",
                "<string>",
            ]
        ]
        if not same or shown != expected:
            wrong.append((old, name, new, same, shown))
    assert wrong == []


def test_every_old_path_is_moved_somewhere_and_a_name_that_did_not_move_is_not_found() -> None:
    import llm_do.attachments
    import llm_do.run

    assert set(OLD_NAMES) == set(MOVED) | {"llm_do.run", "llm_do.scopes"}
    assert {key.rpartition(".")[0] for key in MOVED_NAMES} <= set(OLD_NAMES)
    for module, name, says in (
        (llm_do.attachments, "no_such_name", "llm_do.attachments moved to llm_do.files, which has no 'no_such_name'"),
        (llm_do.run, "Lending", "module 'llm_do.run' has no attribute 'Lending'"),
    ):
        with pytest.raises(AttributeError, match=re.escape(says)):
            getattr(module, name)


def test_migrating_lists_every_old_path_with_its_new_one() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "migrating.md").read_text()
    section = doc.split("## Import paths that moved", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("`")[1]: line.split("`")[3] for line in section.splitlines() if line.startswith("| `llm_do")}
    assert rows == MOVED
