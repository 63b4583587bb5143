"""`DynamicAgents`: a model makes an agent (its instructions, some of its own toolsets) and calls it.

A made agent lives in its run: any call of the run can call it, and nothing of it outlives the run; made with
`keep="session"`, it lives in the run's session instead: the session's later runs can call it, no other session
can, and it is forgotten when the session closes. It is never written anywhere. It may use only toolsets its maker
has, each gated by its own approval policy; its calls are children in the call tree,
under the depth limit, counted in the run's usage, streamed and traced like any entry's. Making an agent asks
first, as in the earlier llm-do; calling one does not (its tools are gated by their own policies, and a call of an
entry by the entry's). A policy declared for the toolset's name decides instead, as for any tool; its
`attachments` decision decides the `agent_call`s that hand over files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar, Literal, Protocol

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.toolsets import ToolsetTool
from pydantic_core import to_json

from .. import ApprovalDenied, ToolPolicy, Toolset, tool
from ..errors import ToolsetError, listing
from ..files import TAKES_ATTACHMENTS
from ..toolkit import UnknownAgent

__all__ = ["DynamicAgents"]


class _Maker(Protocol):
    """What the toolset needs of the call it serves (llm-do's `CallScope`, its tools' `ctx.deps`)."""

    def make_agent(
        self,
        name: str,
        instructions: str,
        *,
        toolsets: Sequence[str] = (),
        description: str | None = None,
        keep: Literal["run", "session"] = "run",
    ) -> Any: ...
    async def call_agent(self, name: str, input_data: Any, *, attachments: Sequence[str] = ()) -> Any: ...


class DynamicAgents(Toolset):
    """Make an agent for this run, then call it (the earlier llm-do's `agent_create` and `agent_call`).

    Making an agent asks; calling one runs without asking, as calls to any agent do: a made agent's tools are
    gated by their own policies. Declare a policy for the toolset's name to decide otherwise."""

    default_policy: ClassVar[ToolPolicy | None] = ToolPolicy(tools={"agent_create": "ask"})
    """`agent_create` asks, as it did in the earlier llm-do; `agent_call` runs without asking: a made agent's tools
    are gated by their own toolsets' policies, and a call of an entry as the caller's call of its tool would be. A
    policy declared for the toolset's name replaces this one (`attachments: ask` to ask before calls that hand
    over files)."""

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The tools, with `agent_call` declared to hand over files (its `attachments`), as an entry's call does:
        a policy's `attachments` decision applies to it, and an approver is shown the files."""
        tools = await super().get_tools(ctx)
        calling = tools["agent_call"]
        metadata = {**(calling.tool_def.metadata or {}), TAKES_ATTACHMENTS: True}
        tools["agent_call"] = replace(calling, tool_def=replace(calling.tool_def, metadata=metadata))
        return tools

    @tool(thread=False)  # quick, and changes the run's own state (its made agents), which the loop reads
    def agent_create(
        self,
        ctx: RunContext[Any],
        name: str,
        instructions: str,
        description: str = "",
        toolsets: list[str] | None = None,
        model: str | None = None,
        keep: Literal["run", "session"] = "run",
    ) -> str:
        """Make an agent that lives for this run: `instructions` say what it does; `toolsets` are names of toolsets
        you have that it may use (none by default). It runs with your model. Call it with agent_call. With
        keep="session" it lives for the rest of this conversation instead: later requests can call it too."""
        try:
            _maker(ctx).make_agent(
                name, instructions, toolsets=toolsets or (), description=description or None, keep=keep
            )
        except ToolsetError as error:
            raise ToolFailed(str(error)) from None
        given = listing(toolsets or (), ordered=False)
        ignored = f" It runs with your model, not {model!r}." if model else ""
        kept = " It is kept for this conversation." if keep == "session" else ""
        return (
            f"Made agent {name!r} (toolsets: {given}).{ignored}{kept} "
            f"Call it with agent_call(agent={name!r}, input=...)."
        )

    @tool
    async def agent_call(
        self, ctx: RunContext[Any], agent: str, input: str, attachments: list[str] | None = None
    ) -> str:
        """Give `agent` (one you made, or an entry of the project) a task, and return its answer; `attachments` are
        names of files to hand it."""
        try:
            output = await _maker(ctx).call_agent(agent, input, attachments=attachments or ())
        except UnknownAgent as error:
            raise ToolFailed(
                f"{error}, or make it first: agent_create(name={error.name!r}, instructions=...), then call it"
            ) from None
        except (ToolsetError, ApprovalDenied) as error:
            raise ToolFailed(str(error)) from None
        return output if isinstance(output, str) else to_json(output, fallback=str).decode()


def _maker(ctx: RunContext[Any]) -> _Maker:
    maker = ctx.deps
    if not callable(getattr(maker, "make_agent", None)):
        raise ToolFailed("dynamic agents work only in an llm-do call (its CallScope is the agent's deps)")
    result: _Maker = maker
    return result
