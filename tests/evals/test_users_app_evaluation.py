"""The users app's evaluation: five cases, each with its own database, at once, right in every run."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

EXAMPLE = Path(__file__).parents[2] / "examples" / "users_app"
sys.path.insert(0, str(EXAMPLE))

from webapp.evaluation import DATASET, evaluate  # noqa: E402


async def test_every_case_is_right_in_every_run(tmp_path: Path) -> None:
    for attempt in range(3):
        directory = tmp_path / str(attempt)
        directory.mkdir()
        report = await evaluate(directory)
        outputs = {case.name: case.output for case in report.cases}
        assert not report.failures, report.failures
        assert outputs == {case.name: case.expected_output for case in DATASET.cases}
        for case in DATASET.cases:  # each case wrote its own database, and only the approved ones wrote
            with sqlite3.connect(directory / f"{case.name}.sqlite3") as conn:
                inactive = [row[0] for row in conn.execute("SELECT email FROM users WHERE is_active = 0")]
            approved_and_found = (case.metadata["approve"] and "ada@example.com" in case.metadata["users"]) or (
                case.name == "second"
            )
            assert len(inactive) == (1 if approved_and_found else 0), (case.name, inactive)
