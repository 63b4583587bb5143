"""Who may run what: policies per toolset name, the questions an approver is asked and its answers, the
session's grants, and the decision for one call.

May import: errors, scopes, files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._approvals import (
        CHOICES as CHOICES,
        NATIVE_TOOL_NOT_GATED as NATIVE_TOOL_NOT_GATED,
        Approval as Approval,
        ApprovalChoice as ApprovalChoice,
        ApprovalDenied as ApprovalDenied,
        ApprovalRequest as ApprovalRequest,
        Approvals as Approvals,
        ApprovalUnavailable as ApprovalUnavailable,
        Approver as Approver,
        Grants as Grants,
        SessionKey as SessionKey,
        approval_id as approval_id,
        ask_approver as ask_approver,
        check_approver as check_approver,
        session_key as session_key,
    )
    from ._facts import (
        CallFacts as CallFacts,
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

_EXPORTS: dict[str, tuple[str, ...]] = {
    "_approvals": (
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
    ),
    "_facts": ("CallFacts",),
    "_policy": (
        "ApprovalMode",
        "ApprovalOnDeny",
        "Decision",
        "PolicySettings",
        "Rule",
        "ToolPolicy",
        "Verdict",
    ),
}
"""Each private module of the room, and the names it gives the other rooms."""

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
