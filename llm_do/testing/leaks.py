"""Leak checks: per-call and per-run objects that outlived their scope, and handles left open."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import inspect
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import CellType, FrameType, FunctionType, ModuleType
from typing import Any

from llm_do import Handles, Scope
from llm_do.scopes import Adoption, Tracker, trackers
from llm_do.toolkit import live_handle_maps

__all__ = ["LeakCheck", "LeakError", "assert_no_leaks", "settle", "track_leaks"]

_HERE = str(Path(__file__).parent)


class LeakError(AssertionError):
    """Objects outlived the scope that owned them, or handles are still open."""


class LeakCheck:
    """What `track_leaks()` recorded; ask it for `leaks()` or `assert_no_leaks()`, during or after tracking."""

    def __init__(self, tracker: Tracker) -> None:
        self._tracker = tracker

    def leaks(self) -> list[str]:
        """One line per leak: a per-call or per-run object alive after its scope ended, or an open handle."""
        gc.collect()
        adoptions = self._tracker.adoptions
        adoptions[:] = [a for a in adoptions if not a.ended or a.obj() is not None]
        found: list[str] = []
        owners: dict[int, Adoption] = {}
        for adoption in adoptions:
            obj = adoption.obj()
            if obj is None:
                continue
            for value in _attributes(obj):
                for handles in (value, *_attributes(value)):  # its own handle maps and its helpers'
                    if isinstance(handles, Handles):
                        owners[id(handles)] = adoption
            if (
                adoption.ended
                and adoption.scope is not Scope.GLOBAL
                and not adoption.handed_over()
                and not _kept_only_by_logging(obj)
            ):
                found.append(_object_leak(adoption, obj))
            del obj
        live = live_handle_maps()
        for handles in live:
            owner = owners.get(id(handles))
            if handles and (owner is None or owner.ended):
                found.append(_handle_leak(handles, owner, {id(live)}))
        return found

    def assert_no_leaks(self) -> None:
        """Raise `LeakError` listing every leak, naming its toolset or provider and where it was made."""
        found = self.leaks()
        if found:
            raise LeakError(f"{len(found)} leak(s) after their scope ended:\n" + "\n".join(f"- {f}" for f in found))


@contextmanager
def track_leaks() -> Iterator[LeakCheck]:
    """Record every object scopes adopt while the block runs; check with `assert_no_leaks()`.

    Only weak references are kept, so tracking keeps nothing alive; an object that cannot be
    weakly referenced (`__slots__` without `__weakref__`) is not checked.
    """
    tracker = Tracker()
    trackers.append(tracker)
    try:
        yield LeakCheck(tracker)
    finally:
        trackers.remove(tracker)


async def settle(turns: int = 3) -> None:
    """Let the event loop finish releasing what finished runs left behind; await it before a check.

    A run that was cancelled abandons pydantic-ai's async generators; garbage collection hands
    them to the loop to close, and they hold the run's objects until the loop has turned.
    """
    for _ in range(turns):
        gc.collect()
        await asyncio.sleep(0)


def assert_no_leaks() -> None:
    """Check the innermost `track_leaks()` block (or the `llm_do_leaks` fixture) for leaks."""
    if not trackers:
        raise RuntimeError(
            "assert_no_leaks() needs leak tracking: run the code inside `with track_leaks():` "
            "(from llm_do.testing) or request the llm_do_leaks fixture"
        )
    LeakCheck(trackers[-1]).assert_no_leaks()


def _attributes(obj: object) -> list[Any]:
    return list(getattr(obj, "__dict__", {}).values())


def _object_leak(adoption: Adoption, obj: object) -> str:
    made = f"made by {_defined(type(obj))}"
    if adoption.opened_at:
        file, line, function = adoption.opened_at
        made += f" in a scope opened at {_relative(file)}:{line} in {function}"
    return f"{adoption.type_name} of {adoption.label} outlived its scope; {made}; held by {_holders(obj, set())}"


def _handle_leak(handles: Handles[Any], owner: Adoption | None, ignore: set[int]) -> str:
    if owner is not None:
        where = f"of {owner.type_name} of {owner.label}"
    else:
        where = f"not owned by any scope, held by {_holders(handles, ignore)}"
    return f"handle(s) {', '.join(handles)} still open in Handles({handles.prefix!r}) {where}"


def _defined(cls: type) -> str:
    try:
        file = inspect.getsourcefile(cls)
        line = inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        return cls.__qualname__
    return f"{cls.__qualname__} ({_relative(file or '?')}:{line})"


def _relative(file: str) -> str:
    try:
        return str(Path(file).relative_to(Path.cwd()))
    except ValueError:
        return file


def _kept_only_by_logging(obj: object, budget: int = 2000) -> bool:
    """Whether every chain of references to `obj` that gc sees ends at a `logging.LogRecord`: the object is a local
    of a finished frame in the traceback of an exception the application logged (`logger.exception`), which a
    handler keeps with the record (pytest's log capture keeps every record of a test until the test ends). A chain
    that reaches a module, a class, a frame still running, or nothing gc sees, or a walk past `budget` objects, is
    a holder of the object's own: then it is a leak."""
    running = {id(frame) for top in sys._current_frames().values() for frame in _stack(top)}
    seen = {id(obj)}
    todo = [obj]
    logged = False
    while todo:
        referrers = gc.get_referrers(todo.pop())
        held = False
        for holder in referrers:
            if holder is todo or _ours(holder):
                continue
            held = True
            if isinstance(holder, logging.LogRecord):
                logged = True
            elif isinstance(holder, ModuleType | type) or id(holder) in running:
                return False
            elif id(holder) not in seen:
                seen.add(id(holder))
                todo.append(holder)
        del referrers
        if not held or len(seen) > budget:
            return False
    return logged


def _stack(frame: FrameType | None) -> Iterator[FrameType]:
    while frame is not None:
        yield frame
        frame = frame.f_back


def _holders(obj: object, ignore: set[int], limit: int = 3) -> str:
    referrers = gc.get_referrers(obj)
    ignore = ignore | {id(referrers)}
    seen: list[str] = []
    in_context = False
    for holder in referrers:  # no comprehension: on Python 3.11 its closure would hold `obj` too
        if type(holder).__name__.startswith("hamt"):
            in_context = True  # a context's variable map: say which snapshot, and who keeps it
        elif len(seen) < limit and id(holder) not in ignore and not _ours(holder):
            seen.append(_holder(holder, obj, ignore))
    if in_context:
        seen[:0] = _context_holders(obj, limit)
    return ", ".join(seen) or f"nothing visible to gc ({_UNSEEN})"


_UNSEEN = (
    "which does not see the locals of functions running in threads, objects frozen by gc.freeze(), "
    "or a holder that let go of it while this report was made"
)


def _context_holders(obj: object, limit: int) -> list[str]:
    """Context snapshots (asyncio copies one into every callback, task and executor job) holding `obj`."""
    found: list[str] = []
    for context in gc.get_objects():
        if len(found) >= limit:
            break
        if not isinstance(context, contextvars.Context):
            continue
        names = [var.name for var, value in context.items() if value is obj]
        if not names:
            continue
        keepers = [_context_keeper(keeper) for keeper in gc.get_referrers(context) if _keeps_context(keeper)]
        line = f"the value of ContextVar {names[0]!r} in a context snapshot kept by {', '.join(keepers) or 'something'}"
        if names[0] == "_storage":  # dependency-injector's ContextLocalSingleton keeps its value there
            line += (
                " (a ContextLocalSingleton keeps its instance in the context, which asyncio copies into every "
                "callback and task started during the run: declare the provider with llm_do.RunLocalSingleton)"
            )
        if line not in found:
            found.append(line)
    return found


def _keeps_context(keeper: object) -> bool:
    return isinstance(keeper, asyncio.Handle | asyncio.Task | asyncio.Future)


def _context_keeper(keeper: object) -> str:
    if isinstance(keeper, asyncio.Task):
        return f"task {keeper.get_name()!r} running {getattr(keeper.get_coro(), '__qualname__', '?')}"
    if isinstance(keeper, asyncio.Handle):
        callback = getattr(keeper, "_callback", None)
        kind = "a timer (call_later/call_at)" if isinstance(keeper, asyncio.TimerHandle) else "a callback (call_soon)"
        return f"{kind} calling {_callable_name(callback)}"
    return f"a {type(keeper).__qualname__}"


def _callable_name(callback: object) -> str:
    function = getattr(callback, "__func__", callback)
    code = getattr(function, "__code__", None)
    name = getattr(function, "__qualname__", repr(callback))
    return f"{name} ({_relative(code.co_filename)}:{code.co_firstlineno})" if code is not None else name


def _ours(holder: object) -> bool:
    return isinstance(holder, FrameType) and holder.f_code.co_filename.startswith(_HERE)


def _holder(holder: object, target: object, ignore: set[int], nested: bool = False) -> str:
    if isinstance(holder, FrameType):
        names = [name for name, value in holder.f_locals.items() if value is target]
        code = holder.f_code
        where = f"{_relative(code.co_filename)}:{holder.f_lineno}"
        return f"local {names[0] if names else '?'!r} of {code.co_name} ({where})"
    if isinstance(holder, dict):
        key = next((key for key, value in holder.items() if value is target), "?")
        for owner in gc.get_referrers(holder):
            if isinstance(owner, ModuleType) and vars(owner) is holder:
                return f"global {key!r} of module {owner.__name__}"
            if getattr(owner, "__dict__", None) is holder and not isinstance(owner, type):
                return f"attribute {key!r} of a {type(owner).__qualname__}"
        return f"a dict (key {key!r})"
    if isinstance(holder, CellType):
        return _closure(holder)
    kind = type(holder).__qualname__
    for key, value in getattr(holder, "__dict__", {}).items():
        if value is target:
            return f"attribute {key!r} of a {kind}"
    if isinstance(holder, list | tuple | set | frozenset) and not nested:
        referrers = gc.get_referrers(holder)
        ignore = ignore | {id(referrers)}
        for outer in referrers:
            if id(outer) not in ignore and not _ours(outer):
                return f"a {kind} in {_holder(outer, holder, ignore, nested=True)}"
    return f"a {kind}"


def _closure(cell: CellType) -> str:
    for cells in gc.get_referrers(cell):
        if isinstance(cells, tuple):
            for function in gc.get_referrers(cells):
                if isinstance(function, FunctionType) and function.__closure__ is cells:
                    name = function.__code__.co_freevars[cells.index(cell)]
                    return f"variable {name!r} in the closure of {function.__qualname__}"
    return "a closure variable"
