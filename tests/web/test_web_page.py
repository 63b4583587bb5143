"""The example's chat page in a real browser (Debian's chromium, driven by Playwright): two people chat at
once, each approves a commit with a button, reads the result and the call tree, and goes on; neither sees the
other's events or approvals. A reload mid-question finds the run again, in the process that runs it or in another
one of the service."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import BrowserContext, Page, async_playwright, expect

from ..postgres import PostgresServer
from ..web_processes import bank_chat, bank_chats

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[BrowserContext]:
    """Chromium with a fresh user-data dir; fails (never skips) naming the package when it is missing."""
    if not CHROMIUM.exists():  # noqa: ASYNC240 (once, before the browser starts)
        pytest.fail(f"Debian's chromium ({CHROMIUM}) is missing: run `make browser` (apt-get install chromium)")
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            tmp_path / "profile", executable_path=str(CHROMIUM), args=ARGS, headless=True
        )
        try:
            yield context
        finally:
            await context.close()


@pytest.fixture
async def service(postgres: PostgresServer) -> AsyncIterator[str]:
    async with bank_chat(postgres) as url:
        yield url


async def _send(page: Page, text: str) -> None:
    await page.fill("#text", text)
    await page.click("#send")


async def _approval_of(page: Page) -> str:
    box = page.locator(".approval").last
    await expect(box.locator("button.approve")).to_be_visible(timeout=20_000)
    approval_id = await box.get_attribute("data-approval-id")
    assert approval_id is not None and approval_id.startswith("apr_")
    return approval_id


@pytest.mark.long
async def test_two_people_chat_at_once_and_approve_their_own_commits(
    browser: BrowserContext, service: str, tmp_path: Path
) -> None:
    alice, bob = await browser.new_page(), await browser.new_page()
    await alice.goto(f"{service}/chat?user=alice")
    await bob.goto(f"{service}/chat?user=bob")

    await asyncio.gather(_send(alice, "please move 10 from A to B"), _send(bob, "send 7 from C to D"))
    alice_approval, bob_approval = await asyncio.gather(_approval_of(alice), _approval_of(bob))
    assert alice_approval != bob_approval
    # each page shows its own question, and only that one
    await expect(alice.locator(".approval")).to_have_count(1)
    await expect(bob.locator(".approval")).to_have_count(1)
    await expect(alice.locator(".approval .what")).to_contain_text("commit")
    # both runs wait at once: nobody waits for somebody else's decision
    await expect(alice.locator("#tree li.call[data-entry=cashier]")).to_have_attribute("data-state", "running")
    await expect(bob.locator("#tree li.call[data-entry=cashier]")).to_have_attribute("data-state", "running")

    # Bob's page cannot answer Alice's approval: not his session, and not pending in his own
    alice_session = await alice.text_content("#session")
    bob_session = await bob.text_content("#session")
    assert alice_session and bob_session and alice_session != bob_session
    async with httpx.AsyncClient(base_url=service, headers={"x-user": "bob"}, timeout=30) as as_bob:
        theirs = await as_bob.post(
            f"/chat/sessions/{alice_session}/decisions", json={"approval_id": alice_approval, "choice": "approve"}
        )
        assert theirs.status_code == 403, theirs.text
        mine = await as_bob.post(
            f"/chat/sessions/{bob_session}/decisions", json={"approval_id": alice_approval, "choice": "approve"}
        )
        assert mine.status_code == 409, mine.text
        assert f"{alice_approval!r} is not pending in this run (pending: {bob_approval})" in mine.json()["error"]

    await bob.click(".approval button.approve")  # Bob first: Alice's run keeps waiting meanwhile
    bob_reply = bob.locator(".message.assistant[data-done=true]").last
    await expect(bob_reply.locator(".text")).to_contain_text("Done: moved 7 from C to D", timeout=20_000)
    await expect(alice.locator(".approval")).to_have_attribute("data-state", "pending")
    await alice.click(".approval button.approve")
    alice_reply = alice.locator(".message.assistant[data-done=true]").last
    await expect(alice_reply.locator(".text")).to_contain_text("Done: moved 10 from A to B", timeout=20_000)
    await expect(alice_reply.locator(".text")).to_contain_text("committed")
    await expect(alice.locator(".approval")).to_have_attribute("data-state", "approved")

    # the call tree: banker, its cashier child, and the cashier's tools, each ended
    for page in (alice, bob):
        root = page.locator("#tree > ul > li.call[data-entry=banker]")
        await expect(root).to_have_attribute("data-state", "ok")
        child = root.locator("li.call[data-entry=cashier]")
        await expect(child).to_have_attribute("data-state", "ok")
        await expect(child.locator("li.tool")).to_have_count(3)  # begin, transfer, commit
        await expect(child.locator("li.tool").last).to_contain_text("commit")
        await expect(child.locator("li.tool").last).to_have_attribute("data-state", "done")

    # the conversation continues, each with its own history
    await asyncio.gather(_send(alice, "what have I done so far?"), _send(bob, "and what did I do?"))
    for page, mine, theirs in ((alice, "from A to B", "from C to D"), (bob, "from C to D", "from A to B")):
        second = page.locator(".message.assistant[data-done=true]").nth(1)
        await expect(second.locator(".text")).to_contain_text(
            "In this conversation you made 1 transfer(s)", timeout=20_000
        )
        await expect(second.locator(".text")).to_contain_text(mine)
        body = await page.text_content("body")
        assert body is not None and theirs not in body  # nothing of the other person's run reached this page
    await alice.screenshot(path=str(tmp_path / "alice.png"))  # for a person to look at, when debugging

    # Bob denies his next commit: nothing moves, and his page says so
    await _send(bob, "send 5 from C to D")
    await _approval_of(bob)
    await bob.locator(".approval button.deny").last.click()
    third = bob.locator(".message.assistant[data-done=true]").nth(2)
    await expect(third.locator(".text")).to_contain_text("The transfer was not made", timeout=20_000)
    await expect(third.locator(".text")).to_contain_text("the approver denied it")
    await expect(bob.locator(".approval").last).to_have_attribute("data-state", "denied")

    async with httpx.AsyncClient(base_url=service) as client:
        assert (await client.get("/accounts")).json() == {"A": 90, "B": 10, "C": 43, "D": 7}


@pytest.mark.long
async def test_a_reload_mid_question_brings_the_conversation_back_and_its_answer_finishes_the_run(
    browser: BrowserContext, service: str
) -> None:
    page = await browser.new_page()
    await page.goto(f"{service}/chat?user=alice")
    await _send(page, "move 10 from A to B")
    approval = await _approval_of(page)
    session = await page.text_content("#session")
    assert session and f"session={session}" in page.url  # the conversation is in the address

    await page.reload()  # mid-question: the run waits on, and the page finds it again
    await expect(page.locator("#session")).to_have_text(session)
    await expect(page.locator(".message.user")).to_have_text(["move 10 from A to B"])
    question = page.locator(".approval")
    await expect(question).to_have_count(1)
    await expect(question).to_have_attribute("data-approval-id", approval)
    await expect(question).to_have_attribute("data-state", "pending")
    await expect(question.locator(".what")).to_contain_text("commit")
    cashier = page.locator("#tree > ul > li.call[data-entry=banker] li.call[data-entry=cashier]")
    await expect(cashier).to_have_attribute("data-state", "running")
    await expect(cashier.locator("li.tool")).to_have_count(3)  # begin, transfer: done; commit: asked

    # Bob, with Alice's conversation in his address, sees none of it
    intruder = await browser.new_page()
    await intruder.goto(f"{service}/chat?user=bob&session={session}")
    await expect(intruder.locator(".message.assistant.error")).to_contain_text("belongs to another user")
    await expect(intruder.locator(".approval")).to_have_count(0)

    await question.locator("button.approve").click()
    reply = page.locator(".message.assistant[data-done=true]").last
    await expect(reply.locator(".text")).to_contain_text("Done: moved 10 from A to B", timeout=20_000)
    await expect(question).to_have_attribute("data-state", "approved")
    await expect(cashier).to_have_attribute("data-state", "ok")

    await page.reload()  # after the run: the saved conversation, and nothing in flight
    await expect(page.locator(".message.user")).to_have_text(["move 10 from A to B"])
    await expect(page.locator(".message.assistant .text")).to_have_count(1)
    await expect(page.locator(".message.assistant .text")).to_contain_text("Done: moved 10 from A to B")
    await expect(page.locator(".approval")).to_have_count(0)
    await _send(page, "what have I done so far?")
    second = page.locator(".message.assistant[data-done=true]").nth(1)
    await expect(second.locator(".text")).to_contain_text("In this conversation you made 1 transfer(s)", timeout=20_000)

    async with httpx.AsyncClient(base_url=service) as client:
        assert (await client.get("/accounts")).json() == {"A": 90, "B": 10, "C": 50, "D": 0}


@pytest.fixture
async def two_services(postgres: PostgresServer) -> AsyncIterator[list[str]]:
    async with bank_chats(postgres, 2) as urls:
        yield urls


@pytest.mark.long
async def test_a_reload_that_lands_on_another_process_shows_the_question_and_its_answer_finishes_the_run(
    browser: BrowserContext, two_services: list[str]
) -> None:
    one, two = two_services
    page = await browser.new_page()
    await page.goto(f"{one}/chat?user=alice")
    await _send(page, "move 10 from A to B")
    approval = await _approval_of(page)
    session = await page.text_content("#session")
    assert session

    # the reload, sent by a balancer that does not pin conversations to the other process
    await page.goto(f"{two}/chat?user=alice&session={session}")
    await expect(page.locator("#session")).to_have_text(session)
    await expect(page.locator(".message.user")).to_have_text(["move 10 from A to B"])
    question = page.locator(".approval")
    await expect(question).to_have_count(1)
    await expect(question).to_have_attribute("data-approval-id", approval)
    await expect(question).to_have_attribute("data-state", "pending")
    await expect(question.locator(".what")).to_contain_text("commit")
    cashier = page.locator("#tree > ul > li.call[data-entry=banker] li.call[data-entry=cashier]")
    await expect(cashier).to_have_attribute("data-state", "running")  # the run's call tree, from its start

    await question.locator("button.approve").click()  # answered there, applied where the run is
    reply = page.locator(".message.assistant[data-done=true]").last
    await expect(reply.locator(".text")).to_contain_text("Done: moved 10 from A to B", timeout=20_000)
    await expect(question).to_have_attribute("data-state", "approved")
    await expect(cashier).to_have_attribute("data-state", "ok")

    await _send(page, "what have I done so far?")  # the conversation goes on in this process
    second = page.locator(".message.assistant[data-done=true]").nth(1)
    await expect(second.locator(".text")).to_contain_text("In this conversation you made 1 transfer(s)", timeout=20_000)
    async with httpx.AsyncClient(base_url=two) as client:
        assert (await client.get("/accounts")).json() == {"A": 90, "B": 10, "C": 50, "D": 0}
