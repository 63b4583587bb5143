"""Check the lowest-versions virtualenv (`make test-lowest`): each dependency is at the version
ci/constraints-lowest.txt names, and llm_do and its core import."""

from __future__ import annotations

import importlib
import sys
from importlib.metadata import version
from pathlib import Path

CONSTRAINTS = Path(__file__).with_name("constraints-lowest.txt")
CORE = ("llm_do", "llm_do.run", "llm_do.scopes", "llm_do.di", "llm_do.guards", "llm_do.toolkit", "containers")


def main() -> int:
    pins = [line.split("#")[0].strip() for line in CONSTRAINTS.read_text().splitlines()]
    wrong = []
    for pin in filter(None, pins):
        name, pinned = pin.split("==")
        if version(name) != pinned:
            wrong.append(f"{name} is {version(name)}, not {pinned}")
    if wrong:
        print(f"{sys.prefix} is not at the lowest versions ({CONSTRAINTS.name}): " + "; ".join(wrong), file=sys.stderr)
        return 1
    for module in CORE:
        importlib.import_module(module)
    print("llm_do imports at the lowest versions declared:", ", ".join(filter(None, pins)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
