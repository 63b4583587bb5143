"""What llm-do watches in each model request of a call: caps on a reply, a request and a run, replies that
look like unexecuted tool calls or echoed prompts (flagged, or sent back to the model), and, where asked, a tool call
written as text run as that call.

May import: errors, scopes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_imports

if TYPE_CHECKING:
    from ._guard import (
        GuardedModel as GuardedModel,
    )
    from ._limits import (
        ModelRules as ModelRules,
        ReplyTooLong as ReplyTooLong,
        RequestTookTooLong as RequestTookTooLong,
        RunOverLimit as RunOverLimit,
        RunTookTooLong as RunTookTooLong,
        SuspectOutput as SuspectOutput,
    )
    from ._text_calls import (
        suspicion as suspicion,
        written_call as written_call,
    )

__getattr__, __dir__ = lazy_imports(globals())
