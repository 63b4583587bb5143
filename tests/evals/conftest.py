"""Evaluations need pydantic-evals, whose releases pin pydantic-ai 2.62: `make test-evals` runs these tests in a
virtualenv of their own (`.venv-evals`), and `make test` runs it."""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("pydantic_evals") is None:
    raise ImportError(
        "tests/evals need pydantic-evals (the evals extra), which pins pydantic-ai 2.62: run `make test-evals`, "
        "or install '.[test,evals]' into this environment"
    )
