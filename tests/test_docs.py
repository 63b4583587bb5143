"""The worked examples in docs/ run as written and print what the page says they print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def worked_example(page: str) -> tuple[str, str]:
    """The first python block after '## Worked example' and the text block after 'Output:'."""
    section = page.split("## Worked example", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    output = re.search(r"Output:\n\n```text\n(.*?)```", section, re.DOTALL)
    assert code is not None and output is not None
    return code.group(1), output.group(1)


def test_the_approvals_worked_example_prints_what_the_page_shows() -> None:
    code, expected = worked_example((ROOT / "docs" / "approvals.md").read_text())
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True, cwd=ROOT
    )
    assert completed.stdout == expected


def test_the_readme_links_the_approvals_page() -> None:
    assert "[docs/approvals.md](docs/approvals.md)" in (ROOT / "README.md").read_text()
