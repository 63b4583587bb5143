"""Import dependency-injector's `wiring` module without importing FastAPI and Starlette.

`dependency_injector.containers` imports `dependency_injector.wiring`, which imports FastAPI's
`Depends` and Starlette's `Request` whenever they are installed (about 0.17 s of CPU), only to
recognise them later when something is wired. The command imports `wiring` with those two packages
kept out, then gives `wiring` the same two checks made lazily: they look at the modules only once
something has imported them, which is exactly when an object can be a FastAPI `Depends` or a
Starlette `Request` subclass. Wiring behaves as before; FastAPI is imported by whoever uses it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from inspect import isclass
from types import ModuleType
from typing import Any

__all__ = ["import_wiring_without_web_frameworks"]

_KEPT_OUT = ("fastapi", "starlette")


class _KeepOut(importlib.abc.MetaPathFinder):
    """Refuses the packages in `_KEPT_OUT`, as if they were not installed."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] in _KEPT_OUT:
            raise ModuleNotFoundError(f"{fullname} is deferred while dependency-injector loads", name=fullname)
        return None


def _fastapi_marker(param: Any) -> Any:
    """`wiring`'s FastAPI check: the dependency of a `fastapi.params.Depends`, else None."""
    params = sys.modules.get("fastapi.params")
    if params is not None and isinstance(param, params.Depends):
        return param.dependency
    return None


def _is_starlette_request_class(obj: Any) -> bool:
    """`wiring`'s Starlette check: is `obj` a subclass of `starlette.requests.Request`?"""
    requests = sys.modules.get("starlette.requests")
    if requests is None or not isclass(obj):
        return False
    try:
        return issubclass(obj, requests.Request)
    except TypeError:  # as wiring's own check: some classes refuse issubclass
        return False


def import_wiring_without_web_frameworks() -> None:
    """Import `dependency_injector.wiring` (and so `containers`) without FastAPI and Starlette.

    Does nothing when `wiring` is already imported, or when either framework already is (then
    wiring imports it for free). A dependency-injector whose `wiring` lacks the lists of checks this
    extends gets its `wiring` imported again, frameworks included, as it would be without this.
    """
    if "dependency_injector.wiring" in sys.modules or any(name in sys.modules for name in _KEPT_OUT):
        return
    import dependency_injector.providers  # noqa: F401  # its own optional imports are left alone

    keep_out = _KeepOut()
    sys.meta_path.insert(0, keep_out)
    try:
        from dependency_injector import wiring
    finally:
        sys.meta_path.remove(keep_out)
    extractors = getattr(wiring, "MARKER_EXTRACTORS", None)
    filters = getattr(wiring, "INSPECT_EXCLUSION_FILTERS", None)
    if not isinstance(extractors, list) or not isinstance(filters, list):  # pragma: no cover - another version
        importlib.reload(wiring)
        return
    extractors.insert(0, _fastapi_marker)
    filters.append(_is_starlette_request_class)
