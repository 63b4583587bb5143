"""The suite's two tiers, chosen by `LLM_DO_TEST_TIER`.

- `dev` (the default, `make test`): every test, each at a size that runs before every commit. The
  fuzz tests run 500 examples per built-in toolset, enough to find every class of bug the fuzz has
  found so far (tests/toolsets/test_fuzz_toolsets.py says which); soaks run fewer rounds.
- `deep` (`make test-deep`, which CI runs after `make test`): only the tests marked `deep`, at their
  full size: 2,000 fuzz examples per toolset and the long soaks.
"""

from __future__ import annotations

import os

__all__ = ["DEEP", "TIER", "sized"]

TIER = os.environ.get("LLM_DO_TEST_TIER", "dev").strip() or "dev"
if TIER not in ("dev", "deep"):
    raise RuntimeError(f"LLM_DO_TEST_TIER={TIER!r} is not a tier: use 'dev' (make test) or 'deep' (make test-deep)")
DEEP = TIER == "deep"


def sized(dev: int, deep: int) -> int:
    """A test's size in this tier: `dev` in `make test`, `deep` in `make test-deep`."""
    return deep if DEEP else dev
