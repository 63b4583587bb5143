"""The orchestrator: a code entry that asks two workers at once and puts their answers together."""

from __future__ import annotations

import asyncio

from llm_do import CallScope, entry


@entry(toolsets=["researcher", "critic"])
async def review(scope: CallScope, proposal: str) -> str:
    """Asks the researcher and the critic about a proposal in parallel, then writes a short review."""
    benefits, risks = await asyncio.gather(
        scope.call_agent("researcher", proposal),
        scope.call_agent("critic", proposal),
    )
    return f"Review of: {proposal}\n\nFor: {benefits}\nAgainst: {risks}"
