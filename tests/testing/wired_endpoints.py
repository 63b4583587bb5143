"""An application module that its container wires (for tests/testing/test_unwired.py)."""

from __future__ import annotations

from dependency_injector.wiring import Provide, inject


@inject
def greeting(name: str = Provide["name"]) -> str:
    return f"hello {name}"
