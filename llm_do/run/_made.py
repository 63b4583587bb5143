"""Agents made in a run (`CallScope.make_agent`): the rules a made agent is held to, and where it is kept: in
its run (`keep="run"`), or in the run's session for the session's later runs (`keep="session"`)."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Any, Literal

from ..errors import ToolsetError, listing
from ._entry import CallHost, Entry, EntryPlan

__all__ = ["KEEPS", "MAX_MADE", "Keep", "make_agent"]

MAX_MADE = 32
"""The most agents one run may make (and one session keep)."""
Keep = Literal["run", "session"]
"""How long a made agent lives: its run, or its run's session (a run without a session is a session of its own)."""
KEEPS: tuple[Keep, ...] = ("run", "session")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")


def make_agent(
    host: CallHost,
    creator: Entry,
    plan: EntryPlan,
    made: dict[str, Any],
    name: str,
    instructions: str,
    toolsets: Sequence[str],
    description: str | None,
    *,
    taken: Collection[str] = (),
    kept_by: str = "run",
) -> Entry:
    """Make the agent `name` into `made` (the made agents of its run, or of its session: `kept_by`): a tool name
    not taken by an entry or another made agent (`taken`: those kept elsewhere), using only toolsets of `creator`
    (whose call's plan is `plan`), at most `MAX_MADE` in `made`."""
    if not _NAME.fullmatch(name):
        raise ToolsetError(f"an agent's name must be letters, digits, '_' or '-' (at most 64), got {name!r}")
    if name in made or name in taken or name in host.entries:
        raise ToolsetError(
            f"the name {name!r} is taken (an entry, or an agent made in this run or kept by its session): "
            "choose another"
        )
    if len(made) >= MAX_MADE:
        raise ToolsetError(
            f"this {kept_by} keeps {MAX_MADE} made agents, the most a {kept_by} may keep: call one of them"
        )
    uses = {use.name: use for use in plan.uses}
    refused = [toolset for toolset in toolsets if toolset not in uses]
    if refused:
        raise ToolsetError(
            f"an agent made by {creator.name!r} may use only its toolsets ({listing(uses, ordered=False)}), "
            f"not {listing(refused, ordered=False)}"
        )
    entry = host.made_entry(creator, name, instructions, toolsets, description)
    made[name] = (entry, EntryPlan.of(tuple(uses[toolset] for toolset in dict.fromkeys(toolsets))))
    return entry
