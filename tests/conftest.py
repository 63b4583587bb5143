from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from pydantic_ai import models

models.ALLOW_MODEL_REQUESTS = False

pytest_plugins = ["pytester"]  # llm_do's own plugin comes from its entry point, like for users


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    yield
    gc.collect()
