"""The decision relay (llm_do.web.relay) between two relays, as two web processes would hold them, on a
real PostgreSQL: delivered, refused, undelivered, and through a dropped connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from llm_do import LlmDoError
from llm_do.web.relay import DecisionRefused, DecisionRelay, DecisionUndelivered

from ..postgres import PostgresServer


class Waiting:
    """A stand-in for a live run with pending approvals: takes a decision for one of them, refuses others."""

    def __init__(self, *pending: str) -> None:
        self.pending = set(pending)
        self.decided: list[tuple[str, str, str | None]] = []
        self.got = asyncio.Event()

    async def decide(self, approval_id: str, choice: str, note: str | None = None) -> None:
        if approval_id not in self.pending:
            raise LlmDoError(f"{approval_id!r} is not pending in this run; pending: {sorted(self.pending)}")
        self.pending.discard(approval_id)
        self.decided.append((approval_id, choice, note))
        self.got.set()


@pytest.fixture
async def relays(postgres: PostgresServer) -> AsyncIterator[tuple[DecisionRelay, DecisionRelay]]:
    """Two relays on one channel, as two web processes of one service."""
    dsn = postgres.dsn()
    async with (
        DecisionRelay(dsn, channel="test_relay", reply_timeout=1.0, reconnect_delay=0.1) as one,
        DecisionRelay(dsn, channel="test_relay", reply_timeout=1.0, reconnect_delay=0.1) as two,
    ):
        yield one, two


async def test_a_decision_reaches_the_process_that_holds_the_run(relays: tuple[DecisionRelay, DecisionRelay]) -> None:
    one, two = relays
    run = Waiting("apr_1")
    with two.hold("alice", run):
        await one.decide("alice", "apr_1", "approve_for_session", "fine")
    assert run.decided == [("apr_1", "approve_for_session", "fine")]


async def test_a_channel_name_too_long_to_be_answered_on_is_refused_when_the_relay_is_made(
    postgres: PostgresServer,
) -> None:
    """Longer, the holder applied the decision but could not answer on the sender's channel (63 bytes at
    most in PostgreSQL), and the sender was told that nobody held the run."""
    longest = "service_eu_west_production_decisions_channel_a"
    with pytest.raises(LlmDoError, match=r"channel '\w+' is 47 bytes long; use at most 46"):
        DecisionRelay(postgres.dsn(), channel=longest + "b")
    async with (
        DecisionRelay(postgres.dsn(), channel=longest, reply_timeout=1.0) as one,
        DecisionRelay(postgres.dsn(), channel=longest, reply_timeout=1.0) as two,
    ):
        run = Waiting("apr_1")
        with two.hold("alice", run):
            await one.decide("alice", "apr_1", "approve")
    assert run.decided == [("apr_1", "approve", None)]


async def test_a_decision_in_the_holding_process_is_applied_there(relays: tuple[DecisionRelay, DecisionRelay]) -> None:
    one, _ = relays
    run = Waiting("apr_1")
    with one.hold("alice", run):
        await one.decide("alice", "apr_1", "deny")
    assert run.decided == [("apr_1", "deny", None)]


async def test_an_approval_not_pending_in_that_session_is_refused(relays: tuple[DecisionRelay, DecisionRelay]) -> None:
    one, two = relays
    alice, bob = Waiting("apr_alice"), Waiting("apr_bob")
    refused = r"'apr_bob' is not pending in this run; pending: \['apr_alice'\]"
    with two.hold("alice", alice), two.hold("bob", bob), pytest.raises(DecisionRefused, match=refused):
        await one.decide("alice", "apr_bob", "approve")  # Bob's approval, through Alice's session
    assert alice.decided == [] and bob.decided == []


async def test_a_decision_nobody_holds_times_out_readably(relays: tuple[DecisionRelay, DecisionRelay]) -> None:
    one, _ = relays
    with pytest.raises(DecisionUndelivered, match=r"no process holds a live run of session 'carol'"):
        await one.decide("carol", "apr_1", "approve")


async def test_a_choice_that_is_none_of_the_three_is_refused_before_sending(
    relays: tuple[DecisionRelay, DecisionRelay],
) -> None:
    one, _ = relays
    with pytest.raises(LlmDoError, match="choose one of approve, approve_for_session, deny"):
        await one.decide("alice", "apr_1", "yes please")


async def _end_backends(dsn: str, relay_channel_owner: DecisionRelay) -> None:
    """End the listening connection's backend on the server's side, as a restart or a proxy would."""
    assert relay_channel_owner._conn is not None
    pid = relay_channel_owner._conn.get_server_pid()
    admin = await asyncpg.connect(dsn)
    try:
        await admin.execute("SELECT pg_terminate_backend($1)", pid)
    finally:
        await admin.close()


async def test_the_relay_reconnects_after_its_connection_drops(
    postgres: PostgresServer, relays: tuple[DecisionRelay, DecisionRelay]
) -> None:
    one, two = relays
    run = Waiting("apr_1", "apr_2")
    with two.hold("alice", run):
        await _end_backends(postgres.dsn(), two)  # the holder's listening connection
        for _ in range(200):
            if two.reconnects:
                break
            await asyncio.sleep(0.05)
        assert two.reconnects == 1 and two.connected
        await one.decide("alice", "apr_1", "approve")

        await _end_backends(postgres.dsn(), one)  # the sender's: while it is down, a decision says so
        for _ in range(200):
            if not one.connected:
                break
            await asyncio.sleep(0.01)
        with pytest.raises(DecisionUndelivered, match="connection to PostgreSQL is down"):
            await one.decide("alice", "apr_2", "approve")
        for _ in range(200):
            if one.connected:
                break
            await asyncio.sleep(0.05)
        await one.decide("alice", "apr_2", "deny")
    assert run.decided == [("apr_1", "approve", None), ("apr_2", "deny", None)]


async def test_a_decision_too_long_for_a_notify_payload_is_refused_before_sending(
    relays: tuple[DecisionRelay, DecisionRelay],
) -> None:
    one, two = relays
    run = Waiting("apr_1")
    with two.hold("x" * 9000, run), pytest.raises(LlmDoError, match=r"not sent: .* NOTIFY .*session 9002"):
        await one.decide("x" * 9000, "apr_1", "approve")  # a session id no NOTIFY payload can carry
    with two.hold("bob", run), pytest.raises(LlmDoError, match="longer than 2000 bytes"):
        await one.decide("bob", "apr_1", "deny", "\N{GRINNING FACE}" * 1000)  # 1000 characters, 4000 bytes
    assert run.decided == []
    with two.hold("bob", run):
        await one.decide("bob", "apr_1", "deny", "\N{GRINNING FACE}" * 400)
    assert run.decided == [("apr_1", "deny", "\N{GRINNING FACE}" * 400)]


async def test_a_refusal_quoting_a_long_approval_id_reaches_the_sender(
    relays: tuple[DecisionRelay, DecisionRelay],
) -> None:
    one, two = relays
    run = Waiting(*(f"apr_{number:02d}" for number in range(20)))
    with two.hold("alice", run), pytest.raises(DecisionRefused, match=r"^'aaaa.*\.\.\.$"):
        await one.decide("alice", "a" * 7800, "approve")  # fits in the request; quoted whole, not in the reply
    assert run.decided == []
