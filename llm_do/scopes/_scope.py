"""`Scope`: the four lifetimes a resource can have; `NoPublicConstructor` for what only the runtime makes."""

from __future__ import annotations

import enum
from typing import Any, TypeVar

_T = TypeVar("_T")


class Scope(enum.Enum):
    """The lifetime of a resource."""

    GLOBAL = "global"
    """Shared by every run; torn down when the runtime closes."""
    PER_SESSION = "per_session"
    """One per session (a conversation, across its runs); a run given no session is a session of its own."""
    PER_RUN = "per_run"
    """One per top-level run, shared by all of its nested calls."""
    PER_CALL = "per_call"
    """One per entry invocation; a nested call gets a fresh one."""

    def __str__(self) -> str:
        return self.value


class NoPublicConstructor(type):
    """A class only llm-do makes (a `Session`, `RunScope`, `CallScope`): calling it raises `TypeError`, and the
    runtime makes one with `cls._create(...)` (trio's pattern)."""

    def __call__(cls, *args: object, **kwargs: object) -> Any:
        raise TypeError(
            f"{cls.__module__}.{cls.__qualname__} has no public constructor: the runtime makes it "
            "(`await runtime.session(...)`, `runtime.run(...)`)"
        )

    def _create(cls: type[_T], *args: Any, **kwargs: Any) -> _T:
        return super().__call__(*args, **kwargs)  # type: ignore[misc,no-any-return]
