"""The approvals room."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._approvals import (
        CHOICES as CHOICES,
    )
    from ._approvals import (
        NATIVE_TOOL_NOT_GATED as NATIVE_TOOL_NOT_GATED,
    )
    from ._approvals import (
        Approval as Approval,
    )
    from ._approvals import (
        ApprovalChoice as ApprovalChoice,
    )
    from ._approvals import (
        ApprovalDenied as ApprovalDenied,
    )
    from ._approvals import (
        ApprovalRequest as ApprovalRequest,
    )
    from ._approvals import (
        Approvals as Approvals,
    )
    from ._approvals import (
        ApprovalUnavailable as ApprovalUnavailable,
    )
    from ._approvals import (
        Approver as Approver,
    )
    from ._approvals import (
        Grants as Grants,
    )
    from ._approvals import (
        SessionKey as SessionKey,
    )
    from ._approvals import (
        approval_id as approval_id,
    )
    from ._approvals import (
        ask_approver as ask_approver,
    )
    from ._approvals import (
        check_approver as check_approver,
    )
    from ._approvals import (
        session_key as session_key,
    )
    from ._policy import (
        Decision as Decision,
    )
    from ._policy import (
        PolicySettings as PolicySettings,
    )
    from ._policy import (
        Rule as Rule,
    )
    from ._policy import (
        ToolPolicy as ToolPolicy,
    )
    from ._policy import (
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
    "_policy": (
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
