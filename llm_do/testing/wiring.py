"""`unwired`: a fresh container for a test that leaves the application's modules wired to the application's own."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from dependency_injector import containers

__all__ = ["unwired"]

C = TypeVar("C")
_lock = threading.Lock()


def unwired(factory: Callable[[], C]) -> C:
    """`factory()` (a container class, or a function that makes a container), without the wiring of the modules its
    `wiring_config` names.

    A dependency-injector container whose `wiring_config` names modules wires them when it is made, to itself: a
    test that makes a fresh one re-wires the application's endpoints to that one, and the tests after it (which
    expect the application's container) then fail depending on their order. The container made here is not wired;
    call its `wire()` in a test that wants the endpoints on it (and `unwire()` after). A factory that is not a
    declarative container class is called as it is."""
    maker: Any = factory
    if not (isinstance(maker, type) and issubclass(maker, containers.DeclarativeContainer)):
        return factory()
    config: Any = maker.wiring_config
    with _lock:
        auto_wire = config.auto_wire
        config.auto_wire = False
        try:
            made: C = factory()
        finally:
            config.auto_wire = auto_wire
    made_config: Any = getattr(made, "wiring_config")  # noqa: B009  (its own copy: a later wire() reads it)
    made_config.auto_wire = auto_wire
    return made
