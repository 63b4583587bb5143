"""Gates: apply the runtime's approvals to the tool calls of one call scope.

A gated call enters the scope's `CallGate` as one `CallFacts` value, with how to run it, through
`CallGate.call`: the calls of every toolset the scope lends out (the facts worked out by the lending)
and the calls made from Python (`CallScope.call_tool`, `CallScope.call_agent`). A model's call that needs
a decision is deferred to pydantic-ai's `HandleDeferredToolCalls` capability when the call's toolsets
can ask or deny, else decided in place (see docs/approvals.md, "How it is built on pydantic-ai").
"""

from __future__ import annotations

import contextlib
import itertools
from asyncio import CancelledError
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability, HandleDeferredToolCalls
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied

from ..approvals._approvals import Approvals
from ..approvals._facts import CallFacts
from ..approvals._grants import Grants, canonical_args
from ..approvals._policy import Verdict
from ..approvals._requests import ApprovalDenied, ApprovalRequest, Approver, RunSuspended, approval_id
from ..events import ApprovalDecided, ApprovalRequested
from ..scopes._bus import Sink
from ..scopes._tasks import side_by_side

if TYPE_CHECKING:
    from ..files._attachments import Attachment


@dataclass(frozen=True, slots=True)
class GatedCall:
    """What a gate knows of the call it gates, fixed when the gate is made: where the call stands, who answers its
    questions, and who hears them."""

    call_id: str
    """The call's id in its run (`CallScope.id`)."""
    depth: int
    chain: tuple[str, ...]
    """Entry names from the top-level call down to this one."""
    path: tuple[tuple[str, str | None], ...]
    """Where the call is in its run (`CallScope.path()`): with `approval_space`, what its questions' ids come from."""
    approval_space: str
    session_id: str | None
    approver: Approver | None
    grants: Grants
    """The "approve for session" answers the call's approvals may reuse: its session's (or its run's)."""
    sink: Sink | None
    """Where the call announces its questions and decisions; None when nobody observes its run."""


ReadFiles = Callable[[Sequence[str]], Awaitable["tuple[Attachment, ...]"]]
"""How a gate reads the files a call hands over, to show its approver (`CallScope.attachments_named`)."""


@dataclass(frozen=True, slots=True)
class _Pending:
    """A call the gate deferred to the capability: its facts, its question, and the arguments it was asked about
    (canonical_args), which the call run again once approved must still have."""

    facts: CallFacts
    request: ApprovalRequest
    verdict: Verdict
    arguments: str


class CallGate:
    """One call scope's side of approvals: decides, asks for and runs its gated calls (`call`), and resolves the
    calls it deferred to pydantic-ai (`resolve`)."""

    __slots__ = (
        "_attached",
        "_call",
        "_capability",
        "_direct_ids",
        "_grants",
        "_pending",
        "_read_files",
        "approvals",
        "deferring",
    )

    def __init__(self, approvals: Approvals, call: GatedCall, read_files: ReadFiles, *, deferring: bool) -> None:
        self.approvals = approvals
        self._call = call
        self._read_files = read_files
        self.deferring = deferring
        """True when the call's agent runs get `capabilities()`: a model's gated calls are then deferred to it."""
        self._capability: HandleDeferredToolCalls[Any] | None = None
        self._pending: dict[str, _Pending] = {}
        self._grants: dict[str, _Pending] = {}
        """The deferred calls the capability approved, by tool call id: each runs once, with the arguments asked."""
        self._direct_ids: itertools.count[int] | None = None
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
        self._attached.clear()
        self._capability = None

    def attached(self, call_id: str) -> tuple[Attachment, ...] | None:
        """The attachments an approver was shown for this call (taken once), or None if none was asked."""
        return self._attached.pop(call_id, None)

    def direct_call_id(self) -> str:
        """The id of a tool call made from Python (`CallScope.call_tool`): unique in the call, and the call's path
        makes it unique in the run."""
        return f"direct_{self._next_direct()}"

    def python_call_id(self, toolset: str, tool: str) -> str:
        """What a call made from Python without a tool call (`CallScope.call_agent`) is known by among this call's
        own (`python:toolset.tool#n`, by its order): a child call it starts takes it as its place in the run, so
        siblings' questions never share an id."""
        return f"python:{toolset}.{tool}#{self._next_direct()}"

    async def call(self, facts: CallFacts, run: Callable[[bool], Awaitable[Any]]) -> Any:
        """Decide the call, ask for it when it must, and run it: the tool's result, or the denial a model reads.

        `run(approved)` runs the tool, `approved` as pydantic-ai's `tool_call_approved`. A model's call that needs
        an answer is deferred to the capability when the gate defers (`ApprovalRequired` is raised; pydantic-ai
        runs it again approved); any other is decided here. A tool that asks for approval itself is decided here,
        and run again approved. A denial raises `ApprovalDenied` for a call made from Python, or with
        `approval_on_deny='raise'`."""
        approved = facts.approved
        if not facts.asked:
            if not (approved and self._granted(facts)):
                verdict = await self.approvals.evaluate(facts)
                if verdict.decision != "allow":
                    denial = await self._decide(facts, verdict, await self._shown(facts, verdict))
                    if denial is not None:
                        return denial
                    approved = approved or facts.direct  # a model's call decided here keeps pydantic-ai's flag
            try:
                return await run(approved)
            except ApprovalRequired:
                if approved or not facts.tool_call:
                    raise
        denial = await self._decide(facts, Verdict("ask", f"tool {facts.tool!r} asked for approval"), ())
        if denial is not None:
            return denial
        return await run(True)

    async def _shown(self, facts: CallFacts, verdict: Verdict) -> tuple[Attachment, ...]:
        """The files to show with the question: read for an approver to see (an `AttachmentError` is the call's
        failure), and kept for the call, which sends these once approved."""
        if facts.shown is not None:
            return facts.shown
        if not facts.attachments or verdict.decision != "ask":
            return ()
        shown = self._attached[facts.call_id] = await self._read_files(facts.attachments)
        return shown

    def _granted(self, facts: CallFacts) -> bool:
        """Whether the capability approved this call, for exactly these arguments (the grant is used up)."""
        grant = self._grants.get(facts.call_id)
        if grant is None:
            return False
        deferred = grant.facts
        same_tool = deferred.toolset == facts.toolset and deferred.tool == facts.tool
        if not same_tool or grant.arguments != canonical_args(facts.args):
            return False
        del self._grants[facts.call_id]
        return True

    async def _decide(self, facts: CallFacts, verdict: Verdict, shown: tuple[Attachment, ...]) -> ToolDenied | None:
        """Defer the call when the gate defers it, else decide it here: None to run it, or the denial. A call
        approved by something else (another capability, results passed into the run) is decided here."""
        request = self._request(facts, verdict.reason or verdict.decision, shown)
        call_id = facts.call_id
        if self.deferring and not facts.direct and not facts.approved:
            self._pending[call_id] = _Pending(facts, request, verdict, canonical_args(request.args))
            raise ApprovalRequired(
                metadata={"llm_do": {"toolset": facts.toolset, "decision": verdict.decision, "reason": verdict.reason}}
            )
        self._pending.pop(call_id, None)
        why = await self._settle(request, verdict)
        if why is None:
            return None
        if facts.direct:
            raise ApprovalDenied(request, why)
        self._attached.pop(call_id, None)
        return ToolDenied(self._message(request, why))

    async def resolve(self, ctx: RunContext[Any], requests: DeferredToolRequests) -> DeferredToolResults | None:
        """The `HandleDeferredToolCalls` handler: decide the calls this gate deferred (one model response's),
        their questions asked together (`_settle_together`)."""
        ours: list[tuple[str, _Pending]] = []
        for call in requests.approvals:
            pending = self._pending.pop(call.tool_call_id, None)
            if pending is not None:  # else not ours: left to other handlers, or to pydantic-ai
                ours.append((call.tool_call_id, pending))
        if not ours:
            return None
        whys = await self._settle_together([pending for _, pending in ours])
        approvals: dict[str, bool | ToolApproved | ToolDenied] = {}
        for (call_id, pending), why in zip(ours, whys, strict=True):
            if why is None:
                self._grants[call_id] = pending
                approvals[call_id] = ToolApproved()
            else:
                self._attached.pop(call_id, None)
                approvals[call_id] = ToolDenied(self._message(pending.request, why))
        return DeferredToolResults(approvals=approvals)

    async def ask_deferred(self) -> None:
        """A call of the step ends the run suspended (`RunSuspended`): pydantic-ai will not reach its handler, so
        ask the step's deferred calls now, together, and their questions are left open beside that call's. Their
        answers are not used (the run ends); a suspension they end with is the run's already."""
        pending = list(self._pending.values())
        self._pending.clear()
        if pending:
            with contextlib.suppress(RunSuspended):
                await self._settle_together(pending)

    async def _settle_together(self, pending: Sequence[_Pending]) -> list[str | None]:
        """`_settle` each question at once, each in a task of its own (an approver's deadline cancels only its own
        question's wait), started in order, so that they are announced in the order the model made them; none waits
        for another's answer, but a twin (`Approvals.decide`). A failure (a denial that raises, an approver's error)
        cancels the others, whose observers hear so, and is raised once they have ended; a suspension
        (`RunSuspended`) lets the others go on to their end or their own suspension, then the first is raised."""
        if len(pending) == 1:
            return [await self._settle(pending[0].request, pending[0].verdict)]
        outcomes = await side_by_side([self._settle_or_suspend(each) for each in pending])
        whys: list[str | None] = []
        for outcome in outcomes:
            if isinstance(outcome, RunSuspended):
                raise outcome
            whys.append(outcome)
        return whys

    async def _settle_or_suspend(self, pending: _Pending) -> str | RunSuspended | None:
        try:
            return await self._settle(pending.request, pending.verdict)
        except RunSuspended as suspended:
            return suspended

    def _request(self, facts: CallFacts, reason: str, attachments: tuple[Attachment, ...]) -> ApprovalRequest:
        """The question about one call, which is known by `facts.call_id`: the model's tool call id, or for a call
        made from Python without one, its order among this call's own."""
        call = self._call
        chain = call.chain
        toolset, tool, args = facts.toolset, facts.tool, facts.args
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
            approval_id=approval_id(call.approval_space, call.path, facts.call_id),
            call_id=call.call_id,
            tool_call_id=facts.call_id if facts.tool_call else None,
            attachments=infos,
            session_id=call.session_id,
        )

    def _next_direct(self) -> int:
        if self._direct_ids is None:
            self._direct_ids = itertools.count(1)
        return next(self._direct_ids)

    async def _settle(self, request: ApprovalRequest, verdict: Verdict) -> str | None:
        """None when the call may run, else why not; the call's observers hear the decision, and the question
        before it when there is one to answer (a call its policy denies, that the mode decides, or that the
        session approved already, asks nobody)."""
        call = self._call
        sink = call.sink
        if sink is not None and self.approvals.asks(verdict) and not self.approvals.granted(request, call.grants):
            sink.emit(ApprovalRequested(sink.call, request, verdict.decision))  # (a granted one asks nobody)
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
