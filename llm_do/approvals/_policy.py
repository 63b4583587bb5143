"""Approval policies: whether a call to a tool of a named toolset runs, needs approval, or is refused."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal, TypeAlias, get_args

from pydantic import BaseModel, ConfigDict

logger = logging.getLogger("llm_do")

ApprovalMode: TypeAlias = Literal["prompt", "approve_all", "reject_all"]
"""`prompt` asks the approver; `approve_all` and `reject_all` decide every call that asks, without asking."""
ApprovalOnDeny: TypeAlias = Literal["tell_model", "raise"]
"""What a denied call does: the model reads the denial as the tool's result, or `ApprovalDenied` is raised."""

Decision: TypeAlias = Literal["allow", "ask", "deny"]
"""`allow` runs the call, `ask` needs an approval first, `deny` refuses it."""

_DECISIONS: tuple[str, ...] = get_args(Decision)
_RANK: dict[str, int] = {decision: rank for rank, decision in enumerate(_DECISIONS)}


@dataclass(frozen=True, slots=True)
class Verdict:
    """A decision with the reason shown to the approver, the model and the logs."""

    decision: Decision
    reason: str | None = None

    def __post_init__(self) -> None:
        _check_decision(self.decision, "Verdict.decision")


Rule: TypeAlias = Callable[
    [str, Mapping[str, Any]],
    Verdict | Decision | Awaitable[Verdict | Decision | None] | None,
]
"""`rule(tool_name, args)`: a verdict for one call, or None for no opinion. May be async."""


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """How calls to the tools of one toolset name are decided.

    The static decision is `tools[tool]`, else `default`. A tool declared with
    `requires_approval=True` asks at least. `attachments` decides calls that carry attachments
    (files handed to an agent), on top of the rest; calls without any are not affected. The
    optional `rule` sees the tool name and the validated arguments. The strictest of these wins
    (deny > ask > allow), so a rule or a settings override can tighten a policy but never loosen
    what another part decided.
    A rule that raises denies the call; the error is logged on the `llm_do` logger.
    """

    default: Decision = "allow"
    tools: Mapping[str, Decision] = field(default_factory=dict)
    rule: Rule | None = None
    attachments: Decision | None = None

    def __post_init__(self) -> None:
        _check_decision(self.default, "ToolPolicy.default")
        if self.attachments is not None:
            _check_decision(self.attachments, "ToolPolicy.attachments")
        for tool, decision in self.tools.items():
            _check_decision(decision, f"ToolPolicy.tools[{tool!r}]")
        object.__setattr__(self, "tools", MappingProxyType(dict(self.tools)))

    @property
    def may_gate(self) -> bool:
        """Whether this policy can ask or deny a call (a tool's own `requires_approval` aside)."""
        return (
            self.default != "allow"
            or self.rule is not None
            or self.attachments not in (None, "allow")
            or any(d != "allow" for d in self.tools.values())
        )

    def overridden(self, settings: PolicySettings) -> ToolPolicy:
        """This policy with the default, per-tool and attachments decisions of `settings` on top; the rule stays."""
        default = settings.default if settings.default is not None else self.default
        attachments = settings.attachments if settings.attachments is not None else self.attachments
        return replace(self, default=default, tools={**self.tools, **settings.tools}, attachments=attachments)

    def static_verdict(self, toolset: str, tool: str, *, requires_approval: bool, attachments: bool = False) -> Verdict:
        """The verdict before the rule: the strictest of the static decision, the tool's own flag and the
        decision for calls carrying attachments (when this one does)."""
        if tool in self.tools:
            verdict = Verdict(self.tools[tool], f"toolset {toolset!r} policy: tool {tool!r} is {self.tools[tool]!r}")
        else:
            verdict = Verdict(self.default, f"toolset {toolset!r} policy: default is {self.default!r}")
        if requires_approval:
            verdict = _strictest(verdict, Verdict("ask", f"tool {tool!r} is declared with requires_approval=True"))
        if attachments and self.attachments is not None:
            reason = f"toolset {toolset!r} policy: calls that carry attachments are {self.attachments!r}"
            verdict = _strictest(verdict, Verdict(self.attachments, reason))
        return verdict

    async def evaluate(
        self, toolset: str, tool: str, args: Mapping[str, Any], *, requires_approval: bool, attachments: bool = False
    ) -> Verdict:
        """The verdict for one call: the strictest of the static decision, the tool's own flag, the decision
        for calls carrying attachments (when this one does) and the rule."""
        verdict = self.static_verdict(toolset, tool, requires_approval=requires_approval, attachments=attachments)
        if self.rule is not None:
            ruled = await _apply_rule(self.rule, toolset, tool, args)
            if ruled is not None:
                verdict = _strictest(verdict, ruled)
        return verdict


class PolicySettings(BaseModel):
    """A policy override read from settings (`LLM_DO_APPROVAL_POLICIES`); it cannot carry a rule."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default: Decision | None = None
    """Replaces the declared default when set."""
    tools: dict[str, Decision] = {}
    """Replace or add per-tool decisions."""
    attachments: Decision | None = None
    """Replaces the decision for calls that carry attachments when set."""

    def overridden(self, other: PolicySettings) -> PolicySettings:
        """This override with `other` on top: its default and attachments decisions, if set, and its per-tool
        decisions win."""
        default = other.default if other.default is not None else self.default
        attachments = other.attachments if other.attachments is not None else self.attachments
        return PolicySettings(default=default, tools={**self.tools, **other.tools}, attachments=attachments)


def _strictest(first: Verdict, then: Verdict) -> Verdict:
    """The stricter verdict (deny > ask > allow); a tie goes to `then`, the more specific one."""
    return first if _RANK[first.decision] > _RANK[then.decision] else then


async def _apply_rule(rule: Rule, toolset: str, tool: str, args: Mapping[str, Any]) -> Verdict | None:
    try:
        result: Any = rule(tool, MappingProxyType(dict(args)))
        if inspect.isawaitable(result):
            result = await result
        if result is None:
            return None
        if isinstance(result, Verdict):
            return result if result.reason else replace(result, reason=_said(toolset, result.decision))
        if isinstance(result, str) and result in _DECISIONS:
            return Verdict(result, _said(toolset, result))  # type: ignore[arg-type]
        raise TypeError(f"it returned {result!r}; return a Verdict, 'allow', 'ask', 'deny' or None")
    except Exception as error:
        logger.error(
            "approval rule of toolset %r failed for tool %r; the call is denied", toolset, tool, exc_info=error
        )
        # The reason reaches the model and the approver: the error's message (a server's address, a DSN, another
        # person's data) stays in the log.
        reason = f"the approval rule of toolset {toolset!r} failed ({type(error).__name__}; see the server's log)"
        return Verdict("deny", reason)


def _said(toolset: str, decision: str) -> str:
    return f"the approval rule of toolset {toolset!r} said {decision!r}"


def _check_decision(value: object, where: str) -> None:
    if value not in _DECISIONS:
        raise ValueError(f"{where} must be 'allow', 'ask' or 'deny', got {value!r}")
