"""What a runtime's approvals decide before a call: the policy of a toolset name and the verdict of each tool
(what `llm-do list` and `check` show)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..approvals import ToolPolicy, ToolTraits, Verdict
from ..toolkit import known_tool_traits
from ._plan import Plan

__all__ = ["PolicyQueries"]


class PolicyQueries:
    """The approval queries of a `Runtime`, read from its plan."""

    _plan: Plan

    def policy(self, toolset: str) -> ToolPolicy:
        """The approval policy of toolset `toolset`, settings overrides included. A name without a declared
        policy gets the policy of its tools nobody declared safe (`approval_default`, `ask` unless set
        otherwise); its tools declared read-only, its agents and its MCP tools are decided by what they
        declare instead, with the overrides on top: `verdict` tells, tool by tool."""
        return self._plan.approvals.policy(toolset)

    def declares_policy(self, toolset: str) -> bool:
        """Whether a policy is declared for toolset `toolset` (its class's `default_policy`, the container's
        `approval_policies`, `Runtime(policies=)`): then it decides every tool, whatever the tools declare."""
        return self._plan.approvals.declared(toolset)

    def verdict(
        self,
        toolset: str,
        tool: str,
        *,
        requires_approval: bool = False,
        annotations: Mapping[str, Any] | None = None,
        read_only: bool = False,
        agent: bool = False,
    ) -> Verdict:
        """The verdict a call to `tool` of `toolset` gets before the policy's rule (if any) sees its arguments.
        For an MCP tool, pass its annotations (`{}` when it has none), and for a tool declared read-only,
        `read_only=True` (for a call to an entry, `agent=True`): without a declared policy they decide."""
        traits = ToolTraits(read_only=read_only, requires_approval=requires_approval, agent=agent)
        return self._plan.approvals.verdict(toolset, tool, annotations=annotations, traits=traits)

    def tool_verdicts(self, toolset: str) -> dict[str, Verdict] | None:
        """The verdict of each tool of toolset `toolset` before any rule, as a call gets it; None when its tools
        are only known once it is built (a plain factory, an MCP server: use `verdict` with each tool's
        annotations)."""
        approvals = self._plan.approvals
        traits = known_tool_traits(self._plan.provides(toolset))
        if traits is None:
            return None
        return {tool: approvals.verdict(toolset, tool, traits=declared) for tool, declared in traits.items()}
