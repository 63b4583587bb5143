"""Parking rounds: how many times in a row a parked job's resumed run went live before its question, and asked again.

Tools run again when a parked job resumes. One whose result changes on every run (a clock, a random number, a
counter) makes the next request differ from the journaled one: the call goes live before the question, the model is
asked again, and its question (a new one, or the same one with other arguments) parks the job again, forever. So
each question a run stores carries its round: 0 when the run went live only where the journal ended, one more than
the round of the job's latest question when a resumed run diverged from its journal. A run whose round would pass
`LLM_DO_JOBS_PARKING_ROUNDS` raises `ParkingDiverged` instead of parking: the job fails, naming the tools whose
results changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg_pool import AsyncConnectionPool

from ..errors import LlmDoError
from ..models.journal import WentLive

__all__ = ["ParkingDiverged", "diverged", "last_round", "next_round"]

_LAST = """
SELECT park_round FROM llm_do_approvals WHERE queue = %s AND job_id = %s ORDER BY asked_at DESC, park_round DESC LIMIT 1
"""


class ParkingDiverged(LlmDoError):
    """A parked job's resumed runs diverged from its journal before reaching their question, and asked again, more
    times in a row than `LLM_DO_JOBS_PARKING_ROUNDS` allows: a tool before the question returns something else on
    every run. The job fails (never retried by its entry's rule)."""

    def __init__(self, job_id: int, rounds: int, points: Sequence[WentLive]) -> None:
        self.job_id = job_id
        self.rounds = rounds
        self.points = tuple(points)
        tools = sorted({tool for point in points for tool in point.tools})
        where = "; ".join(f"call {point.call}, request {point.position}" for point in points)
        if tools:
            what = f"the result of tool {', '.join(map(repr, tools))} changed since the journaled run ({where})"
        else:
            what = f"a request differed from the journaled one, though no tool result it shows did ({where}): its "
            what += "prompt, instructions, tools or model settings changed"
        super().__init__(
            f"job {job_id} went live before its question and asked again {rounds} times in a row "
            f"(LLM_DO_JOBS_PARKING_ROUNDS allows {rounds - 1}): {what}. Make the tool stable: keep its result under "
            "the job's id and the tool call's id and return the kept one when the job runs again, or pass the value "
            "in the job's input (see docs/jobs.md, 'A tool that changes on every run')"
        )


def diverged(live_from: Sequence[WentLive]) -> list[WentLive]:
    """Where the run stopped replaying because a request differed from the journaled one."""
    return [point for point in live_from if point.reason == "differs"]


def next_round(last: int, resumed: bool, points: Sequence[WentLive]) -> int:
    """The round of a question a run asks: one more than the job's `last` when the run resumed a parked job (it had
    decisions) and diverged from its journal, else 0."""
    return last + 1 if resumed and points else 0


async def last_round(pool: AsyncConnectionPool[Any], queue: str, job_id: int) -> int:
    """The round of the job's latest question (0 when it has none)."""
    async with pool.connection() as conn:
        found = await (await conn.execute(_LAST, (queue, job_id))).fetchone()
    return 0 if found is None else int(found[0])
