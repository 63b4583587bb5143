"""Agents made in a run (`CallScope.make_agent`): the rules a made agent is held to, and where it is kept: in
its run (`keep="run"`), or in the run's session for the session's later runs (`keep="session"`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ToolsetError, listing
from ._entry import CallHost, Entry, EntryPlan

if TYPE_CHECKING:
    from ._run_scope import RunScope

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
    built: Mapping[str, object],
    run: RunScope,
    name: str,
    instructions: str,
    toolsets: Sequence[str],
    description: str | None,
    keep: Keep = "run",
) -> Entry:
    """Make the agent `name` for `run`, kept by the run (`keep="run"`) or by its session (`"session"`; a run of no
    session is a session of its own): a tool name not taken by an entry or another made agent of the run or its
    session, using only toolsets of `creator` (whose call's plan is `plan`, its toolsets `built`), at most `MAX_MADE`
    in its keeper. Its calls of entries are gated as its maker's are (see `EntryPlan.agent_gates`)."""
    if keep not in KEEPS:
        raise ToolsetError(f"keep must be one of {', '.join(KEEPS)}, got {keep!r}")
    _, kept = _keepers(run)
    by_session = keep == "session" and run.session is not None
    made, taken, keeper = (kept, run.made, "session") if by_session else (run.made, kept, "run")
    if not _NAME.fullmatch(name):
        raise ToolsetError(f"an agent's name must be letters, digits, '_' or '-' (at most 64), got {name!r}")
    limit = host.config.made_agent_max_instructions_bytes
    if len(instructions) > limit // 4 and (size := len(instructions.encode())) > limit:  # each char <= 4 bytes
        raise ToolsetError(
            f"the instructions are {size} bytes, over the limit of {limit} bytes for an agent made in a run "
            "(LLM_DO_MADE_AGENT_MAX_INSTRUCTIONS_BYTES): they go with each of its requests; write shorter ones"
        )
    if name in made or name in taken or name in host.entries:
        raise ToolsetError(
            f"the name {name!r} is taken (an entry, or an agent made in this run or kept by its session): "
            "choose another"
        )
    if len(made) >= MAX_MADE:
        raise ToolsetError(
            f"this {keeper} keeps {MAX_MADE} made agents, the most a {keeper} may keep: call one of them"
        )
    uses = {use.name: use for use in plan.uses}
    refused = [toolset for toolset in toolsets if toolset not in uses]
    if refused:
        raise ToolsetError(
            f"an agent made by {creator.name!r} may use only its toolsets ({listing(uses, ordered=False)}), "
            f"not {listing(refused, ordered=False)}"
        )
    entry = host.made_entry(creator, name, instructions, toolsets, description)
    gates = plan.gates_with(built, host.entries)
    made[name] = (entry, EntryPlan.of(tuple(uses[toolset] for toolset in dict.fromkeys(toolsets)), gates))
    return entry


def made_target(run: RunScope, name: str) -> tuple[Entry, EntryPlan] | None:
    """The agent `name` made in `run` or kept by its session, with its plan; None when there is none."""
    for made in _keepers(run):
        if name in made:
            found: tuple[Entry, EntryPlan] = made[name]
            return found
    return None


def made_names(run: RunScope) -> list[str]:
    """The names of the agents made in `run` and kept by its session."""
    return [name for made in _keepers(run) for name in made]


def _keepers(run: RunScope) -> tuple[dict[str, Any], dict[str, Any]]:
    """The agents made in `run`, and those its session keeps (none for a run of no session)."""
    return run.made, run.session.made if run.session is not None else {}
