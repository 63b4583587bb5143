"""`CallFacts`: one gated tool call, as approvals decide it, worked out once where the call enters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._policy import PolicySettings, ToolPolicy

if TYPE_CHECKING:
    from ..files._attachments import Attachment

READ_ONLY = "read_only"
"""The key of a tool's metadata (pydantic-ai's `ToolDefinition.metadata`) that declares it read-only when True:
`@tool(read_only=True)` sets it, and a `FunctionToolset`'s tool takes `metadata={"read_only": True}`. Without a
declared policy, a read-only tool runs without asking; any other asks (`approval_default`)."""

AGENT_CALL = "llm_do.agent_call"
"""The key of a tool's metadata that marks a call to an entry (an agent called as a tool): without a declared
policy it runs without asking, since the called agent's own tools are gated by theirs."""


@dataclass(frozen=True, slots=True)
class ToolTraits:
    """What a tool declares about itself that approvals read: known at load for `Toolset` classes and
    `FunctionToolset`s, from each call's tool definition otherwise."""

    read_only: bool = False
    """Declared read-only (`@tool(read_only=True)`, or `metadata={"read_only": True}`)."""
    requires_approval: bool = False
    """Declared `requires_approval=True`: it asks at least."""
    agent: bool = False
    """A call to an entry (agent-as-tool)."""

    @classmethod
    def of(cls, metadata: Mapping[str, Any] | None, *, requires_approval: bool = False) -> ToolTraits:
        """The traits a tool's metadata declares."""
        if not metadata:
            return _PLAIN if not requires_approval else cls(requires_approval=True)
        return cls(metadata.get(READ_ONLY) is True, requires_approval, metadata.get(AGENT_CALL) is True)


_PLAIN = ToolTraits()


@dataclass(frozen=True, slots=True)
class NameRules:
    """The approval rules of one toolset name, worked out once when the runtime loads (`Approvals.rules`) and
    carried with each use of the toolset, so that a call reads them instead of looking its name up again."""

    name: str
    declared: bool
    """A policy is declared for the name (not only a settings override): its tools' own declarations (read-only,
    MCP annotations) are not read."""
    may_gate: bool
    """Something other than the tool itself (a declared policy, an override, `approval_default`) can ask for or deny
    a call to one of its tools."""
    safe_runs: bool
    """A tool declared safe (read-only, an agent) runs with nothing to decide: no policy is declared for the name,
    and no override applies to it."""
    policy: ToolPolicy
    """Its policy, overrides included; for a name without a declared one, the policy of its tools nobody declared
    safe (`approval_default`)."""
    override: PolicySettings | None
    """The settings override of the name (`LLM_DO_APPROVAL_POLICIES`), if any."""


@dataclass(frozen=True, slots=True)
class CallFacts:
    """A call to tool `tool` of a toolset (its name's `rules`): what its policy, its approver and its gate need."""

    rules: NameRules
    """The approval rules of the toolset's name."""
    tool: str
    args: Mapping[str, Any]
    """The arguments policies and approvers see (an empty list of attachments is left out)."""
    call_id: str
    """What the call is known by in its llm-do call: the model's tool call id, `direct_<n>` for
    `CallScope.call_tool`, `python:<toolset>.<tool>#<n>` for `CallScope.call_agent`."""
    tool_call: bool = True
    """Whether `call_id` names a pydantic-ai tool call (not so for `call_agent`): its question names it, and the
    tool may ask for approval itself."""
    traits: ToolTraits = _PLAIN
    """What the tool declares about itself: read-only, `requires_approval`, a call to an entry."""
    annotations: Mapping[str, Any] | None = None
    """An MCP tool's annotations (`{}` when it has none), when they decide: no policy is declared for its toolset."""
    attachments: Sequence[str] = ()
    """Names of the files the call hands over."""
    shown: tuple[Attachment, ...] | None = None
    """Those files already read (a call made from Python), shown to the approver whatever the verdict; None: they
    are read when an approver is asked."""
    approved: bool = False
    """pydantic-ai runs the call approved (`RunContext.tool_call_approved`): by the gate's capability, or another."""
    direct: bool = False
    """Made from Python: decided in place, and a denial raises `ApprovalDenied` (there is no model to tell)."""
    asked: bool = False
    """The tool asked for approval itself (it raised `ApprovalRequired`): no policy is evaluated."""

    @property
    def toolset(self) -> str:
        """The toolset's name, as the call's question and its policy name it."""
        return self.rules.name
