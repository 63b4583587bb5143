"""How a model is held: limits on its replies, requests and runs, what is done with a reply that looks like a
tool call written as text, and the errors that name the limit and the setting that set it.

The same names are settings of the runtime (`LLM_DO_LIMITS__MAX_TOKENS`, `LLM_DO_SUSPECT_OUTPUT`, ...), keys of a
project's `project.toml` and of a worker's frontmatter; the most specific wins. `ModelRules` is what one entry's
agent runs are held to, with the place each value came from, for the errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_ai.exceptions import ModelRequestTimeout, RunTimedOut, UsageLimitExceeded

from ..errors import LlmDoError, shortened

if TYPE_CHECKING:
    from pydantic_ai.exceptions import OutputTokenLimitExceeded
else:  # (pydantic-ai before 2.68 has no such class: its base, UnexpectedModelBehavior, stands for it)
    from .._compat import output_token_limit_exceeded

    OutputTokenLimitExceeded = output_token_limit_exceeded()

SuspectOutput = Literal["flag", "retry"]
"""What is done with a final reply that looks like an unexecuted tool call or an echoed prompt: `flag` it (the
run succeeds, and says so), or `retry`: the model is told why and asked again (the run fails if it goes on)."""


class ModelLimits(BaseModel):
    """Limits on model use (`LLM_DO_LIMITS__MAX_TOKENS`, ...); 0 turns a limit off."""

    model_config = ConfigDict(extra="forbid")

    max_tokens: int = Field(default=8192, ge=0)
    """Tokens one reply may have (the `max_tokens` model setting, unless the agent's own settings name one)."""
    request_timeout: float = Field(default=600.0, ge=0)
    """Seconds one model request may take, from sending it to the last byte of a streamed reply, retries included
    (unless the model settings name pydantic-ai's own `request_timeout`, which then applies)."""
    run_timeout: float = Field(default=3600.0, ge=0)
    """Seconds a run may take, from its first agent run's start (nested calls included)."""
    run_requests: int = Field(default=50, ge=0)
    """Model requests a run may make, nested calls included (pydantic-ai's `UsageLimits.request_limit`)."""
    run_tokens: int = Field(default=0, ge=0)
    """Tokens, input and output, a run may use, nested calls included (`UsageLimits.total_tokens_limit`)."""
    repeated_calls: int = Field(default=2, ge=0)
    """Times an agent may make the same call (tool and arguments) again after it was denied or failed (each is not
    run, and the model reads why), or right after it ran when the approvals weigh it (each runs); once more ends the
    run (`RepeatedCall`). 0: no bound, and a denied or failed call runs again as any call."""


_LIMITS = tuple(ModelLimits.model_fields)
RULE_NAMES = (*_LIMITS, "suspect_output", "text_tool_calls")
"""Every value a `ModelRules` holds."""

_DEFAULTS: dict[str, Any] = {name: field.default for name, field in ModelLimits.model_fields.items()}
_SETTINGS = {
    **{name: f"LLM_DO_LIMITS__{name.upper()}" for name in ModelLimits.model_fields},
    "suspect_output": "LLM_DO_SUSPECT_OUTPUT",
    "text_tool_calls": "LLM_DO_TEXT_TOOL_CALLS",
}


@dataclass(frozen=True, slots=True)
class ModelRules:
    """The limits and checks of an entry's model, each with where it was set (a setting, or a file's key).

    An entry's rules name only what its files set; `over(base)` lays them over the runtime's."""

    values: Mapping[str, Any] = field(default_factory=dict)
    origins: Mapping[str, str] = field(default_factory=dict)
    """Where each value was set, as an error names it: `LLM_DO_LIMITS__MAX_TOKENS`, `limits.max_tokens in a.worker`."""

    @classmethod
    def of_settings(cls, limits: ModelLimits, suspect_output: SuspectOutput, text_tool_calls: bool) -> ModelRules:
        """The runtime's rules, from its settings (`RuntimeConfig`): each named by its variable."""
        values: dict[str, Any] = {name: getattr(limits, name) for name in _LIMITS}
        values["suspect_output"], values["text_tool_calls"] = suspect_output, text_tool_calls
        return cls(values, _SETTINGS)

    def over(self, base: ModelRules) -> ModelRules:
        """These rules, with `base`'s where these set nothing."""
        if not self.values:
            return base
        return ModelRules({**base.values, **self.values}, {**base.origins, **self.origins})

    def value(self, name: str) -> Any:
        return self.values.get(name, _DEFAULTS.get(name))

    def origin(self, name: str) -> str:
        return self.origins.get(name, _SETTINGS[name])

    @property
    def suspect_output(self) -> SuspectOutput:
        value: SuspectOutput = self.values.get("suspect_output", "flag")
        return value

    @property
    def text_tool_calls(self) -> bool:
        return bool(self.values.get("text_tool_calls", False))


class LimitExceeded(LlmDoError):
    """A limit on model use was reached. `limit` is its name (`request_timeout`, ...), `value` its value, `set_by`
    where it was set (a variable, or a file's key): raise the limit there (0 turns it off) if the work needs more."""

    limit: str
    value: float
    set_by: str


def _explained(limit: str, value: float, setting: str, what: str, advice: str) -> str:
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    return f"{what} (limit {limit}={shown}, set by {setting}). {advice}"


class RequestTookTooLong(LimitExceeded, ModelRequestTimeout):
    """One model request (or streamed reply) ran past `request_timeout`; the request was cancelled."""

    def __init__(self, entry: str, model_name: str, value: float, setting: str) -> None:
        ModelRequestTimeout.__init__(self, model_name, value)
        self.limit, self.value, self.set_by = "request_timeout", value, setting
        self.message = _explained(
            "request_timeout",
            value,
            setting,
            f"a model request of entry {entry!r} to {model_name!r} took longer than {value:g} s and was cancelled",
            "A reply that never ends (a small model repeating itself) stops here; if the model is only slow, "
            "raise the limit.",
        )
        self.args = (self.message,)


class RunTookTooLong(LimitExceeded, RunTimedOut):
    """The run went past `run_timeout`; it was cancelled and torn down."""

    def __init__(self, entry: str, value: float, setting: str) -> None:
        self.limit, self.value, self.set_by = "run_timeout", value, setting
        message = _explained(
            "run_timeout",
            value,
            setting,
            f"the run of entry {entry!r} took longer than {value:g} s and was cancelled",
            "Raise the limit if the task needs longer.",
        )
        RunTimedOut.__init__(self, message)
        self.message = message
        self.args = (message,)

    def __str__(self) -> str:
        return self.message


class RunOverLimit(LimitExceeded, UsageLimitExceeded):
    """The run reached `run_requests` model requests or `run_tokens` tokens (nested calls included)."""

    def __init__(self, entry: str, limit: str, value: int, setting: str, detail: str) -> None:
        self.limit, self.value, self.set_by = limit, value, setting
        what = "model requests" if limit == "run_requests" else "tokens"
        message = _explained(
            limit,
            value,
            setting,
            f"the run reached its limit of {value} {what} in entry {entry!r} ({detail})",
            "A model going round in circles stops here; raise the limit if the task needs more.",
        )
        UsageLimitExceeded.__init__(self, message)
        self.message = message
        self.args = (message,)

    def __str__(self) -> str:
        return self.message


class RepeatedCall(LimitExceeded):
    """An agent made the same call (tool and arguments) again more than `repeated_calls` times after it was denied,
    after it failed, or right after it ran; the run was ended. `entry` names the agent's entry, `call` the call."""

    _HOW: ClassVar[Mapping[str, str]] = {
        "denied": "after it was denied",
        "failed": "after it failed, with nothing else run since",
        "ran": "right after it ran, with nothing else run since",
    }

    def __init__(self, entry: str, call: str, how: str, told: str, times: int, value: int, setting: str) -> None:
        self.limit, self.value, self.set_by = "repeated_calls", value, setting
        self.entry, self.call = entry, call
        first = f" ({shortened(told, 200, one_line=True)})" if told else ""
        which = "the last was not run" if how == "ran" else "none of them was run"
        self.message = _explained(
            "repeated_calls",
            value,
            setting,
            f"entry {entry!r} made the call {call} again {times} times {self._HOW.get(how, how)}{first}; {which}, "
            "and the run was ended",
            "A model going round in circles stops here: give it clearer instructions, or one that heeds what its "
            "tools say.",
        )
        super().__init__(self.message)


class ReplyTooLong(LimitExceeded, OutputTokenLimitExceeded):
    """A reply reached `max_tokens` before it held anything usable (a tool call cut off, or no text at all)."""

    def __init__(self, entry: str, value: int, setting: str, detail: str) -> None:
        self.limit, self.value, self.set_by = "max_tokens", value, setting
        message = _explained(
            "max_tokens",
            value,
            setting,
            f"a reply of entry {entry!r} reached {value} tokens before it was complete ({detail})",
            "Raise the limit if replies this long are expected.",
        )
        OutputTokenLimitExceeded.__init__(self, message)
        self.args = (message,)
