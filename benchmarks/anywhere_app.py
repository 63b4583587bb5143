"""The web process `bench_anywhere.py` measures a run's stream with (`benchmarks.anywhere_app:create_app`, a factory).

One entry, `talker`, whose model streams `ANYWHERE_WORDS` words (each a text delta) and nothing else, behind
`chat_router(prefix="/chats", allow_anyone=True)`. `ANYWHERE_RUNS` says where the router finds a conversation's run:

- `events`: as before runs were shared, a `ChatRuns` that reads the `LiveRun` itself and encodes its events for each
  reader (`LiveRunInFlight`);
- `local`: `LocalRuns`, the run's stream encoded once into its log;
- `postgres`: `chat_router(database_url=...)`, its log written to PostgreSQL too (`ANYWHERE_DATABASE_URL`), found by
  every process.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from llm_do import AgentEntry, ApprovalRequest, LiveRun, Runtime
from llm_do.web import chat_router
from llm_do.web.chunklog import Sent, sent
from llm_do.web.runs import RunInFlight
from llm_do.web.vercel import vercel_chunks


def _words() -> int:
    return int(os.environ.get("ANYWHERE_WORDS", "2000"))


async def _stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    for number in range(_words()):
        yield f"w{number} "


def _respond(messages: list[ModelMessage], info: AgentInfo) -> Any:
    raise AssertionError("the talker only streams")


talker = AgentEntry(Agent(FunctionModel(_respond, stream_function=_stream)), name="talker")


class LiveRunInFlight:
    """A resumable `LiveRun` as a `RunInFlight`, its events encoded for each reader as it reads them (how the router
    read a run before its stream was written once into a log: the baseline)."""

    __slots__ = ("prompt", "run")

    def __init__(self, run: LiveRun, prompt: str | None) -> None:
        self.run = run
        self.prompt = prompt

    @property
    def message_id(self) -> str:
        return self.run.message_id

    @property
    def pending(self) -> tuple[ApprovalRequest, ...]:
        return self.run.pending

    @property
    def asked(self) -> tuple[ApprovalRequest, ...]:
        return self.run.asked

    async def chunks(self, seen: int = -1) -> AsyncIterator[Sent]:
        number = -1
        encoded = vercel_chunks(self.run, message_id=self.run.message_id, sdk_version=7)
        try:
            async for chunk in encoded:
                number += 1
                if number > seen:
                    yield sent(number, chunk)
        finally:
            closing = getattr(encoded, "aclose", None)  # the encoder's generator, left early: closed now
            if closing is not None:
                await closing()

    def __repr__(self) -> str:
        return f"LiveRunInFlight({self.run!r})"


class EventRuns:
    """The runs of this process, each read from its `LiveRun` and encoded for each reader."""

    def __init__(self) -> None:
        self._runs: dict[str, LiveRunInFlight] = {}

    async def started(self, conversation_id: str, run: LiveRun, prompt: str) -> RunInFlight:
        found = self._runs[conversation_id] = LiveRunInFlight(run, prompt)
        return found

    async def ended(self, conversation_id: str, run: LiveRun) -> None:
        kept = self._runs.get(conversation_id)
        if kept is not None and kept.run is run:
            del self._runs[conversation_id]

    async def find(self, runtime: Runtime, conversation_id: str) -> RunInFlight | None:
        return self._runs.get(conversation_id)


async def _runtime(request: Request) -> Runtime:
    found: Runtime = request.state.runtime  # put there by the lifespan
    return found


def create_app() -> FastAPI:
    kind = os.environ.get("ANYWHERE_RUNS", "postgres")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        async with Runtime(None, entries=[talker]) as runtime:
            yield {"runtime": runtime}

    options: dict[str, Any] = {}
    if kind == "events":
        options["runs"] = EventRuns()
    elif kind == "postgres":
        options["database_url"] = os.environ["ANYWHERE_DATABASE_URL"]
    elif kind != "local":
        raise ValueError(f"ANYWHERE_RUNS={kind!r}: events, local or postgres")
    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    app.include_router(chat_router(_runtime, entry="talker", allow_anyone=True, **options))
    return app
