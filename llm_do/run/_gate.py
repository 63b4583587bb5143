"""Gates: apply the runtime's approvals to the tool calls of one call scope.

Every toolset a scope lends out passes its calls to the scope's `CallGate`, keyed by its toolset name.
A call that needs a decision is deferred to pydantic-ai's `HandleDeferredToolCalls` capability when
the call's toolsets can ask or deny, else decided in place (see docs/approvals.md, "How it is built on pydantic-ai").
"""

from __future__ import annotations

import itertools
from asyncio import CancelledError
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability, HandleDeferredToolCalls
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied

from ..approvals import (
    ApprovalDenied,
    ApprovalRequest,
    Approvals,
    Approver,
    Grants,
    SessionKey,
    Verdict,
    approval_id,
    session_key,
)
from ..events import ApprovalDecided, ApprovalRequested
from ..scopes import Sink

if TYPE_CHECKING:
    from ..files import Attachment

__all__ = ["CallGate", "GatedCall"]


class GatedCall(Protocol):
    """What a gate needs to know of the call it gates."""

    @property
    def id(self) -> str: ...
    @property
    def depth(self) -> int: ...
    @property
    def sink(self) -> Sink | None: ...
    @property
    def approver(self) -> Approver | None: ...
    @property
    def grants(self) -> Grants: ...
    def chain(self) -> tuple[str, ...]: ...
    def path(self) -> tuple[tuple[str, str | None], ...]: ...
    def check_depth(self, name: str) -> None: ...
    async def attachments_named(self, names: Sequence[str]) -> tuple[Attachment, ...]: ...


@dataclass(frozen=True, slots=True)
class _Pending:
    request: ApprovalRequest
    verdict: Verdict
    key: SessionKey


class CallGate:
    """One call scope's side of approvals: wraps its toolsets and resolves their deferred calls."""

    __slots__ = (
        "_attached",
        "_capability",
        "_direct",
        "_direct_ids",
        "_grants",
        "_pending",
        "approvals",
        "call",
        "deferring",
        "entry_tools",
    )

    def __init__(self, approvals: Approvals, call: GatedCall, entry_tools: Collection[str]) -> None:
        self.approvals = approvals
        self.call = call
        self.entry_tools = entry_tools
        self.deferring = False
        """True when the call's agent runs get `capabilities()`: gated calls are then deferred to it."""
        self._capability: HandleDeferredToolCalls[Any] | None = None
        self._pending: dict[str, _Pending] = {}
        self._grants: dict[str, SessionKey] = {}
        self._direct_ids: itertools.count[int] | None = None
        self._direct: set[str] = set()
        self._attached: dict[str, tuple[Attachment, ...]] = {}
        """Attachments read to show an approver, by tool call id: the call, once approved, sends these."""

    def capabilities(self) -> list[AbstractCapability[Any]]:
        """The capability an agent run needs to resolve deferred calls: none unless the gate defers."""
        if not self.deferring:
            return []
        if self._capability is None:
            self._capability = HandleDeferredToolCalls(handler=self.resolve)
        return [self._capability]

    def clear(self) -> None:
        self._pending.clear()
        self._grants.clear()
        self._direct.clear()
        self._attached.clear()
        self._capability = None

    def attached(self, call_id: str) -> tuple[Attachment, ...] | None:
        """The attachments an approver was shown for this call (taken once), or None if none was asked."""
        return self._attached.pop(call_id, None)

    def direct_call_id(self) -> str:
        """A tool call id for a call made from Python; its gated calls are always deferred to `settle_direct`."""
        call_id = f"direct_{self._next_direct()}"  # unique in the call; the call's path makes it unique in the run
        self._direct.add(call_id)
        return call_id

    def forget_direct(self, call_id: str) -> None:
        self._direct.discard(call_id)

    def _defers(self, call_id: str) -> bool:
        return self.deferring or call_id in self._direct

    async def check(
        self,
        toolset: str,
        tool: str,
        args: dict[str, Any],
        ctx: RunContext[Any],
        *,
        requires_approval: bool,
        annotations: Mapping[str, Any] | None = None,
        attachments: Sequence[str] | None = None,
    ) -> ToolDenied | None:
        """Before a call runs: None to run it, a denial to return instead; raises `ApprovalRequired` to ask.

        `attachments` names the files the call hands over (None: the tool takes none): when it needs
        approval they are read here (an `AttachmentError` is the call's failure), shown to the
        approver, and kept for the call. An empty list is left out of the arguments policies see."""
        if toolset in self.entry_tools:
            self.call.check_depth(toolset)  # before anyone is asked to approve a call that cannot run
        if annotations is not None and not self.approvals.annotated(toolset):
            annotations = None  # a declared policy decides, not the tool's MCP annotations
        if not requires_approval and annotations is None and not self.approvals.may_gate(toolset):
            return None  # its policy allows every call and the tool does not ask
        if attachments is not None and not attachments:
            args = {key: value for key, value in args.items() if key != "attachments"}
        call_id = ctx.tool_call_id or ""
        if ctx.tool_call_approved and self._grants.get(call_id) == session_key(toolset, tool, args):
            del self._grants[call_id]  # approved here, for exactly these arguments, once
            return None
        verdict = await self.approvals.evaluate(
            toolset,
            tool,
            args,
            requires_approval=requires_approval,
            annotations=annotations,
            attachments=bool(attachments),
        )
        if verdict.decision == "allow":
            return None
        shown: tuple[Attachment, ...] = ()
        if attachments and verdict.decision == "ask":
            shown = self._attached[call_id] = await self.call.attachments_named(attachments)
        request = self._request(toolset, tool, args, verdict.reason or verdict.decision, call_id, shown)
        return await self._defer_or_decide(call_id, request, verdict, ctx.tool_call_approved)

    def defer(self, call_id: str, request: ApprovalRequest, verdict: Verdict) -> NoReturn:
        """Remember the call and raise `ApprovalRequired` so pydantic-ai hands it to `resolve`."""
        self._pending[call_id] = _Pending(request, verdict, session_key(request.toolset, request.tool, request.args))
        raise ApprovalRequired(
            metadata={"llm_do": {"toolset": request.toolset, "decision": verdict.decision, "reason": verdict.reason}}
        )

    async def tool_asked(self, toolset: str, tool: str, args: dict[str, Any], call_id: str) -> ToolDenied | None:
        """The tool raised `ApprovalRequired` itself: an `ask` verdict. Deferred when the gate defers;
        otherwise decided here: None to run the call again as approved, or the denial to return."""
        request = self._request(toolset, tool, args, f"tool {tool!r} asked for approval", call_id)
        return await self._defer_or_decide(call_id, request, Verdict("ask", request.reason), False)

    async def _defer_or_decide(
        self, call_id: str, request: ApprovalRequest, verdict: Verdict, approved: bool
    ) -> ToolDenied | None:
        """Defer the call when the gate defers, else decide it here: None to run it, or the denial. A call
        `approved` by something else (another capability, results passed into the run) is decided here."""
        if not approved and self._defers(call_id):
            self.defer(call_id, request, verdict)
        self._pending.pop(call_id, None)
        why = await self._settle(request, verdict)
        if why is None:
            return None
        self._attached.pop(call_id, None)
        return ToolDenied(self._message(request, why))

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
                self._attached.pop(call.tool_call_id, None)
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

    async def authorize(
        self, toolset: str, tool: str, args: dict[str, Any], attachments: tuple[Attachment, ...] = ()
    ) -> str:
        """Gate a call made directly from Python (no model to tell): raises `ApprovalDenied` when denied.

        Returns what the call is known by among this call's own (`python:toolset.tool#n`, by its order):
        a child call it starts takes it as its place in the run, so siblings' questions never share an id."""
        verdict = await self.approvals.evaluate(
            toolset, tool, args, requires_approval=False, attachments=bool(attachments)
        )
        asked_as = f"python:{toolset}.{tool}#{self._next_direct()}"
        if verdict.decision == "allow":
            return asked_as  # nothing to ask: no question is announced
        reason = verdict.reason or verdict.decision
        request = self._request(toolset, tool, args, reason, asked_as, attachments, from_python=True)
        why = await self._settle(request, verdict)
        if why is not None:
            raise ApprovalDenied(request, why)
        return asked_as

    def _request(
        self,
        toolset: str,
        tool: str,
        args: dict[str, Any],
        reason: str,
        asked_as: str,
        attachments: tuple[Attachment, ...] = (),
        *,
        from_python: bool = False,
    ) -> ApprovalRequest:
        """The question about one call, which the call is known by `asked_as`: the model's tool call id, or for a
        call made from Python (`from_python`), which has none, its order among this call's own."""
        call = self.call
        chain = call.chain()
        shown = ", ".join(f"{name}={_short(value)}" for name, value in args.items())
        description = f"{' > '.join(chain)} wants to run {toolset}.{tool}({shown}): {reason}"
        infos = tuple(attachment.info for attachment in attachments)
        if infos:
            description += "; it hands over " + ", ".join(info.describe() for info in infos)
        return ApprovalRequest(
            entry=chain[-1],
            depth=call.depth,
            chain=chain,
            toolset=toolset,
            tool=tool,
            args=MappingProxyType(dict(args)),
            reason=reason,
            description=description,
            approval_id=approval_id(call.path(), asked_as),
            call_id=call.id,
            tool_call_id=None if from_python else asked_as,
            attachments=infos,
        )

    def _next_direct(self) -> int:
        if self._direct_ids is None:
            self._direct_ids = itertools.count(1)
        return next(self._direct_ids)

    async def _settle(self, request: ApprovalRequest, verdict: Verdict) -> str | None:
        """None when the call may run, else why not; the call's observers hear the decision, and the question
        before it when there is one to answer (a call its policy denies, or that the mode decides, asks nobody)."""
        call = self.call
        sink = call.sink
        if sink is not None and self.approvals.asks(verdict):
            sink.emit(ApprovalRequested(sink.call, request, verdict.decision))
        try:
            why = await self.approvals.decide(request, verdict, approver=call.approver, grants=call.grants)
        except BaseException as error:  # cancelled too: the question is no longer pending (a live run forgets it)
            if sink is not None:
                cancelled = (
                    "the call was cancelled before an answer came" if isinstance(error, CancelledError) else None
                )
                sink.emit(ApprovalDecided(sink.call, request, False, cancelled, error))
            raise
        if sink is not None:
            sink.emit(ApprovalDecided(sink.call, request, why is None, why))
        if why is not None and self.approvals.on_deny == "raise":
            raise ApprovalDenied(request, why)
        return why

    @staticmethod
    def _message(request: ApprovalRequest, why: str) -> str:
        return f"The call to {request.tool!r} was not run: {why}. Do not retry the same call."


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
