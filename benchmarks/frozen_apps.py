"""The bank service's two apps with their heaps frozen once started (`bench_service.py --freeze`).

After each lifespan's start-up (imports done, pools open) the collector runs once and every object
then alive moves to the permanent generation (`gc.freeze()`), so later collections no longer
traverse what lives as long as the process. A service can do the same at the end of its start-up.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "service"))

from bank import app as llm_do_bank, plain as plain_bank

__all__ = ["llm_do_app", "plain_app"]


def _frozen(app: FastAPI) -> FastAPI:
    started: Callable[[Any], AbstractAsyncContextManager[Any]] = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(application: Any) -> AsyncIterator[Any]:
        async with started(application) as state:
            gc.collect()
            gc.freeze()
            yield state

    app.router.lifespan_context = lifespan
    return app


def llm_do_app() -> FastAPI:
    """The llm-do bank app, frozen after start-up."""
    return _frozen(llm_do_bank.create_transfer_app())


def plain_app() -> FastAPI:
    """The plain pydantic-ai bank app, frozen after start-up."""
    return _frozen(plain_bank.create_app())
