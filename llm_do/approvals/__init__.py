"""Who may run what: policies per toolset name, the questions an approver is asked and its answers, the
session's grants, and the decision for one call.

May import: errors, scopes, files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._approvals import (
        NATIVE_TOOL_NOT_GATED as NATIVE_TOOL_NOT_GATED,
        Approvals as Approvals,
    )
    from ._facts import (
        AGENT_CALL as AGENT_CALL,
        READ_ONLY as READ_ONLY,
        CallFacts as CallFacts,
        ToolTraits as ToolTraits,
    )
    from ._grants import (
        Grants as Grants,
        SessionKey as SessionKey,
        session_key as session_key,
    )
    from ._policy import (
        ApprovalMode as ApprovalMode,
        ApprovalOnDeny as ApprovalOnDeny,
        Decision as Decision,
        PolicySettings as PolicySettings,
        Rule as Rule,
        ToolPolicy as ToolPolicy,
        Verdict as Verdict,
    )
    from ._requests import (
        CHOICES as CHOICES,
        WAYS_OUT as WAYS_OUT,
        Approval as Approval,
        ApprovalChoice as ApprovalChoice,
        ApprovalDenied as ApprovalDenied,
        ApprovalNotPending as ApprovalNotPending,
        ApprovalRequest as ApprovalRequest,
        ApprovalUnavailable as ApprovalUnavailable,
        Approver as Approver,
        NoApproverWarning as NoApproverWarning,
        RunSuspended as RunSuspended,
        approval_id as approval_id,
        approval_space as approval_space,
        ask_approver as ask_approver,
        ask_within as ask_within,
        check_approver as check_approver,
        own_approval_ids as own_approval_ids,
        parks as parks,
        stable_approval_ids as stable_approval_ids,
    )

_EXPORTS: dict[str, tuple[str, ...]] = {
    "_approvals": (
        "Approvals",
        "NATIVE_TOOL_NOT_GATED",
    ),
    "_facts": (
        "AGENT_CALL",
        "CallFacts",
        "READ_ONLY",
        "ToolTraits",
    ),
    "_grants": (
        "Grants",
        "SessionKey",
        "session_key",
    ),
    "_policy": (
        "ApprovalMode",
        "ApprovalOnDeny",
        "Decision",
        "PolicySettings",
        "Rule",
        "ToolPolicy",
        "Verdict",
    ),
    "_requests": (
        "Approval",
        "ApprovalChoice",
        "ApprovalDenied",
        "ApprovalNotPending",
        "ApprovalRequest",
        "ApprovalUnavailable",
        "Approver",
        "CHOICES",
        "NoApproverWarning",
        "RunSuspended",
        "WAYS_OUT",
        "approval_id",
        "approval_space",
        "ask_approver",
        "ask_within",
        "check_approver",
        "own_approval_ids",
        "parks",
        "stable_approval_ids",
    ),
}
"""Each private module of the room, and the names it gives the other rooms."""

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
