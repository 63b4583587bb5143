"""`Approvals`: a runtime's rules for tool calls, and the decision for one call.

The policies by toolset name (declared, merged, overridden by settings, checked against the toolsets), what
an MCP tool's annotations decide when no policy is declared, the mode, the default approver and the time an
answer may take; `decide` applies them to one call, asking the approver at most once. A call scope's gate
(`llm_do.run`) calls it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any, get_args

from ..errors import ConfigurationError, listing
from ._facts import CallFacts, NameRules, ToolTraits
from ._grants import Grants, session_key
from ._policy import ApprovalMode, ApprovalOnDeny, Decision, PolicySettings, ToolPolicy, Verdict
from ._requests import Approval, ApprovalRequest, ApprovalUnavailable, Approver, ask_within, check_approver, parks

_MODES: tuple[str, ...] = get_args(ApprovalMode)
_ON_DENY: tuple[str, ...] = get_args(ApprovalOnDeny)
_DECISIONS: tuple[str, ...] = get_args(Decision)
_OPEN = ToolPolicy()


NATIVE_TOOL_NOT_GATED = "it runs at the model's provider, inside the model's request, so no approval policy can gate it"
"""Why a policy cannot name a native tool (web search, code execution, ...)."""


def _refuse_native_tool(name: str) -> None:
    """A policy naming a native tool (`web_search`, ...) that is no toolset here: say why it cannot apply."""
    from pydantic_ai.native_tools import NATIVE_TOOL_TYPES

    if name in NATIVE_TOOL_TYPES:
        raise ConfigurationError(
            f"an approval policy names {name!r}, a native tool: {NATIVE_TOOL_NOT_GATED}; remove the policy "
            "(to gate what it does, use a toolset of your own instead)"
        )


def _merge(
    declared: Iterable[Mapping[str, ToolPolicy]], overrides: Mapping[str, PolicySettings]
) -> dict[str, ToolPolicy]:
    merged: dict[str, ToolPolicy] = {}
    for policies in declared:
        for name, policy in policies.items():
            if not isinstance(policy, ToolPolicy):
                raise ConfigurationError(
                    f"the approval policy for toolset {name!r} is a {type(policy).__qualname__}; "
                    "declare it as llm_do.ToolPolicy(default=..., tools={...}, rule=...)"
                )
            merged[name] = policy
    for name, override in overrides.items():
        merged[name] = merged.get(name, _OPEN).overridden(override)
    return merged


def _check_names(
    policies: Mapping[str, ToolPolicy],
    known: Collection[str],
    tools_of: Callable[[str], frozenset[str] | None],
    listed: Collection[str],
) -> None:
    """Refuse a policy that names no known toolset, or tools its toolset does not have (when known)."""
    for name, policy in policies.items():
        if name not in known:
            _refuse_native_tool(name)
            raise ConfigurationError(
                f"an approval policy names toolset {name!r}, which is neither a provider of the container, "
                f"a runtime toolset, nor an entry (known: {listing(listed)}); fix the name "
                "so the policy applies (names from LLM_DO_APPROVAL_POLICIES__NAME__... are lowercased)"
            )
        tools = tools_of(name)
        unknown = sorted(set(policy.tools) - tools) if tools is not None else []
        if unknown:
            raise ConfigurationError(
                f"the approval policy of toolset {name!r} names tool(s) {', '.join(map(repr, unknown))}, "
                f"which it does not have (its tools: {listing(tools or ())}); fix the tool names"
            )


class Approvals:
    """A runtime's approval rules: policies by toolset name, the mode, the default approver, the time limit.

    The `declared` policies are merged (later ones replace earlier ones per name), the settings
    `overrides` applied on top, and each checked to name a `known` toolset and tools it has (`tools_of`); an
    error lists the `listed` names (the toolsets among the known names; all of them by default).
    """

    def __init__(
        self,
        declared: Sequence[Mapping[str, ToolPolicy]],
        overrides: Mapping[str, PolicySettings],
        *,
        known: Collection[str],
        tools_of: Callable[[str], frozenset[str] | None],
        mode: ApprovalMode,
        on_deny: ApprovalOnDeny,
        approver: Approver | None,
        timeout: float,
        undeclared: Decision = "ask",
        listed: Collection[str] | None = None,
    ) -> None:
        self._overrides = {
            name: item if isinstance(item, PolicySettings) else PolicySettings.model_validate(item)
            for name, item in overrides.items()
        }
        merged = _merge(declared, self._overrides)
        _check_names(merged, known, tools_of, known if listed is None else listed)
        if mode not in _MODES:
            raise ConfigurationError(f"approval_mode must be one of {', '.join(map(repr, _MODES))}, got {mode!r}")
        if on_deny not in _ON_DENY:
            raise ConfigurationError(
                f"approval_on_deny must be one of {', '.join(map(repr, _ON_DENY))}, got {on_deny!r}"
            )
        check_approver(approver)
        if undeclared not in _DECISIONS:
            raise ConfigurationError(
                f"approval_default must be one of {', '.join(map(repr, _DECISIONS))}, got {undeclared!r}"
            )
        self._declared = frozenset(name for policies in declared for name in policies)
        """Names with a declared policy (not only a settings override): their tools' own declarations (read-only,
        MCP annotations) are not read."""
        self.undeclared: Decision = undeclared
        """What a call gets to a tool that nobody declared safe: no declared policy for its toolset, and the tool
        is neither declared read-only, nor an agent, nor an MCP tool (whose annotations decide)."""
        self._unsafe = ToolPolicy(default=undeclared)
        for name in merged:
            if name not in self._declared:  # a settings override of a name without a declared policy
                merged[name] = self._unsafe.overridden(self._overrides[name])
        self.policies: Mapping[str, ToolPolicy] = MappingProxyType(merged)
        self.gating = frozenset(
            {name for name, policy in merged.items() if policy.may_gate and name in self._declared}
            | {name for name in self._overrides if name not in self._declared}
        )
        """The toolset names whose calls a declared policy or a settings override can ask for or deny (see
        `may_gate` for the names without either)."""
        self.mode = mode
        self.on_deny = on_deny
        self.approver = approver
        """The runtime's approver: asked when neither the run nor its session has one."""
        self.timeout = timeout
        """Seconds an approver may take to answer before the call is denied."""
        self.stopped: str | None = None
        """Why questions are no longer asked (`stop_asking`); None while they are."""
        self._asking: set[Callable[[], None]] = set()
        """The deadlines of the questions waiting for an answer."""
        self._rules = {name: self._rules_of(name) for name in known}
        """Each known toolset name's rules, worked out once."""

    def rules(self, toolset: str) -> NameRules:
        """The approval rules of a toolset name: what is declared and overridden for it, worked out once."""
        rules = self._rules.get(toolset)
        if rules is None:
            rules = self._rules[toolset] = self._rules_of(toolset)
        return rules

    def _rules_of(self, toolset: str) -> NameRules:
        declared = toolset in self._declared
        override = self._overrides.get(toolset)
        return NameRules(
            name=toolset,
            declared=declared,
            may_gate=toolset in self.gating or (self.undeclared != "allow" and not declared),
            safe_runs=not declared and override is None,
            policy=self.policies.get(toolset, self._unsafe),
            override=override,
        )

    def stop_asking(self, reason: str) -> int:
        """Deny every question waiting for an answer now, and every later one at once, with `reason` (which the
        model reads, as for any denial): a process about to stop. How many were waiting."""
        self.stopped = reason
        waiting = list(self._asking)
        for deadline in waiting:
            deadline()
        return len(waiting)

    def may_gate(self, toolset: str) -> bool:
        """Whether something other than the tool itself can ask for or deny a call to a toolset name."""
        return self.rules(toolset).may_gate

    def declared(self, toolset: str) -> bool:
        """Whether a policy is declared for a toolset name (a class's `default_policy`, the container's
        `approval_policies`, `Runtime(policies=)`), rather than only overridden by settings or by nobody."""
        return self.rules(toolset).declared

    def safe_runs(self, toolset: str) -> bool:
        """Whether a call to a tool declared safe (read-only, an agent) of this toolset runs with nothing to
        decide: no policy is declared for the name and no override applies to it."""
        return self.rules(toolset).safe_runs

    def policy(self, toolset: str) -> ToolPolicy:
        """The policy of a toolset name, overrides included. For a name without a declared one, the policy of its
        tools nobody declared safe (`approval_default`); its read-only tools, agents and MCP tools are decided
        by what they declare (see `verdict`)."""
        return self.rules(toolset).policy

    async def evaluate(self, call: CallFacts) -> Verdict:
        """The verdict for one call: its verdict before any rule, then the declared policy's rule (a toolset
        without a declared policy has none)."""
        carries, rules, traits = bool(call.attachments), call.rules, call.traits
        if rules.declared:
            return await rules.policy.evaluate(
                rules.name, call.tool, call.args, requires_approval=traits.requires_approval, attachments=carries
            )
        return self._undeclared(rules, call.tool, traits, call.annotations, carries)

    def verdict(
        self,
        toolset: str,
        tool: str,
        *,
        requires_approval: bool = False,
        annotations: Mapping[str, Any] | None = None,
        attachments: bool = False,
        traits: ToolTraits | None = None,
    ) -> Verdict:
        """The verdict for a call before any rule sees its arguments. `traits` are what the tool declares
        (`requires_approval` adds to them). Without a declared policy for the toolset: an MCP tool
        (`annotations` is its annotations, `{}` when it has none) is allowed when annotated `readOnlyHint`
        and asked for otherwise; a tool declared read-only, or an agent, is allowed; any other tool gets
        `approval_default` (`ask` unless set otherwise). Settings overrides for the toolset apply on top."""
        if traits is None:
            traits = ToolTraits.of(None, requires_approval=requires_approval)
        elif requires_approval and not traits.requires_approval:
            traits = replace(traits, requires_approval=True)
        rules = self.rules(toolset)
        if rules.declared:
            return rules.policy.static_verdict(
                toolset, tool, requires_approval=traits.requires_approval, attachments=attachments
            )
        return self._undeclared(rules, tool, traits, annotations, attachments)

    def _undeclared(
        self,
        rules: NameRules,
        tool: str,
        traits: ToolTraits,
        annotations: Mapping[str, Any] | None,
        attachments: bool,
    ) -> Verdict:
        """The verdict for a call to a tool of a toolset without a declared policy (see `verdict`)."""
        toolset, override = rules.name, rules.override
        requires_approval = traits.requires_approval
        if annotations is not None:
            read_only = annotations.get("readOnlyHint") is True
            if read_only and override is None and not requires_approval and not attachments:
                return _READ_ONLY_VERDICT  # the common case, decided without building anything
            base = _READ_ONLY if read_only else _UNMARKED
            why = f"MCP tool {tool!r} of toolset {toolset!r}: {_hinted(annotations)}"
        elif traits.read_only or traits.agent:
            base = _READ_ONLY
            why = (
                f"tool {tool!r} is declared read-only"
                if traits.read_only
                else f"{tool!r} is an agent: its own tools are gated by their policies"
            )
        else:
            base = self._unsafe
            why = (
                f"tool {tool!r} of toolset {toolset!r} is not declared read-only, and no approval policy is "
                f"declared for the toolset (approval_default is {self.undeclared!r})"
            )
        policy = base if override is None else base.overridden(override)
        verdict = policy.static_verdict(toolset, tool, requires_approval=requires_approval, attachments=attachments)
        by_base = override is None or (tool not in override.tools and override.default is None)
        if by_base and verdict.decision == base.default and not requires_approval:
            verdict = Verdict(verdict.decision, why)
        return verdict

    def can_ask(self, toolset: str, traits: Mapping[str, ToolTraits] | None) -> bool:
        """Whether a call to a tool of toolset `toolset` is known to be able to get the verdict `ask` (in `prompt`
        mode, a question for an approver): the verdict of one of its tools (`traits`, what each declares, with files
        for an agent), or a declared rule, which can always say `ask`. When its tools are known only once it is
        built (`traits` None: a plain factory, an MCP server), only what is declared or overridden for its name
        counts: without either, its tools decide (read-only, annotations), which is not known here."""
        if toolset in self._declared and self.policies[toolset].rule is not None:
            return True
        if traits is None:
            said = self.policies[toolset] if toolset in self._declared else self._overrides.get(toolset)
            return said is not None and "ask" in (said.default, said.attachments, *said.tools.values())
        return any(
            self.verdict(toolset, tool, traits=declared, attachments=carries).decision == "ask"
            for tool, declared in traits.items()
            for carries in ((False, True) if declared.agent else (False,))
        )

    def asks(self, verdict: Verdict) -> bool:
        """Whether `decide` puts this verdict's call to an approver (or the session's grants), rather than
        deciding it by the verdict (`allow`, `deny`) or by the mode (`approve_all`, `reject_all`)."""
        return verdict.decision == "ask" and self.mode == "prompt"

    @staticmethod
    def granted(request: ApprovalRequest, grants: Grants) -> bool:
        """Whether the session approved this very call already (the same toolset, tool, arguments and files):
        `decide` lets it run without asking anyone."""
        return session_key(request.toolset, request.tool, request.args, request.attachments) in grants.granted

    async def decide(
        self, request: ApprovalRequest, verdict: Verdict, *, approver: Approver | None, grants: Grants
    ) -> str | None:
        """None when the call may run, else why it is denied. Asks `approver` at most once per call.

        Only an identical question pending in the same session waits (for that one's answer, which
        may approve it for the session); nothing else does.
        """
        if verdict.decision == "deny":
            return f"denied by policy ({verdict.reason})"
        if verdict.decision == "allow":
            return None
        if self.mode == "approve_all":
            return None
        if self.mode == "reject_all":
            return f"it needs approval ({verdict.reason}) and approval_mode is 'reject_all'"
        if self.stopped is not None and not parks(approver):
            return f"no one can answer it now: {self.stopped}"
        if approver is None:
            raise ApprovalUnavailable(request)
        key = session_key(request.toolset, request.tool, request.args, request.attachments)
        pending = grants.pending
        while True:
            if key in grants.granted:
                return None
            twin = pending.get(key)
            if twin is None:
                break
            await asyncio.shield(twin)  # its answer may approve this call for the session too
        mine = pending[key] = asyncio.get_running_loop().create_future()
        answer: Approval | None = None
        try:
            answer = await ask_within(approver, request, self.timeout, self._asking)
            if answer is not None and answer.choice == "approve_for_session":
                grants.granted.add(key)
        finally:
            del pending[key]
            mine.set_result(answer)
        if answer is None and self.stopped is not None:
            return f"no one can answer it now: {self.stopped}"
        if answer is None:
            return f"no answer came within {self.timeout:g}s (LLM_DO_APPROVAL_TIMEOUT)"
        if answer.choice == "deny":
            return "the approver denied it" + (f": {answer.note}" if answer.note else "")
        return None


def _hinted(annotations: Mapping[str, Any]) -> str:
    if annotations.get("readOnlyHint") is True:
        return "it is annotated readOnlyHint"
    if annotations.get("destructiveHint") is True:
        return "it is annotated destructiveHint"
    return "it is not annotated readOnlyHint"


_READ_ONLY = ToolPolicy(default="allow")
_READ_ONLY_VERDICT = Verdict("allow", "the MCP tool is annotated readOnlyHint")
_UNMARKED = ToolPolicy(default="ask")
