"""Approvals: gate tool calls by per-toolset-name policies, an approver and the session's grants.

This module holds what the runtime knows (policies, mode, the default approver, the time an
answer may take), what a session knows (`Grants`: its "approve for session" answers and the
questions pending in it), and the request and answer types; `gate` applies them to one call
scope's toolsets.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import inspect
import json
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, get_args

from pydantic_core import to_jsonable_python

from ..errors import ConfigurationError, LlmDoError
from ._facts import CallFacts
from ._policy import ApprovalMode, ApprovalOnDeny, PolicySettings, ToolPolicy, Verdict

if TYPE_CHECKING:
    from ..files import AttachmentInfo

__all__ = [
    "Approval",
    "ApprovalChoice",
    "ApprovalDenied",
    "ApprovalRequest",
    "ApprovalUnavailable",
    "Approvals",
    "Approver",
    "CHOICES",
    "Grants",
    "NATIVE_TOOL_NOT_GATED",
    "SessionKey",
    "approval_id",
    "ask_approver",
    "check_approver",
    "session_key",
]

ApprovalChoice: TypeAlias = Literal["approve", "approve_for_session", "deny"]
CHOICES: tuple[str, ...] = get_args(ApprovalChoice)
_MODES: tuple[str, ...] = get_args(ApprovalMode)
_ON_DENY: tuple[str, ...] = get_args(ApprovalOnDeny)
_OPEN = ToolPolicy()
SessionKey: TypeAlias = tuple[str, str, str]
"""(toolset name, tool name, the arguments as canonical JSON)."""


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One call that needs a decision, as the approver sees it."""

    entry: str
    """The entry whose call wants to use the tool."""
    depth: int
    """That call's depth: 0 for the top-level call."""
    chain: tuple[str, ...]
    """Entry names from the top-level call down to `entry`."""
    toolset: str
    tool: str
    args: Mapping[str, Any]
    """The validated arguments (read-only)."""
    reason: str
    """Why it needs approval: the policy entry, the tool's own flag, or the rule's reason."""
    description: str
    """One human-readable line describing the call, for a prompt or a log."""
    approval_id: str
    """A stable id of this question (`apr_...`): the same call at the same place of a run, replayed, gets
    the same id. Answer a live run's question with it (`LiveRun.decide`)."""
    call_id: str
    """The id of the llm-do call whose tool call this is (`CallRecord.id`)."""
    tool_call_id: str | None
    """pydantic-ai's id of the tool call (`ToolCallPart.tool_call_id`), to attach the question to the tool
    call a user interface already shows; None for `CallScope.call_agent` from Python."""
    attachments: tuple[AttachmentInfo, ...] = ()
    """The files the call hands over: name, size, media type and digest (never their bytes)."""


@dataclass(frozen=True, slots=True)
class Approval:
    """The approver's answer. `approve_for_session` also approves identical calls for the rest of the session."""

    choice: ApprovalChoice
    note: str | None = None
    """Shown to the model (or in `ApprovalDenied`) when the call is denied."""

    def __post_init__(self) -> None:
        if self.choice not in CHOICES:
            raise ValueError(f"Approval.choice must be one of {', '.join(map(repr, CHOICES))}, got {self.choice!r}")

    @classmethod
    def approve(cls, note: str | None = None) -> Approval:
        return cls("approve", note)

    @classmethod
    def for_session(cls, note: str | None = None) -> Approval:
        return cls("approve_for_session", note)

    @classmethod
    def deny(cls, note: str | None = None) -> Approval:
        return cls("deny", note)


class ApprovalDenied(LlmDoError):
    """A gated call was denied, and there is no model to tell: `approval_on_deny='raise'`, or a direct call.

    Direct calls are `CallScope.call_tool` and `CallScope.call_agent` from Python code.
    """

    def __init__(self, request: ApprovalRequest, why: str) -> None:
        self.request = request
        self.why = why
        super().__init__(
            f"entry {request.entry!r}: the call to tool {request.tool!r} of toolset {request.toolset!r} "
            f"was denied: {why}. Catch ApprovalDenied to carry on, or set approval_on_deny='tell_model' "
            "(LLM_DO_APPROVAL_ON_DENY) so that a model reads the denial as the tool's result."
        )


class ApprovalUnavailable(LlmDoError):
    """A call needs approval, the mode is `prompt`, and the runtime has no approver to ask."""

    def __init__(self, request: ApprovalRequest) -> None:
        self.request = request
        super().__init__(
            f"entry {request.entry!r} called tool {request.tool!r} of toolset {request.toolset!r}, which needs "
            f"approval ({request.reason}), but approval_mode is 'prompt' and the Runtime has no approver. "
            "Pass Runtime(..., approver=...) or set approval_mode (LLM_DO_APPROVAL_MODE) to "
            "'approve_all' or 'reject_all'."
        )


Approver: TypeAlias = Callable[[ApprovalRequest], Approval | ApprovalChoice | Awaitable[Approval | ApprovalChoice]]
"""Sync or async. A sync approver runs in a worker thread, so it may block (a terminal prompt).
Questions of different runs reach it at the same time: an approver that can ask only one at a
time serialises itself."""


def approval_id(path: Sequence[tuple[str, str | None]], tool_call_id: str) -> str:
    """The stable id of a question: from the call's path (each entry from the top-level call down, with
    the parent's tool call that started it) and the tool call's id."""
    text = json.dumps([list(path), tool_call_id], separators=(",", ":"), ensure_ascii=False)
    return "apr_" + hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(slots=True)
class Grants:
    """One session's "approve for session" answers, and its questions waiting for an answer.

    A run given no session has grants of its own, which end with it.
    """

    granted: set[SessionKey] = field(default_factory=set)
    pending: dict[SessionKey, asyncio.Future[Approval | None]] = field(default_factory=dict)


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
    policies: Mapping[str, ToolPolicy], known: Collection[str], tools_of: Callable[[str], frozenset[str] | None]
) -> None:
    """Refuse a policy that names no known toolset, or tools its toolset does not have (when known)."""
    for name, policy in policies.items():
        if name not in known:
            _refuse_native_tool(name)
            raise ConfigurationError(
                f"an approval policy names toolset {name!r}, which is neither a provider of the container, "
                f"a runtime toolset, nor an entry (known: {', '.join(sorted(known)) or 'none'}); fix the name "
                "so the policy applies (names from LLM_DO_APPROVAL_POLICIES__NAME__... are lowercased)"
            )
        tools = tools_of(name)
        unknown = sorted(set(policy.tools) - tools) if tools is not None else []
        if unknown:
            raise ConfigurationError(
                f"the approval policy of toolset {name!r} names tool(s) {', '.join(map(repr, unknown))}, "
                f"which it does not have (its tools: {', '.join(sorted(tools or ())) or 'none'}); fix the tool names"
            )


class Approvals:
    """A runtime's approval rules: policies by toolset name, the mode, the default approver, the time limit.

    The `declared` policies are merged (later ones replace earlier ones per name), the settings
    `overrides` applied on top, and each checked to name a `known` toolset and tools it has (`tools_of`).
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
    ) -> None:
        self._overrides = {
            name: item if isinstance(item, PolicySettings) else PolicySettings.model_validate(item)
            for name, item in overrides.items()
        }
        merged = _merge(declared, self._overrides)
        _check_names(merged, known, tools_of)
        if mode not in _MODES:
            raise ConfigurationError(f"approval_mode must be one of {', '.join(map(repr, _MODES))}, got {mode!r}")
        if on_deny not in _ON_DENY:
            raise ConfigurationError(
                f"approval_on_deny must be one of {', '.join(map(repr, _ON_DENY))}, got {on_deny!r}"
            )
        check_approver(approver)
        self.policies: Mapping[str, ToolPolicy] = MappingProxyType(merged)
        self.gating = frozenset(name for name, policy in merged.items() if policy.may_gate)
        """The toolset names whose policy can ask or deny a call."""
        self._declared = frozenset(name for policies in declared for name in policies)
        """Names with a declared policy (not only a settings override): their tools' MCP annotations are not read."""
        self.mode = mode
        self.on_deny = on_deny
        self.approver = approver
        """The runtime's approver: asked when neither the run nor its session has one."""
        self.timeout = timeout
        """Seconds an approver may take to answer before the call is denied."""

    def may_gate(self, toolset: str) -> bool:
        """Whether the policy of a toolset name can ask or deny a call."""
        return toolset in self.gating

    def policy(self, toolset: str) -> ToolPolicy:
        """The policy of a toolset name; a name without one allows every call (unless a tool asks)."""
        return self.policies.get(toolset, _OPEN)

    def annotated(self, toolset: str) -> bool:
        """Whether the calls of `toolset` are decided by its tools' MCP annotations (no policy is declared for it)."""
        return toolset not in self._declared

    async def evaluate(self, call: CallFacts) -> Verdict:
        """The verdict for one call: its verdict before any rule, then the policy's rule (a toolset decided by its
        tools' MCP annotations has none)."""
        carries = bool(call.attachments)
        if call.annotations is None:
            return await self.policy(call.toolset).evaluate(
                call.toolset, call.tool, call.args, requires_approval=call.requires_approval, attachments=carries
            )
        return self._by_annotations(call.toolset, call.tool, call.requires_approval, call.annotations, carries)

    def verdict(
        self,
        toolset: str,
        tool: str,
        *,
        requires_approval: bool = False,
        annotations: Mapping[str, Any] | None = None,
        attachments: bool = False,
    ) -> Verdict:
        """The verdict for a call before any rule sees its arguments. An MCP tool (`annotations` is its
        annotations, `{}` when it has none) of a toolset without a declared policy is allowed when
        annotated `readOnlyHint` and asked for otherwise; settings overrides for the toolset still apply
        on top."""
        if annotations is None or toolset in self._declared:
            return self.policy(toolset).static_verdict(
                toolset, tool, requires_approval=requires_approval, attachments=attachments
            )
        return self._by_annotations(toolset, tool, requires_approval, annotations, attachments)

    def _by_annotations(
        self, toolset: str, tool: str, requires_approval: bool, annotations: Mapping[str, Any], attachments: bool
    ) -> Verdict:
        """The verdict for a call to an MCP tool of a toolset without a declared policy (see `verdict`)."""
        read_only = annotations.get("readOnlyHint") is True
        override = self._overrides.get(toolset)
        if read_only and override is None and not requires_approval and not attachments:
            return _READ_ONLY_VERDICT  # the common case, decided without building anything
        base = _READ_ONLY if read_only else _UNMARKED
        policy = base if override is None else base.overridden(override)
        verdict = policy.static_verdict(toolset, tool, requires_approval=requires_approval, attachments=attachments)
        by_annotation = override is None or (tool not in override.tools and override.default is None)
        if by_annotation and verdict.decision == base.default and not requires_approval:
            verdict = Verdict(verdict.decision, f"MCP tool {tool!r} of toolset {toolset!r}: {_hinted(annotations)}")
        return verdict

    def asks(self, verdict: Verdict) -> bool:
        """Whether `decide` puts this verdict's call to an approver (or the session's grants), rather than
        deciding it by the verdict (`allow`, `deny`) or by the mode (`approve_all`, `reject_all`)."""
        return verdict.decision == "ask" and self.mode == "prompt"

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
            answer = await _ask_within(approver, request, self.timeout)
            if answer is not None and answer.choice == "approve_for_session":
                grants.granted.add(key)
        finally:
            del pending[key]
            mine.set_result(answer)
        if answer is None:
            return f"no answer came within {self.timeout:g}s (LLM_DO_APPROVAL_TIMEOUT)"
        if answer.choice == "deny":
            return "the approver denied it" + (f": {answer.note}" if answer.note else "")
        return None


def check_approver(approver: object) -> None:
    """Refuse an approver that cannot be called."""
    if approver is not None and not callable(approver):
        raise ConfigurationError(f"approver must be a callable taking an ApprovalRequest, got {approver!r}")


def _hinted(annotations: Mapping[str, Any]) -> str:
    if annotations.get("readOnlyHint") is True:
        return "it is annotated readOnlyHint"
    if annotations.get("destructiveHint") is True:
        return "it is annotated destructiveHint"
    return "it is not annotated readOnlyHint"


_READ_ONLY = ToolPolicy(default="allow")
_READ_ONLY_VERDICT = Verdict("allow", "the MCP tool is annotated readOnlyHint")
_UNMARKED = ToolPolicy(default="ask")


def session_key(
    toolset: str, tool: str, args: Mapping[str, Any], attachments: Iterable[AttachmentInfo] = ()
) -> SessionKey:
    """The cache key of a call: its toolset and tool names, its exact arguments, and the digests of the
    files it carries (an approval for the session covers those contents, not whatever a name holds later)."""
    values = dict(args)
    digests = [f"{item.name}@sha256:{item.sha256}" for item in attachments]
    if digests:
        values["\x00attachments"] = digests  # cannot collide with an argument name
    canonical = json.dumps(
        to_jsonable_python(values, fallback=repr), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return (toolset, tool, canonical)


async def _ask_within(approver: Approver, request: ApprovalRequest, seconds: float) -> Approval | None:
    """The approver's answer, or None when it gave none within `seconds` (it is then cancelled).

    The approver is awaited in the asking task, so its answer reaches the call without a turn of
    the event loop in between; the deadline cancels that task, as `asyncio.timeout` does, and is
    armed in an empty context: a timer keeps its context until it is due or purged, and the run's
    context must not outlive the run."""
    task = asyncio.current_task()
    assert task is not None, "an approver is asked from a task"
    cancelling = task.cancelling()
    deadline = _Deadline(task)
    timer = contextvars.Context().run(task.get_loop().call_later, seconds, deadline)
    try:
        answer = await ask_approver(approver, request)
    except (Exception, asyncio.CancelledError):
        if deadline.expired and task.uncancel() <= cancelling:
            return None  # the deadline cancelled it: what the approver did next is of no use
        raise  # its own error, or a cancellation from outside (which wins over the deadline)
    finally:
        timer.cancel()
    if deadline.expired:  # it answered although its time was up (it caught the cancellation)
        if task.uncancel() > cancelling:
            raise asyncio.CancelledError  # the task was cancelled from outside too
        return None
    return answer


class _Deadline:
    """Cancels the task asking an approver when the time for an answer is up."""

    __slots__ = ("expired", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.expired = False

    def __call__(self) -> None:
        self.expired = True
        self.task.cancel()


async def ask_approver(approver: Approver, request: ApprovalRequest) -> Approval:
    """The approver's answer to `request` (a sync approver runs in a worker thread)."""
    if _is_async(approver):
        result: Any = await approver(request)  # type: ignore[misc]
    else:
        result = await asyncio.to_thread(approver, request)  # a blocking prompt must not block the loop
        if inspect.isawaitable(result):
            result = await result
    if isinstance(result, Approval):
        return result
    if isinstance(result, str) and result in CHOICES:
        return Approval(result)  # type: ignore[arg-type]
    raise TypeError(
        f"the approver returned {result!r} for tool {request.tool!r} of toolset {request.toolset!r}; "
        "return an llm_do.Approval or one of 'approve', 'approve_for_session', 'deny'"
    )


def _is_async(func: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__)
