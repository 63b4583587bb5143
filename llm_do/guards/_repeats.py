"""Calls a model makes again after they were refused: read from the run's messages, as the model saw them.

A small model told that its call was denied ("Do not retry the same call."), that it failed, or given the result of
a call it then makes again, often makes the identical call (the same tool, the same arguments) again and again
until the run's request limit. `repeat_of` finds such a call: the same call made earlier in the agent's run (since
the user's last prompt) that was

- denied (by a person, a policy or the approval mode): for the rest of the run;
- failed (the tool said it cannot be done, `ToolFailed`): until another call runs (well or not), which may change
  what it finds;
- run, when it is a call the approvals weigh (one that may need approval: a write, a commit), until another call
  runs: made again right after, it does the same thing twice. Such a call still runs (its approval holds) and is
  only counted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart, UserPromptPart

from ..errors import shortened

Refusal = Literal["denied", "failed", "ran"]
_RAN = frozenset(["success", "failed"])
"""The outcomes of a call that ran (a denied call did not, nor one whose arguments were refused)."""


@dataclass(frozen=True, slots=True)
class Repeat:
    """A call made again after it was refused: `how` it was first (`denied`, `failed`, or `ran`), what the model was
    told then (`told`), and how many times it was made again, this one included (`times`)."""

    call: str
    """The call as an error names it: `write_text(path='bye.txt', text='Goodbye.')`."""
    how: Refusal
    told: str
    times: int


def repeat_of(messages: Sequence[ModelMessage], tool_call_id: str | None, *, weighed: bool) -> Repeat | None:
    """The refused call that the tool call `tool_call_id` of the last response makes again, or None. `weighed`: the
    call is one the approvals weigh (a call of it that ran counts as done)."""
    if tool_call_id is None or not messages or not isinstance(messages[-1], ModelResponse):
        return None
    current = next(
        (part for part in messages[-1].parts if isinstance(part, ToolCallPart) and part.tool_call_id == tool_call_id),
        None,
    )
    if current is None:
        return None
    key = _key(current)
    state: tuple[Refusal, str] | None = None
    times = 0
    for call, outcome, told in _earlier(messages):
        if _key(call) == key:
            if state is not None:
                times += 1
            elif outcome == "denied":
                state = ("denied", told)
            elif outcome == "failed":
                state = ("failed", told)
            elif outcome == "success" and weighed:
                state = ("ran", told)
        elif outcome in _RAN and state is not None and state[0] != "denied":
            state, times = None, 0  # another call ran (well or not): what failed or ran may come out otherwise now
    if state is None:
        return None
    return Repeat(shown_call(current), state[0], state[1], times + 1)


def shown_call(call: ToolCallPart) -> str:
    """A tool call as an error names it: `name(key=value, ...)`, each value cut short."""
    try:
        args = call.args_as_dict()
    except Exception:  # arguments that are not JSON: shown as given
        return f"{call.tool_name}({shortened(str(call.args), 120, one_line=True)})"
    shown = ", ".join(f"{name}={shortened(value, 60, quoted=True, one_line=True)}" for name, value in args.items())
    return f"{call.tool_name}({shown})"


def _key(call: ToolCallPart) -> tuple[str, str]:
    try:
        args: Any = call.args_as_dict()
    except Exception:
        args = call.args
    return call.tool_name, json.dumps(args, sort_keys=True, default=str)


def _earlier(messages: Sequence[ModelMessage]) -> list[tuple[ToolCallPart, str, str]]:
    """The tool calls of the agent's run before its last response (since the user's last prompt), in order, each
    with its outcome (`success`, `failed`, `denied`, ...; `retried` for arguments refused) and what the model was
    told of it."""
    start = 0
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, ModelRequest) and any(isinstance(part, UserPromptPart) for part in message.parts):
            start = index
            break
    results: dict[str, tuple[str, str]] = {}
    calls: list[ToolCallPart] = []
    for message in messages[start:-1]:
        if isinstance(message, ModelResponse):
            calls.extend(part for part in message.parts if isinstance(part, ToolCallPart))
        else:
            for part in message.parts:
                call_id = getattr(part, "tool_call_id", None)
                if call_id is None or part.part_kind == "user-prompt":
                    continue
                outcome = part.outcome if isinstance(part, ToolReturnPart) else "retried"
                told = part.model_response_str(wrap_if_error=False) if isinstance(part, ToolReturnPart) else ""
                results[call_id] = (outcome, told)
    return [(call, *results[call.tool_call_id]) for call in calls if call.tool_call_id in results]
