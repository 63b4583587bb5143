"""What a call's messages say it used: model requests, tokens, and the tool calls that ran."""

from __future__ import annotations

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolReturnPart
from pydantic_ai.usage import RunUsage

from .._compat import NOT_RUN_RESULTS


def usage_of(messages: list[ModelMessage] | tuple[ModelMessage, ...]) -> RunUsage:
    """Requests and tokens of the model responses among `messages`, and the tool calls that ran.

    A tool call counts as pydantic-ai counts it in `RunUsage.tool_calls`: its result is a
    `ToolReturnPart` with outcome `success` (failed, retried, denied and interrupted calls do not
    count), and it is not pydantic-ai's stand-in for an output tool or for a call it skipped.
    """
    usage = RunUsage()
    for message in messages:
        if isinstance(message, ModelResponse):
            usage.requests += 1
            usage.incr(message.usage)
        elif isinstance(message, ModelRequest):
            for part in message.parts:  # a loop, not a generator: this runs at the end of every call
                if (
                    isinstance(part, ToolReturnPart)
                    and part.outcome == "success"
                    and not (isinstance(part.content, str) and part.content in NOT_RUN_RESULTS)
                ):
                    usage.tool_calls += 1
    return usage
