"""The examples run offline, as users run them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_ledger_demo_moves_money_in_a_real_sqlite_file() -> None:
    completed = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "ledger" / "main.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
    )
    lines = completed.stdout.splitlines()
    assert lines[0] == "balances before: {'A': 100, 'B': 50}"
    txn = lines[2].removeprefix("clerk says:      Done: ").removesuffix(" committed.")
    assert txn.startswith("txn_") and len(txn) == len("txn_") + 8
    assert (
        lines[1]
        == f"approval asked:  clerk wants to run db.commit(txn={txn!r}): toolset 'db' policy: tool 'commit' is 'ask'"
    )
    assert lines[3] == "balances after:  {'A': 90, 'B': 60}"
    assert lines[4] == "call call_1 entry=clerk depth=0 outcome=ok"
    assert lines[5].startswith("usage: 4 requests, ")
