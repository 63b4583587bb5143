"""Live runs that survive their web process: two real uvicorn processes of tests/survive_web_app.py (the chat router
whose runs are jobs from their first request) and a real `llm-do worker`, on one PostgreSQL. The process holding a
run is SIGKILLed mid-answer, or at a question; the worker picks the run up from its journal, asks the question
again with the same id (parked), the other process shows it and takes its answer, and the turn ends in the
conversation. The models count every request they are sent (tests/journal_app.py), the till every payment. A run
in a healthy process is never taken; one whose process was only slow (SIGSTOP) is taken once, and stopped there. And
in chromium, the example's chat page: a reload on the other process shows the killed process's question."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from playwright.async_api import BrowserContext, async_playwright, expect

from ..jobs_support import FAST_WORKER, Worker, eventually, wait_for_workers
from ..journal_app import sent
from ..web_processes import PROCESSES, app_processes, chunks
from .test_web_page import ARGS, CHROMIUM

APP = "tests.survive_web_app:create_app"


def message(notes: Path, amount: int, **fields: Any) -> dict[str, str]:
    return {"text": json.dumps({"notes": str(notes), "amount": amount, **fields})}


def noted(notes: Path, kind: str) -> list[str]:
    return [line for line in (notes.read_text().splitlines() if notes.exists() else []) if line.startswith(kind)]


async def fetch(dsn: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


async def job_of(dsn: str, conversation: str) -> int:
    [row] = await fetch(dsn, "SELECT id FROM procrastinate_jobs WHERE args->>'session' = $1", conversation)
    return int(row["id"])


async def journaled(dsn: str, job_id: int, count: int) -> None:
    async def written() -> bool:
        found = await fetch(dsn, "SELECT count(*) AS n FROM llm_do_journal WHERE job_id = $1", job_id)
        return int(found[0]["n"]) >= count

    await eventually(written, f"job {job_id}'s {count} responses journaled")


async def until(
    client: httpx.AsyncClient, conversation: str, check: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The conversation as `GET /chat/sessions/{id}` gives it, once `check` holds."""
    found: dict[str, Any] = {}

    async def shown() -> bool:
        nonlocal found
        response = await client.get(f"/chat/sessions/{conversation}")
        assert response.status_code == 200, response.text
        found = response.json()
        return check(found)

    try:
        await eventually(shown, f"conversation {conversation} as expected", within=60)
    except AssertionError as error:
        raise AssertionError(f"{error} (last seen: {found})") from None
    return found


@asynccontextmanager
async def service(dsn: str, tmp_path: Path) -> AsyncIterator[tuple[str, str, Worker]]:
    """Two web processes (heartbeats every 0.2 s, as the worker's) and one worker (a process silent 1.5 s is dead)."""
    env = {"LLM_DO_JOBS_DATABASE_URL": dsn, **FAST_WORKER, "SURVIVE_WEB_LOG": str(tmp_path / "web.log")}
    worker = Worker("tests.live_app:queue", dsn, tmp_path / "worker.log", concurrency=2)
    try:
        async with app_processes(APP, 2, env, probe="/health") as (one, two):
            await wait_for_workers(dsn, 1, [worker])
            yield one, two, worker
    finally:
        stopped = worker.stop()
    assert stopped == 0, worker.output()


async def answered_elsewhere(other: httpx.AsyncClient, conversation: str, job_id: int, approval_id: str | None) -> str:
    """On the other process: the run's question, asked again by the worker (parked), shown and answered there; the
    turn then ends in the conversation. The question's id."""
    page = await until(other, conversation, lambda page: bool(page["pending"]))
    [question] = page["pending"]
    assert question["held"] == "parked" and question["job_id"] == job_id and question["tool"] == "pay"
    if approval_id is not None:
        assert question["approval_id"] == approval_id  # the id the page was shown before the process died
    assert page["running"] is None and page["job"] == {"id": job_id, "status": "awaiting_approval"}
    assert (await other.get(f"/chat/sessions/{conversation}/stream")).status_code == 204  # no stream: a job holds it
    busy = await other.post(f"/chat/sessions/{conversation}/messages", json={"text": "and now?"})
    assert busy.status_code == 409 and f"job {job_id}" in busy.json()["error"]
    decided = await other.post(
        f"/chat/sessions/{conversation}/decisions", json={"approval_id": question["approval_id"], "choice": "approve"}
    )
    assert decided.status_code == 204, decided.text
    page = await until(other, conversation, lambda page: page["job"] is None and len(page["messages"]) >= 2)
    assert page["pending"] == [] and page["running"] is None
    assert page["messages"][0]["role"] == "user" and page["messages"][-1]["role"] == "assistant"
    assert page["messages"][-1]["parts"][-1]["text"].startswith("done: quote ok, step 1 ok, paid ")
    return str(question["approval_id"])


@pytest.mark.long
async def test_a_run_whose_process_is_killed_mid_answer_goes_on_on_a_worker_and_ends_in_the_conversation(
    dsn: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    async with service(dsn, tmp_path) as (one, two, worker):
        first = httpx.AsyncClient(base_url=one, timeout=30)
        other = httpx.AsyncClient(base_url=two, timeout=30)
        async with first, other:
            async with first.stream(
                "POST", "/chat/sessions/c1/messages", json=message(notes, 5, hold_live=1)
            ) as response:
                assert response.status_code == 200
                await holding(notes)
                job_id = await job_of(dsn, "c1")
                await journaled(dsn, job_id, 1)  # the first response, written beside the run
                PROCESSES[one].send_signal(signal.SIGKILL)  # mid-answer
                with pytest.raises(httpx.HTTPError):
                    async for _ in chunks(response):
                        pass
            await answered_elsewhere(other, "c1", job_id, None)
    # paid twice: the one request in flight when the process died; the payment made once, after the answer
    assert sent(notes) == {("payer", 0): 1, ("payer", 1): 2, ("payer", 2): 1, ("payer", 3): 1}
    assert noted(notes, "paid") == ["paid 5"]
    assert await fetch(dsn, "SELECT id FROM procrastinate_jobs WHERE status NOT IN ('succeeded')") == []
    assert "queued again 1 job(s) of dead workers" in worker.output()


@pytest.mark.long
async def test_a_run_whose_process_is_killed_at_a_question_asks_it_again_with_its_id_on_the_other_process(
    dsn: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    async with service(dsn, tmp_path) as (one, two, _):
        first = httpx.AsyncClient(base_url=one, timeout=30)
        other = httpx.AsyncClient(base_url=two, timeout=30)
        async with first, other:
            async with first.stream("POST", "/chat/sessions/c2/messages", json=message(notes, 7)) as response:
                approval_id = await asked(chunks(response))
                job_id = await job_of(dsn, "c2")
                await journaled(dsn, job_id, 3)  # quote, step, pay: each written beside the run
                PROCESSES[one].send_signal(signal.SIGKILL)  # the person has the question on their page
            shown = await answered_elsewhere(other, "c2", job_id, approval_id)
            assert shown == approval_id
    assert sent(notes) == {("payer", 0): 1, ("payer", 1): 1, ("payer", 2): 1, ("payer", 3): 1}  # nothing paid twice
    assert noted(notes, "paid") == ["paid 7"]


@pytest.mark.long
async def test_a_question_answered_before_the_process_died_is_not_asked_again_by_the_worker(
    dsn: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    async with service(dsn, tmp_path) as (one, two, _):
        first = httpx.AsyncClient(base_url=one, timeout=30)
        other = httpx.AsyncClient(base_url=two, timeout=30)
        async with first, other:
            ask = message(notes, 6, hold_live=3)  # the request after the payment is held
            async with first.stream("POST", "/chat/sessions/c5/messages", json=ask) as response:
                approval_id = await asked(chunks(response))
                decided = await first.post(
                    "/chat/sessions/c5/decisions", json={"approval_id": approval_id, "choice": "approve"}
                )
                assert decided.status_code == 204
                await holding(notes)
                job_id = await job_of(dsn, "c5")
                await journaled(dsn, job_id, 3)
                PROCESSES[one].send_signal(signal.SIGKILL)  # answered, paid, then mid-answer
            # the worker's run is answered as the person answered: it never parks, and the turn ends
            page = await until(other, "c5", lambda page: page["job"] is None and len(page["messages"]) >= 2)
            assert page["pending"] == []
            said = [
                part["text"] for message in page["messages"][1:] for part in message["parts"] if part["type"] == "text"
            ]
            assert said == ["done: quote ok, step 1 ok, paid 6"]
    assert sent(notes) == {("payer", 0): 1, ("payer", 1): 1, ("payer", 2): 1, ("payer", 3): 2}
    assert noted(notes, "paid") == ["paid 6", "paid 6"]  # a tool runs again (docs/jobs.md: idempotency keys)
    [answered] = await fetch(dsn, "SELECT choice FROM llm_do_approvals WHERE job_id = $1", job_id)
    assert answered["choice"] == "approve"


@pytest.mark.long
async def test_a_run_in_a_healthy_process_is_never_taken_and_leaves_no_job(dsn: str, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    async with service(dsn, tmp_path) as (one, _, worker), httpx.AsyncClient(base_url=one, timeout=30) as first:
        async with first.stream("POST", "/chat/sessions/c3/messages", json=message(notes, 3)) as response:
            approval_id = None
            async for chunk in chunks(response):
                if chunk["type"] == "tool-approval-request" and approval_id is None:
                    approval_id = chunk["approvalId"]
                    job_id = await job_of(dsn, "c3")
                    await asyncio.sleep(4.0)  # the question waits: more than twice the stalled timeout (1.5 s)
                    [row] = await fetch(dsn, "SELECT status, attempts FROM procrastinate_jobs WHERE id = $1", job_id)
                    assert (row["status"], row["attempts"]) == ("doing", 0)  # held by the web process still
                    page = (await first.get("/chat/sessions/c3")).json()
                    assert page["job"] is None and page["running"] is not None  # the live run, not a job
                    decided = await first.post(
                        "/chat/sessions/c3/decisions", json={"approval_id": approval_id, "choice": "approve"}
                    )
                    assert decided.status_code == 204
        page = await until(first, "c3", lambda page: page["running"] is None and len(page["messages"]) >= 2)
        assert page["messages"][-1]["parts"][-1]["text"] == "done: quote ok, step 1 ok, paid 3"
    assert sent(notes) == {("payer", 0): 1, ("payer", 1): 1, ("payer", 2): 1, ("payer", 3): 1}
    assert {line.split()[-1] for line in noted(notes, "sent")} == {"0"}  # every request from the live run, none a job's
    assert await fetch(dsn, "SELECT id FROM procrastinate_jobs") == []  # its job went with its end
    assert await fetch(dsn, "SELECT job_id FROM llm_do_journal") == []  # and its journal
    assert "dead workers" not in worker.output()


@pytest.mark.long
async def test_a_run_whose_process_was_only_slow_is_taken_once_and_stopped_there(dsn: str, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    async with service(dsn, tmp_path) as (one, two, _):
        first = httpx.AsyncClient(base_url=one, timeout=30)
        other = httpx.AsyncClient(base_url=two, timeout=30)
        async with first, other:
            async with first.stream("POST", "/chat/sessions/c4/messages", json=message(notes, 4)) as response:
                stream = chunks(response)
                approval_id = await asked(stream)
                job_id = await job_of(dsn, "c4")
                await journaled(dsn, job_id, 3)
                PROCESSES[one].send_signal(signal.SIGSTOP)  # silent: a long pause, not a death
                try:
                    # the worker took it, and parked its question (listed live too: the process's connections live)
                    await until(other, "c4", lambda page: any(asked["held"] == "parked" for asked in page["pending"]))
                finally:
                    PROCESSES[one].send_signal(signal.SIGCONT)
                rest = [chunk async for chunk in stream]  # the slow process learns it, and stops its run
            assert rest[-1]["type"] == "finish"
            [error] = [chunk["errorText"] for chunk in rest if chunk["type"] == "error"]
            assert "LiveRunTakenOver" in error
            await answered_elsewhere(other, "c4", job_id, approval_id)
            page = (await first.get("/chat/sessions/c4")).json()
    roles = [message["role"] for message in page["messages"]]
    assert roles[0] == "user" and roles.count("user") == 1  # one turn, the job's
    said = [part["text"] for message in page["messages"][1:] for part in message["parts"] if part["type"] == "text"]
    assert said == ["done: quote ok, step 1 ok, paid 4"]
    assert noted(notes, "paid") == ["paid 4"]
    assert sent(notes) == {("payer", 0): 1, ("payer", 1): 1, ("payer", 2): 1, ("payer", 3): 1}


async def asked(stream: AsyncIterator[dict[str, Any]]) -> str:
    async for chunk in stream:
        if chunk["type"] == "tool-approval-request":
            return str(chunk["approvalId"])
    raise AssertionError("the stream ended without a question")


async def holding(notes: Path) -> None:
    async def held() -> bool:
        return noted(notes, "holding") != []

    await eventually(held, "the run holds its request")


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[BrowserContext]:
    """Chromium with a fresh user-data dir; fails (never skips) naming the package when it is missing."""
    if not CHROMIUM.exists():
        pytest.fail(f"Debian's chromium ({CHROMIUM}) is missing: run `make browser` (apt-get install chromium)")
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            tmp_path / "profile", executable_path=str(CHROMIUM), args=ARGS, headless=True
        )
        try:
            yield context
        finally:
            await context.close()


@pytest.mark.long
async def test_in_chromium_a_page_reloaded_on_the_other_process_shows_the_question_of_a_killed_process_and_its_answer(
    browser: BrowserContext, dsn: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    async with service(dsn, tmp_path) as (one, two, _):
        page = await browser.new_page()
        await page.goto(f"{one}/chat?user=alice")
        await page.fill("#text", message(notes, 8)["text"])
        await page.click("#send")
        box = page.locator(".approval").last
        await expect(box.locator("button.approve")).to_be_visible(timeout=20_000)
        approval_id = await box.get_attribute("data-approval-id")
        session = await page.text_content("#session")
        assert approval_id and session
        job_id = await job_of(dsn, session)
        await journaled(dsn, job_id, 3)
        PROCESSES[one].send_signal(signal.SIGKILL)  # the person has the question on the page

        async with httpx.AsyncClient(base_url=two, timeout=30) as other:
            await until(other, session, lambda shown: bool(shown["pending"]))  # a worker took the run, and parked
            # the reload, sent by a balancer to the other process: the question, with the id the page had
            await page.goto(f"{two}/chat?user=alice&session={session}")
            question = page.locator(".approval")
            await expect(question).to_have_count(1)
            await expect(question).to_have_attribute("data-approval-id", approval_id)
            await question.locator("button.approve").click()  # answered there: the job goes on
            await until(other, session, lambda shown: shown["job"] is None and len(shown["messages"]) >= 2)
        await page.reload()  # the job's turn, in the conversation
        await expect(page.locator(".message.assistant").last).to_contain_text("done: quote ok, step 1 ok, paid 8")
    assert noted(notes, "paid") == ["paid 8"]
    assert sent(notes) == {("payer", 0): 1, ("payer", 1): 1, ("payer", 2): 1, ("payer", 3): 1}
