"""Application module."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from llm_do.web import chat_router

from . import endpoints
from .containers import Container


def create_app() -> FastAPI:
    container = Container()
    container.config.db.url.from_value(os.environ.get("DATABASE_URL", "sqlite:///./webapp.db"))

    db = container.db()
    db.create_database()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await container.init_resources()  # type: ignore[misc]  # the assistant's runtime opens
        yield
        await container.shutdown_resources()  # type: ignore[misc]  # it closes first, after its runs

    app = FastAPI(lifespan=lifespan)
    app.container = container  # type: ignore[attr-defined]
    app.include_router(endpoints.router)
    app.include_router(chat_router(container.runtime, entry="assistant", access=endpoints.only_its_owner))
    return app


app = create_app()
