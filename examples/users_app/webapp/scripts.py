"""The model the tests and the evaluation use offline, standing for the real one (`LLM_DO_MODEL` in production)."""

from __future__ import annotations

from typing import Any

from llm_do.testing import Turn, tool_call


def deactivating(turn: Turn) -> Any:
    """A scripted model: find the user the person's latest message names, deactivate them, say so."""
    if turn.steps_since_prompt == 0:
        return tool_call("find_user", email=turn.latest_prompt.rsplit(" ", 1)[-1])
    if turn.steps_since_prompt == 1:
        found = str(turn.returned("find_user"))
        return tool_call("deactivate_user", user_id=int(found.split()[1])) if found.startswith("user ") else found
    done = str(turn.returned("deactivate_user"))
    return "I did not deactivate them: that was refused." if "was not run" in done else done
