"""Who may run what: policies per toolset name, the questions an approver is asked and its answers, the
session's grants, and the decision for one call.

May import: errors, scopes, files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_imports

if TYPE_CHECKING:
    from ._approvals import (
        NATIVE_TOOL_NOT_GATED as NATIVE_TOOL_NOT_GATED,
    )
    from ._grants import (
        SessionKey as SessionKey,
        session_key as session_key,
    )
    from ._policy import (
        ApprovalMode as ApprovalMode,
        ApprovalOnDeny as ApprovalOnDeny,
    )
    from ._requests import (
        CHOICES as CHOICES,
        RunSuspended as RunSuspended,
        parks as parks,
        stable_approval_ids as stable_approval_ids,
    )

__getattr__, __dir__ = lazy_imports(globals())
