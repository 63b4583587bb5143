"""The FastAPI service: one teller agent run per `POST /transfer`.

Serve it with `uvicorn bank.app:create_app --factory --app-dir examples/service` and
`LLM_DO_DATABASE_URL` set to a PostgreSQL database (the `accounts` table is created if missing).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any, Literal

import asyncpg
from fastapi import Depends, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from llm_do import PostgresHistoryStore, Runtime, run_report
from llm_do.web import questions_end_on_signal

from . import ledger
from .chat import ChatStore, banker, cashier
from .chat_web import add_chat_endpoints
from .model import TransferRequest
from .toolsets import Audit
from .web import ClientDisconnected, error_response, unless_disconnected, usage_summary
from .wiring import Bank, teller

if TYPE_CHECKING:
    from llm_do.jobs import JobQueue, JobRecord

__all__ = ["create_app", "create_chat_app", "create_transfer_app"]

logger = logging.getLogger("bank")


class NewAccount(BaseModel):
    name: str = Field(min_length=1, max_length=64)
    balance: int = Field(ge=0)


class JobDecision(BaseModel):
    choice: Literal["approve", "deny"]
    note: str | None = Field(default=None, max_length=500)


async def _runtime(request: Request) -> Runtime:
    # async: FastAPI runs a plain `def` dependency in its thread pool, a thread hop per request
    runtime: Runtime = request.state.runtime  # put there by the lifespan
    return runtime


RuntimeDep = Annotated[Runtime, Depends(_runtime)]


def _audit_lines(per_run: Mapping[str, Any]) -> list[str]:
    audit = per_run.get("audit")
    return list(audit.lines) if isinstance(audit, Audit) else []


def _audit_of(error: BaseException) -> list[str]:
    """The audit of the run that raised `error` (empty if the error did not come from a run)."""
    report = run_report(error)
    return [] if report is None else _audit_lines(report.per_run)


def _job_json(record: JobRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "status": record.status,
        "attempts": record.attempts,
        "input": record.input,
        "outcome": record.outcome,
        "output": record.output,
        "error": record.error,
        "usage": dict(record.usage),
        "calls": list(record.calls),
        "cancel_requested": record.cancel_requested,
    }


def create_app(
    container: Bank | None = None, jobs: JobQueue | None = None, *, with_jobs: bool = True, with_chat: bool = True
) -> FastAPI:
    """The service over `container` (a fresh `Bank()` from the environment when omitted).

    `jobs` is the queue `POST /jobs/transfer` defers to (default: the bank's queue in the database of
    `LLM_DO_JOBS_DATABASE_URL`, else the container's `database_url`); workers run the jobs. With
    `with_jobs=False` the service has no job endpoints and never imports the job queue's libraries.
    With `with_chat` (the default) it serves the chat page and its endpoints (`bank.chat_web`: llm-do's
    `chat_router`), whose turns and decisions are shared between its processes through the database.
    The container is also `app.state.container`, for tests that override its providers.
    """
    if jobs is not None and not with_jobs:
        raise ValueError("create_app: a job queue was given with with_jobs=False; pass one or the other")
    bank = container if container is not None else Bank()
    queue = _queue(bank, jobs) if with_jobs else None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        async with AsyncExitStack() as stack:
            stack.push_async_callback(_shutdown_resources, bank)  # also if start-up fails half-way
            started = bank.init_resources()  # open the pool now, outside any run
            if started is not None:
                await started
            # the chat's conversations are sessions, their histories in PostgreSQL (closed after the runtime)
            history = await stack.enter_async_context(PostgresHistoryStore(_dsn(bank))) if with_chat else None
            runtime = await stack.enter_async_context(
                Runtime(bank, entries=[teller, banker, cashier], history_store=history)
            )
            state: dict[str, Any] = {"runtime": runtime}
            if history is not None:
                chats = state["chats"] = ChatStore(await bank.pool())
                await chats.create_schema(history)
                # the chat's router (bank.chat_web) opens its relay and turns in its own start-up, after this one,
                # and closes them first, once its runs in flight have ended
                # told to stop (a deploy), the questions a run waits on are denied first, and the person told:
                # the runs end and their streams close, instead of waiting for answers that cannot come
                stack.enter_context(questions_end_on_signal(runtime.stop_asking))
            if queue is not None:
                await stack.enter_async_context(queue)
                await queue.apply_schema()
            yield state
            # Runtime.aclose: waits for the runs in flight, then shuts the pool down

    app = FastAPI(title="bank (llm-do example)", lifespan=lifespan)
    app.state.container = bank

    async def pool() -> ledger.Pool:
        made: ledger.Pool = await bank.pool()  # an async Resource resolves to an awaitable
        return made

    @app.post("/transfer")
    async def transfer(body: TransferRequest, request: Request, runtime: RuntimeDep) -> Response:
        try:
            result = await unless_disconnected(request, runtime.run("teller", body.model_dump_json()))
        except ClientDisconnected as gone:
            audit = _audit_of(gone.cause) if gone.cause is not None else []
            logger.info("client left; transfer %s cancelled; audit: %s", body.reference, audit)
            return error_response(499, "the client disconnected; the transfer was cancelled", audit)  # nobody reads it
        except ledger.BankError as error:
            return error_response(error.status, str(error), _audit_of(error))
        except Exception as error:
            logger.exception("transfer %s failed", body.reference)
            message = f"the transfer failed ({type(error).__name__}); see the server log"
            return error_response(500, message, _audit_of(error))
        run_audit = result.per_run.get("audit")
        if isinstance(run_audit, Audit) and run_audit.fault is not None and not run_audit.committed:
            # The database failed under the teller and it gave up: nothing was moved (or, if a
            # commit's connection was lost and the database did not say in time, nobody knows yet).
            if run_audit.outcome_unknown:
                message = f"the transfer's outcome is unknown: {run_audit.fault}"
            else:
                message = f"the transfer was not made, the database is unavailable; retry later. {run_audit.fault}"
            return error_response(503, message, run_audit.lines)
        return JSONResponse(
            {
                "reference": body.reference,
                "output": result.output,
                "audit": _audit_lines(result.per_run),
                "usage": usage_summary(result.usage),
            }
        )

    if queue is not None:
        _add_job_endpoints(app, queue)
    if with_chat:
        add_chat_endpoints(app, lambda: _dsn(bank))

    @app.post("/accounts", status_code=201)
    async def open_account(body: NewAccount) -> Response:
        try:
            await ledger.open_account(await pool(), body.name, body.balance)
        except asyncpg.UniqueViolationError:
            return error_response(409, f"account {body.name!r} already exists", None)
        return JSONResponse({"name": body.name, "balance": body.balance}, status_code=201)

    @app.get("/accounts")
    async def accounts() -> dict[str, int]:
        return await ledger.balances(await pool())

    return app


def create_transfer_app() -> FastAPI:
    """The service without its job endpoints: what `bank.plain` serves, for the like-for-like benchmark."""
    return create_app(with_jobs=False, with_chat=False)


def create_chat_app() -> FastAPI:
    """The service with its chat and without its job endpoints (the browser tests and `make bench-sessions`)."""
    return create_app(with_jobs=False)


def _dsn(bank: Bank) -> str:
    url = bank.config.database_url()
    return str(url.get_secret_value() if hasattr(url, "get_secret_value") else url)


def _queue(bank: Bank, jobs: JobQueue | None) -> JobQueue:
    if jobs is not None:
        return jobs
    from llm_do.jobs import JobSettings

    from .jobs import make_queue

    return make_queue(JobSettings().jobs_database_url or bank.config.database_url())


def _add_job_endpoints(app: FastAPI, queue: JobQueue) -> None:
    """`POST /jobs/transfer`, `GET` and `DELETE /jobs/{id}`, `GET /jobs?status=`: transfers as jobs; and, for a
    queue that parks jobs until a person decides, `GET /jobs/{id}/approvals` (what the job waits on) and
    `POST /jobs/{id}/approvals/{approval_id}` `{"choice": "approve" | "deny", "note"}` (the decision)."""
    from llm_do.jobs import DecisionRefused, JobNotFound

    @app.post("/jobs/transfer", status_code=202)
    async def defer_transfer(body: TransferRequest) -> dict[str, Any]:
        job_id = await queue.defer("transfer", body.model_dump_json())  # the teller reads JSON text
        return {"id": job_id, "status": "todo"}

    @app.get("/jobs/{job_id}")
    async def job(job_id: int) -> Response:
        try:
            return JSONResponse(_job_json(await queue.get(job_id)))
        except JobNotFound as error:
            return error_response(404, str(error), None)

    @app.delete("/jobs/{job_id}")
    async def cancel_job(job_id: int) -> Response:
        try:
            cancelled = await queue.cancel(job_id)
            record = await queue.get(job_id)
        except JobNotFound as error:
            return error_response(404, str(error), None)
        if not cancelled:
            return error_response(409, f"job {job_id} already ended ({record.status}); nothing to cancel", None)
        return JSONResponse(_job_json(record))

    @app.get("/jobs/{job_id}/approvals")
    async def job_approvals(job_id: int) -> Response:
        try:
            pending = await queue.pending(job_id)
        except JobNotFound as error:
            return error_response(404, str(error), None)
        return JSONResponse(
            [
                {
                    "approval_id": item.approval_id,
                    "chain": list(item.chain),
                    "call_id": item.call_id,
                    "tool_call_id": item.tool_call_id,
                    "toolset": item.toolset,
                    "tool": item.tool,
                    "args": dict(item.args),
                    "reason": item.reason,
                    "description": item.description,
                    "asked_at": item.asked_at.isoformat(),
                    "attachments": [info.to_json() for info in item.attachments],
                }
                for item in pending
            ]
        )

    @app.post("/jobs/{job_id}/approvals/{approval_id}")
    async def decide_job_approval(job_id: int, approval_id: str, body: JobDecision) -> Response:
        try:
            await queue.get(job_id)
            await queue.decide(job_id, approval_id, body.choice, note=body.note)
            return JSONResponse(_job_json(await queue.get(job_id)))
        except JobNotFound as error:
            return error_response(404, str(error), None)
        except DecisionRefused as error:
            return error_response(409, str(error), None)

    @app.get("/jobs")
    async def jobs_by_status(status: str | None = None, limit: int = 100) -> Response:
        try:
            records = await queue.list(status, limit=limit)
        except ValueError as error:
            return error_response(400, str(error), None)
        return JSONResponse([_job_json(record) for record in records])


async def _shutdown_resources(bank: Bank) -> None:
    stopped = bank.shutdown_resources()
    if stopped is not None:
        await stopped
