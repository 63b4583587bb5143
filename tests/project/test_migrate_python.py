"""`llm-do migrate` rewrites a project module written against the earlier llm-do's Python API (LibCST): what keeps its
meaning is rewritten, comments and formatting stay, and what has no such rewrite is marked `# llm-do migrate:`."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from llm_do.project.migrate import apply_migration, plan_migration

from ..cli_projects import llm_do

TOOLS = '''
    """Report tools."""
    from pydantic_ai.tools import RunContext
    from pydantic_ai.toolsets import FunctionToolset

    from llm_do.runtime import CallContext
    from llm_do.toolsets.approval import set_toolset_approval_config

    LIMIT = 3  # rows shown


    def build_report_tools(_ctx: RunContext[CallContext]) -> FunctionToolset:
        tools = FunctionToolset()

        @tools.tool
        async def analyze(ctx: RunContext[CallContext], path: str) -> str:
            """Analyze a file."""
            rows = path.split(",")[:LIMIT]   # mechanical
            return await ctx.deps.call_agent("narrator", {"input": f"Rows: {rows}"})

        @tools.tool
        def publish(text: str) -> str:
            """Publish a report."""
            return "published"

        set_toolset_approval_config(tools, {"analyze": {"pre_approved": True}})
        return tools


    TOOLSETS = {"report_tools": build_report_tools}
'''


def project(tmp_path: Path, tools: str = TOOLS) -> Path:
    root = tmp_path / "reports"
    root.mkdir()
    (root / "tools.py").write_text(textwrap.dedent(tools).lstrip())
    (root / "main.agent").write_text("---\nname: main\ntoolsets: [report_tools]\n---\nReport.\n")
    (root / "narrator.agent").write_text("---\nname: narrator\n---\nNarrate.\n")
    return root


def test_a_toolset_factory_becomes_a_toolset_class_with_its_comments_and_approvals(tmp_path: Path) -> None:
    root = project(tmp_path)
    migration = plan_migration(root)
    assert migration.untranslated == []
    apply_migration(migration)
    assert (root / "tools.py").read_text() == textwrap.dedent('''
        """Report tools."""
        from pydantic_ai.tools import RunContext

        from llm_do import CallScope, ToolPolicy, Toolset, tool

        LIMIT = 3  # rows shown


        class ReportTools(Toolset):
            default_policy = ToolPolicy(default="ask", tools={"analyze": "allow"})

            @tool
            async def analyze(self, ctx: RunContext[CallScope], path: str) -> str:
                """Analyze a file."""
                rows = path.split(",")[:LIMIT]   # mechanical
                return await ctx.deps.call_agent("narrator", f"Rows: {rows}")

            @tool
            def publish(self, text: str) -> str:
                """Publish a report."""
                return "published"
    ''').lstrip()
    done = llm_do("check", root, "--json")
    assert done.returncode == 0, done.stdout
    # what was pre-approved runs without asking; publish, which was not, asks as it did
    ungated = json.loads(done.stdout)["ungated"]
    assert [item["tool"] for item in ungated if item["toolset"] == "report_tools"] == ["analyze"]


def test_what_no_rewrite_keeps_is_marked_and_listed_and_dry_run_writes_nothing(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        TOOLS.replace("tools = FunctionToolset()\n", "tools = FunctionToolset()\n        tools.max_retries = 2\n"),
    )
    before = (root / "tools.py").read_text()
    done = llm_do("migrate", root)
    assert done.returncode == 1
    assert (root / "tools.py").read_text() == before  # a dry run: the diff only
    assert "+# llm-do migrate: build_report_tools is not rewritten (it does more than make a FunctionToolset" in (
        done.stdout
    )
    assert f"{root / 'tools.py'}:11: build_report_tools is not rewritten" in done.stderr
    assert "+# llm-do migrate: TOOLSETS is not read today; report_tools left to rewrite by hand" in done.stdout


def test_import_llm_do_does_not_import_libcst() -> None:
    code = "import sys, llm_do, llm_do.project, llm_do.cli.main; print('libcst' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
