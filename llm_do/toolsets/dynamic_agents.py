"""`DynamicAgents`: a model makes an agent (its instructions, some of its own toolsets) and calls it.

A made agent lives in its run: any call of the run can call it, and nothing of it outlives the run. It may use
only toolsets its maker has, each gated by its own approval policy; its calls are children in the call tree,
under the depth limit, counted in the run's usage, streamed and traced like any entry's. Gate the making or the
calling by this toolset's policy (`create_agent`, `call_agent`), as any tool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed
from pydantic_core import to_json

from ..approvals import ApprovalDenied
from ..errors import ToolsetError, listing
from ..toolkit import Toolset, tool

__all__ = ["DynamicAgents"]


class _Maker(Protocol):
    """What the toolset needs of the call it serves (llm-do's `CallScope`, its tools' `ctx.deps`)."""

    def make_agent(
        self, name: str, instructions: str, *, toolsets: Sequence[str] = (), description: str | None = None
    ) -> Any: ...
    async def call_agent(self, name: str, input_data: Any) -> Any: ...


class DynamicAgents(Toolset):
    """Make an agent for this run, then call it."""

    @tool
    def create_agent(
        self,
        ctx: RunContext[Any],
        name: str,
        instructions: str,
        toolsets: list[str] | None = None,
        description: str = "",
    ) -> str:
        """Make an agent that lives for this run: `instructions` say what it does; `toolsets` are names of toolsets
        you have that it may use (none by default). Call it with call_agent."""
        try:
            _maker(ctx).make_agent(name, instructions, toolsets=toolsets or (), description=description or None)
        except ToolsetError as error:
            raise ToolFailed(str(error)) from None
        given = listing(toolsets or (), ordered=False)
        return f"made agent {name!r} (toolsets: {given}); call it with call_agent(name={name!r}, input=...)"

    @tool
    async def call_agent(self, ctx: RunContext[Any], name: str, input: str) -> str:
        """Give the agent `name` (one you made, or an entry of the project) a task, and return its answer."""
        try:
            output = await _maker(ctx).call_agent(name, input)
        except (ToolsetError, ApprovalDenied) as error:
            raise ToolFailed(str(error)) from None
        return output if isinstance(output, str) else to_json(output, fallback=str).decode()


def _maker(ctx: RunContext[Any]) -> _Maker:
    maker = ctx.deps
    if not callable(getattr(maker, "make_agent", None)):
        raise ToolFailed("dynamic agents work only in an llm-do call (its CallScope is the agent's deps)")
    result: _Maker = maker
    return result
