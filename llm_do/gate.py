"""Gates: apply the runtime's approvals to the toolsets one call scope lends out.

Built on pydantic-ai's own machinery. Every toolset a scope lends out is wrapped in an
`ApprovalToolset` keyed by its toolset name. A call its policy does not allow raises
`ApprovalRequired`; pydantic-ai collects the run's deferred calls (parallel ones in one batch)
and hands them to the `HandleDeferredToolCalls` capability that `AgentEntry` passes to
`Agent.run`, which answers each with `ToolApproved` (pydantic-ai re-runs the call) or
`ToolDenied` (the model reads the message). We own the per-call decision itself because
pydantic-ai's `ApprovalRequiredToolset` only answers "needs approval: yes or no"; a policy
also denies outright, gives reasons, and lets a rule see the arguments.
"""

from __future__ import annotations

import inspect
import itertools
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NoReturn

from pydantic_ai import RunContext
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset

from .approval import ApprovalRequest, Approvals, SessionKey, session_key
from .errors import ApprovalDenied
from .policy import Verdict

if TYPE_CHECKING:
    from .call import CallScope

__all__ = ["ApprovalToolset", "CallGate"]

_REQUIRES_APPROVAL = "llm_do.requires_approval"


@dataclass(frozen=True, slots=True)
class _Pending:
    request: ApprovalRequest
    verdict: Verdict
    key: SessionKey


class CallGate:
    """One call scope's side of approvals: wraps its toolsets and resolves their deferred calls."""

    def __init__(self, approvals: Approvals, scope: CallScope) -> None:
        self.approvals = approvals
        self.scope = scope
        self.capability: HandleDeferredToolCalls[Any] = HandleDeferredToolCalls(handler=self.resolve)
        """Passed to `Agent.run`: answers the approval requests this gate raised."""
        self._pending: dict[str, _Pending] = {}
        self._grants: dict[str, SessionKey] = {}
        self._direct_ids = itertools.count(1)

    def wrap(self, name: str, toolset: AbstractToolset[Any]) -> ApprovalToolset:
        return ApprovalToolset(toolset, name=name, gate=self)

    def clear(self) -> None:
        self._pending.clear()
        self._grants.clear()

    def direct_call_id(self) -> str:
        return f"{self.scope.id}_direct_{next(self._direct_ids)}"

    async def check(
        self, toolset: str, tool: str, args: dict[str, Any], ctx: RunContext[Any], *, requires_approval: bool
    ) -> ToolDenied | None:
        """Before a call runs: None to run it, a denial to return instead; raises `ApprovalRequired` to ask."""
        if toolset in self.scope.runtime.entry_tools:
            self.scope.check_depth(toolset)  # before anyone is asked to approve a call that cannot run
        call_id = ctx.tool_call_id or ""
        key = session_key(toolset, tool, args)
        if ctx.tool_call_approved and self._grants.get(call_id) == key:
            del self._grants[call_id]  # approved here, for exactly these arguments, once
            return None
        request, verdict = await self._evaluate(toolset, tool, args, requires_approval=requires_approval)
        if verdict.decision == "allow":
            return None
        if not ctx.tool_call_approved:
            self.defer(call_id, request, verdict)
        # Approved by something other than this gate (another capability, or results passed into
        # the run): that approval does not count here, so decide now.
        self._pending.pop(call_id, None)
        why = await self._settle(request, verdict)
        return None if why is None else ToolDenied(self._message(request, why))

    def defer(self, call_id: str, request: ApprovalRequest, verdict: Verdict) -> NoReturn:
        """Remember the call and raise `ApprovalRequired` so pydantic-ai hands it to `resolve`."""
        self._pending[call_id] = _Pending(request, verdict, session_key(request.toolset, request.tool, request.args))
        raise ApprovalRequired(
            metadata={"llm_do": {"toolset": request.toolset, "decision": verdict.decision, "reason": verdict.reason}}
        )

    def tool_asked(self, toolset: str, tool: str, args: dict[str, Any], call_id: str) -> NoReturn:
        """The wrapped tool raised `ApprovalRequired` itself: treat it as an `ask` verdict."""
        request = self._request(toolset, tool, args, f"tool {tool!r} asked for approval")
        self.defer(call_id, request, Verdict("ask", request.reason))

    async def resolve(self, ctx: RunContext[Any], requests: DeferredToolRequests) -> DeferredToolResults | None:
        """The `HandleDeferredToolCalls` handler: decide each call this gate deferred, in order."""
        approvals: dict[str, bool | ToolApproved | ToolDenied] = {}
        for call in requests.approvals:
            pending = self._pending.pop(call.tool_call_id, None)
            if pending is None:
                continue  # not ours: left to other handlers, or to pydantic-ai
            why = await self._settle(pending.request, pending.verdict)
            if why is None:
                self._grants[call.tool_call_id] = pending.key
                approvals[call.tool_call_id] = ToolApproved()
            else:
                approvals[call.tool_call_id] = ToolDenied(self._message(pending.request, why))
        return DeferredToolResults(approvals=approvals) if approvals else None

    async def settle_direct(self, call_id: str) -> bool:
        """Decide a deferred direct call: True when approved (a grant is recorded); raises `ApprovalDenied`."""
        pending = self._pending.pop(call_id, None)
        if pending is None:
            return False
        why = await self._settle(pending.request, pending.verdict)
        if why is not None:
            raise ApprovalDenied(pending.request, why)
        self._grants[call_id] = pending.key
        return True

    async def authorize(self, toolset: str, tool: str, args: dict[str, Any]) -> None:
        """Gate a call made directly from Python (no model to tell): raises `ApprovalDenied` when denied."""
        request, verdict = await self._evaluate(toolset, tool, args, requires_approval=False)
        why = await self._settle(request, verdict)
        if why is not None:
            raise ApprovalDenied(request, why)

    async def _evaluate(
        self, toolset: str, tool: str, args: dict[str, Any], *, requires_approval: bool
    ) -> tuple[ApprovalRequest, Verdict]:
        policy = self.approvals.policy(toolset)
        verdict = await policy.evaluate(toolset, tool, args, requires_approval=requires_approval)
        return self._request(toolset, tool, args, verdict.reason or verdict.decision), verdict

    def _request(self, toolset: str, tool: str, args: dict[str, Any], reason: str) -> ApprovalRequest:
        scope = self.scope
        chain = scope.chain()
        shown = ", ".join(f"{name}={_short(value)}" for name, value in args.items())
        description = f"{' > '.join(chain)} wants to run {toolset}.{tool}({shown}): {reason}"
        return ApprovalRequest(
            entry=scope.entry.name,
            depth=scope.depth,
            chain=chain,
            toolset=toolset,
            tool=tool,
            args=MappingProxyType(dict(args)),
            reason=reason,
            description=description,
        )

    async def _settle(self, request: ApprovalRequest, verdict: Verdict) -> str | None:
        why = await self.approvals.decide(request, verdict)
        if why is not None and self.approvals.on_deny == "raise":
            raise ApprovalDenied(request, why)
        return why

    @staticmethod
    def _message(request: ApprovalRequest, why: str) -> str:
        return f"The call to {request.tool!r} was not run: {why}. Do not retry the same call."


@dataclass
class ApprovalToolset(WrapperToolset[Any]):
    """Gates the calls to a wrapped toolset by the policy of its toolset name.

    It forwards `__aenter__`, `__aexit__` and `cleanup()` to the wrapped toolset. Tools declared
    with `requires_approval=True` are offered to the model as ordinary tools and gated here
    (as `ask` at least), so every decision goes through the same policy and approver.
    """

    name: str = field(kw_only=True)
    gate: CallGate = field(kw_only=True, repr=False)

    @property
    def label(self) -> str:
        return f"toolset {self.name!r} ({self.wrapped.label})"

    async def cleanup(self) -> None:
        cleanup = getattr(self.wrapped, "cleanup", None)
        if callable(cleanup):
            result = cleanup()
            if inspect.isawaitable(result):
                await result

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await super().get_tools(ctx)
        for tool_name, item in tools.items():
            if item.tool_def.kind == "unapproved":
                tool_def = replace(
                    item.tool_def,
                    kind="function",
                    metadata={**(item.tool_def.metadata or {}), _REQUIRES_APPROVAL: True},
                )
                tools[tool_name] = replace(item, tool_def=tool_def)
        return tools

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        requires_approval = bool((tool.tool_def.metadata or {}).get(_REQUIRES_APPROVAL))
        denial = await self.gate.check(self.name, name, tool_args, ctx, requires_approval=requires_approval)
        if denial is not None:
            return denial
        try:
            return await super().call_tool(name, tool_args, ctx, tool)
        except ApprovalRequired:
            if ctx.tool_call_approved:
                raise
            self.gate.tool_asked(self.name, name, tool_args, ctx.tool_call_id or "")


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
