"""What llm-do watches in each model request of a call: caps on a reply, a request and a run, replies that
look like unexecuted tool calls or echoed prompts (flagged, or sent back to the model), and, where asked, a tool call
written as text run as that call.

May import: errors, scopes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._guard import (
        GuardedModel as GuardedModel,
        GuardPlan as GuardPlan,
        ModelGuard as ModelGuard,
        ModelUnreachable as ModelUnreachable,
        RepliesRefused as RepliesRefused,
        endpoint_of as endpoint_of,
        no_model as no_model,
        refuse_repeat as refuse_repeat,
    )
    from ._limits import (
        RULE_NAMES as RULE_NAMES,
        LimitExceeded as LimitExceeded,
        ModelLimits as ModelLimits,
        ModelRules as ModelRules,
        RepeatedCall as RepeatedCall,
        ReplyTooLong as ReplyTooLong,
        RequestTookTooLong as RequestTookTooLong,
        RunOverLimit as RunOverLimit,
        RunTookTooLong as RunTookTooLong,
        SuspectOutput as SuspectOutput,
    )
    from ._text_calls import (
        RETRY_PROMPTS as RETRY_PROMPTS,
        latest_prompt as latest_prompt,
        named_calls as named_calls,
        sent_texts as sent_texts,
        suspicion as suspicion,
        written_call as written_call,
    )

_EXPORTS: dict[str, tuple[str, ...]] = {
    "_guard": (
        "GuardPlan",
        "GuardedModel",
        "ModelGuard",
        "ModelUnreachable",
        "RepliesRefused",
        "endpoint_of",
        "no_model",
        "refuse_repeat",
    ),
    "_limits": (
        "LimitExceeded",
        "ModelLimits",
        "ModelRules",
        "RULE_NAMES",
        "RepeatedCall",
        "ReplyTooLong",
        "RequestTookTooLong",
        "RunOverLimit",
        "RunTookTooLong",
        "SuspectOutput",
    ),
    "_text_calls": (
        "RETRY_PROMPTS",
        "latest_prompt",
        "named_calls",
        "sent_texts",
        "suspicion",
        "written_call",
    ),
}
"""Each private module of the room, and the names it gives the other rooms."""

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
