"""`ModelGuard`: what every agent run of an entry is held to, and what it says about its reply.

`AgentEntry` runs its agent through a guard, which

- gives the model `GuardedModel`, whose settings carry the default `max_tokens` beneath the model's and the
  agent's own, which ends a request (a streamed reply included) at `request_timeout` unless the settings name
  one, and whose failed connection names the server's address (a password in it hidden), the setting that
  named it and how long the client tried;
- passes pydantic-ai the run's `UsageLimits` (`run_requests`, `run_tokens`) and ends the outermost agent run
  at `run_timeout`;
- turns pydantic-ai's limit errors into `LimitExceeded` errors naming the limit and its setting;
- flags a final reply that looks like an unexecuted tool call or an echoed prompt (`textcalls`), and with
  `suspect_output=retry` asks the model again, or with `text_tool_calls` runs the call it wrote as JSON: those
  two need pydantic-ai's `after_model_request` hook, a capability, passed only when one of them is on.

Both deadlines are timers armed in an empty context: a cancelled timer stays in the event loop until its
deadline, and must keep nothing of the run (pydantic-ai's own `request_timeout` and run `timeout` arm theirs in
the run's context). The guard of the agent run now going is current in a context variable, where its
`GuardedModel` finds it. An `Agent.override(model=...)` (a job's journal model) replaces the guard's model for
the run: the run's limits and checks still hold, but not the default `max_tokens` and `request_timeout`, nor
the named unreachable server.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import (
    ModelConnectionError,
    ModelRequestTimeout,
    ToolFailed,
    UnexpectedModelBehavior,
    UsageLimitExceeded,
    UserError,
)
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models import Model, ModelRequestContext, ModelRequestParameters, StreamedResponse, infer_model
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import UsageLimits

from .._compat import current_run_context, is_output_token_limit
from ..errors import ConfigurationError, shown_url
from ..scopes._tasks import SystemTimeout
from ._limits import (
    LimitExceeded,
    ModelRules,
    RepeatedCall,
    ReplyTooLong,
    RequestTookTooLong,
    RunOverLimit,
    RunTookTooLong,
)
from ._repeats import Repeat, repeat_of
from ._text_calls import named_calls, sent_texts, suspicion, written_call

_CURRENT: ContextVar[ModelGuard | None] = ContextVar("llm_do_model_guard", default=None)


class ModelUnreachable(ModelConnectionError):
    """The model's server could not be reached (or its reply could not be read): the message names its address,
    the setting that named it and how long the client tried."""


class RepliesRefused(UnexpectedModelBehavior):
    """The model's retries ran out: its replies were no answer its entry takes (text where an output model wants a
    call of its output tool, arguments the output model refuses, nothing), its calls of one tool kept being refused
    (arguments, `ModelRetry`), or, with `suspect_output=retry`, its replies kept looking like unexecuted tool calls
    or echoed prompts. The message names the entry and what the model last did or was told."""


def endpoint_of(model: Model) -> tuple[str | None, str | None]:
    """The server `model` sends its requests to (its base URL, if it has one) and the setting that named it:
    an `endpoint_setting` a wrapper declares (`LLM_DO_OPENAI_BASE_URL`), else `OPENAI_BASE_URL` when that is the
    address, else None (given in code, or the provider's default)."""
    setting: str | None = None
    current: Model = model
    while True:
        setting = setting or getattr(current, "endpoint_setting", None)
        if not isinstance(current, WrapperModel):
            break
        current = current.wrapped
    try:
        url = model.base_url
    except Exception:  # a model that cannot be built says why elsewhere
        url = None
    if setting is None and url and os.environ.get("OPENAI_BASE_URL", "").rstrip("/") == url.rstrip("/"):
        setting = "OPENAI_BASE_URL"
    return url, setting


class GuardedModel(WrapperModel):
    """A model held by the guard of the agent run now going (if any): its default settings beneath the model's
    own, its connection failures explained, its requests and replies noted for the guard's checks. A model named
    by a string is built when first used (an `Agent.override` may mean it never is).

    It hands each request straight to the wrapped model, past `WrapperModel`'s own `request`, and keeps its own
    methods as written: pydantic-ai wraps the `request` of every model class at its boundary (a download budget
    per request, special tokens restored in the reply), which the wrapped model's own wrapping already does, and
    which costs a wrapper a few coroutines, a context variable set and reset per request for nothing."""

    def __init__(self, wrapped: Model | str) -> None:
        super().__init__(wrapped if isinstance(wrapped, Model) else _Named(wrapped))

    @property
    def settings(self) -> ModelSettings | None:
        own = self.wrapped.settings
        guard = _CURRENT.get()
        if guard is None or not guard.defaults:
            return own
        merged: dict[str, Any] = {**guard.defaults, **(own or {})}
        return merged  # type: ignore[return-value]

    async def _request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        started = time.monotonic()
        guard = _CURRENT.get()
        seconds = guard.request_deadline(model_settings) if guard is not None else None
        deadline = SystemTimeout(seconds)
        try:
            async with deadline:
                response = await self.wrapped.request(messages, model_settings, model_request_parameters)
        except ModelConnectionError as error:
            raise self._unreachable(error, started) from error
        except TimeoutError as error:
            raise self._too_long(error, deadline, guard, seconds) from error
        if guard is not None:
            guard.params, guard.last = model_request_parameters, response
        return response

    @asynccontextmanager
    async def _request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        started = time.monotonic()
        guard = _CURRENT.get()
        seconds = guard.request_deadline(model_settings) if guard is not None else None
        deadline = SystemTimeout(seconds)
        try:
            async with (
                deadline,
                self.wrapped.request_stream(messages, model_settings, model_request_parameters, run_context) as stream,
            ):
                yield stream  # the deadline covers reading the stream to its end
        except ModelConnectionError as error:
            if isinstance(error, ModelUnreachable):
                raise
            raise self._unreachable(error, started) from error
        except TimeoutError as error:
            raise self._too_long(error, deadline, guard, seconds) from error
        except GeneratorExit:
            # Closed, not thrown into: pydantic-ai's streamed response reads its requests in a generator of its
            # own and closes it when the cancellation of the expired deadline reaches the reader, where that
            # cancellation goes on. The guard names it there (`limit_error`).
            expired = self._too_long(TimeoutError(), deadline, guard, seconds)
            if guard is not None and isinstance(expired, RequestTookTooLong):
                guard.expired_request = expired
            raise
        if guard is not None:
            guard.params, guard.last = model_request_parameters, stream.get()

    def _too_long(
        self, error: TimeoutError, deadline: SystemTimeout, guard: ModelGuard | None, seconds: float | None
    ) -> Exception:
        """The guard's `RequestTookTooLong` when its deadline ran out; any other timeout as it was."""
        if not deadline.expired or guard is None or seconds is None:
            return error
        return RequestTookTooLong(guard.entry, self.model_name, seconds, guard.rules.origin("request_timeout"))

    def _unreachable(self, error: ModelConnectionError, started: float) -> ModelUnreachable:
        url, setting = endpoint_of(self.wrapped)
        where = shown_url(url.rstrip("/")) if url else "its server"
        named = f" (set by {setting})" if setting else " (the model's provider default)" if url else ""
        cause = _innermost(error)
        reading = getattr(error, "phase", None) == "read"
        what = "lost the connection to" if reading else "could not connect to"
        fix = f"set {setting} to the address of a server that runs" if setting else "give the model another address"
        guard = _CURRENT.get()
        of = f" of entry {guard.entry!r}" if guard is not None else ""
        message = (
            f"{what} the model server at {where}{named} for model {self.model_name!r}{of}: {cause}; "
            f"tried for {time.monotonic() - started:.1f} s, the client's retries included. "
            f"Start the server, or {fix}."
        )
        unreachable = ModelUnreachable(self.model_name, message, phase=getattr(error, "phase", None))
        return unreachable


# Set after the class is made, past pydantic-ai's wrapping of every model class's methods (see the class).
GuardedModel.request = GuardedModel._request  # type: ignore[method-assign,assignment]
GuardedModel.request_stream = GuardedModel._request_stream  # type: ignore[method-assign,assignment]


def _cancelling() -> int:
    """How many cancellations of the current task are still pending (asyncio's timeouts take back their own)."""
    task = asyncio.current_task()
    return 0 if task is None else task.cancelling()


class _Named(WrapperModel):
    """A model named by a string, built when first used."""

    def __init__(self, name: str) -> None:
        Model.__init__(self)  # not WrapperModel's: it would build the model now
        self._name = name
        self._built: Model | None = None

    @property
    def wrapped(self) -> Model:
        if self._built is None:
            self._built = infer_model(self._name)
        return self._built

    @wrapped.setter
    def wrapped(self, model: Model) -> None:
        self._built = model


def _innermost(error: BaseException) -> str:
    """What the deepest cause says (`connection refused (Connect call failed ('127.0.0.1', 9))`), else the error."""
    found: BaseException = error
    seen = {id(found)}
    while True:
        below = found.__cause__ or found.__context__
        if below is None or id(below) in seen:
            break
        found = below
        seen.add(id(found))
    text = " ".join(str(found.strerror if isinstance(found, OSError) and found.strerror else found).split())
    names: dict[type[BaseException], str] = {ConnectionRefusedError: "connection refused", TimeoutError: "timed out"}
    named = names.get(type(found))
    if named is not None and named not in text.lower():
        text = f"{named} ({text})" if text else named
    return text or type(found).__name__


@dataclass(frozen=True, slots=True)
class GuardPlan:
    """What an entry's agent runs are held to under one runtime's settings, worked out once (`GuardPlan.of`)."""

    rules: ModelRules
    defaults: Mapping[str, Any]
    """Model settings every request gets unless the agent's or the request's own name them (`max_tokens`)."""
    request_timeout: float | None
    run_timeout: float | None
    usage_limits: UsageLimits
    checks_replies: bool
    """Whether the reply check runs on each reply (`suspect_output=retry`, `text_tool_calls`)."""

    @classmethod
    def of(cls, rules: ModelRules) -> GuardPlan:
        value = rules.value
        requests, tokens = value("run_requests"), value("run_tokens")
        return cls(
            rules,
            MappingProxyType({"max_tokens": value("max_tokens")} if value("max_tokens") else {}),
            float(value("request_timeout")) or None,
            float(value("run_timeout")) or None,
            UsageLimits(request_limit=requests or None, total_tokens_limit=tokens or None),
            rules.suspect_output == "retry" or rules.text_tool_calls,
        )


class ModelGuard:
    """What one agent run of an entry is held to (`rules`) and what it noted; `warnings` are what the call's
    record, its events and the command say about its reply."""

    def __init__(
        self,
        entry: str,
        agent: Agent[Any, Any],
        plan: GuardPlan,
        model: Model | str | None,
        told: Callable[[str], None] | None = None,
    ) -> None:
        self.entry = entry
        self.told = told
        """Told each warning as it is found (the call's event)."""
        self.rules = plan.rules
        self.plan = plan
        own = agent.model_settings if isinstance(agent.model_settings, Mapping) else {}
        self.own_settings = frozenset(own)
        """Model settings the agent names itself: they win over the guard's defaults."""
        self.defaults = plan.defaults
        self.request_timeout = plan.request_timeout
        self.model = None if model is None else GuardedModel(model)
        self.params: ModelRequestParameters | None = None
        """The parameters of the last model request (the tools it offered)."""
        self.last: ModelResponse | None = None
        self.warnings: list[str] = []
        self.timeout = plan.run_timeout if current_run_context() is None else None
        """The run's time limit: a nested agent run ends with the run that asked it."""
        self.usage_limits = plan.usage_limits
        self._token: Any = None
        self._deadline: SystemTimeout | None = None
        self.expired_request: RequestTookTooLong | None = None
        """A streamed request whose deadline ran out while the stream was being read (see `limit_error`)."""

    @property
    def tools(self) -> frozenset[str]:
        """The tools the last model request offered."""
        params = self.params
        return frozenset() if params is None else frozenset([tool.name for tool in params.function_tools])

    def warn(self, warning: str) -> None:
        self.warnings.append(warning)
        if self.told is not None:
            self.told(warning)

    def capabilities(self, given: Sequence[AbstractCapability[Any]]) -> Sequence[AbstractCapability[Any]]:
        """The run's capabilities: `given`, and the reply check when retries or tolerant calls are on."""
        if self.plan.checks_replies:
            return [*given, ReplyCheck(self)]
        return given

    def run_deadline(self) -> SystemTimeout:
        """The outermost agent run's `run_timeout`: past it the run is cancelled (see `limit_error`)."""
        self._deadline = SystemTimeout(self.timeout)
        return self._deadline

    def request_deadline(self, settings: ModelSettings | None) -> float | None:
        """The seconds a request may take, unless its settings name a `request_timeout` (pydantic-ai's, then)."""
        return None if settings and settings.get("request_timeout") is not None else self.request_timeout

    def __enter__(self) -> ModelGuard:
        """The guard is current while its agent runs; then it lets go of all but its warnings (a copy of the run's
        context that outlives it, in a timer or a thread, still refers to the guard)."""
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        _CURRENT.reset(self._token)
        self.last = self.model = self.told = self.params = self._token = self._deadline = self.expired_request = None

    def limit_error(self, error: BaseException) -> Exception | None:
        """The error that pydantic-ai's `error` stands for, naming the limit or the check and its setting
        (`LimitExceeded`, `RepliesRefused`), or the missing model and where to give one; None for others."""
        if isinstance(error, LimitExceeded | RepliesRefused):
            return None
        if isinstance(error, UserError) and str(error).startswith(_NO_MODEL):
            return ConfigurationError(no_model([self.entry]))
        expired = self.expired_request
        if isinstance(error, asyncio.CancelledError) and expired is not None and not _cancelling():
            return expired  # the request deadline's own cancellation, which nobody else asked for as well
        rules = self.rules
        deadline = self._deadline
        if isinstance(error, TimeoutError) and deadline is not None and deadline.expired and self.timeout is not None:
            return RunTookTooLong(self.entry, self.timeout, rules.origin("run_timeout"))
        refused = [warning for warning in self.warnings if warning.endswith("(suspect_output=retry)")]
        if refused and isinstance(error, UnexpectedModelBehavior) and "Exceeded maximum" in str(error):
            return RepliesRefused(
                f"entry {self.entry!r}: the model's replies kept looking like unexecuted tool calls or echoed "
                f"prompts until its retries ran out ({error}; suspect_output=retry, set by "
                f"{rules.origin('suspect_output')}). The last: {refused[-1]}. Give the model clearer instructions, "
                "use one that calls tools, or let text_tool_calls run the calls it writes as JSON "
                "(docs/local-models.md)."
            )
        if isinstance(error, UnexpectedModelBehavior) and str(error).startswith("Exceeded maximum output retries"):
            return RepliesRefused(
                f"entry {self.entry!r}: the model gave no answer the entry takes before its retries ran out "
                f"({error}); the last reply was {_described(self.last)}, and {_wanted(self.params)}. Give the model "
                "clearer instructions or one that calls tools, or let text_tool_calls run the calls it writes as "
                "JSON (docs/local-models.md)."
            )
        tool_retries = _TOOL_RETRIES.match(str(error)) if isinstance(error, UnexpectedModelBehavior) else None
        if tool_retries is not None:
            return RepliesRefused(
                f"entry {self.entry!r}: the model's calls of tool {tool_retries['tool']!r} kept being refused until "
                f"its retries ran out ({tool_retries['count']}); the last refusal: {_refusal(error.__cause__)}. Give "
                "the model clearer instructions or one that calls tools with valid arguments (in code, the agent's "
                "`retries` allows more attempts)."
            )
        if isinstance(error, ModelRequestTimeout) and error.setting == "request_timeout":
            return RequestTookTooLong(self.entry, error.model_name, error.timeout, self._origin("request_timeout"))
        if isinstance(error, UsageLimitExceeded):
            limit = "run_requests" if "request_limit" in str(error) else "run_tokens"
            if "request_limit" in str(error) or "total_tokens_limit" in str(error):
                detail = str(error).split(". Consider")[0]
                return RunOverLimit(self.entry, limit, rules.value(limit), rules.origin(limit), detail)
        mine = "max_tokens" in self.defaults and "max_tokens" not in self.own_settings
        if is_output_token_limit(error) and mine:
            detail = "a tool call was cut off" if "tool call" in str(error) else "it held no usable output"
            return ReplyTooLong(self.entry, self.defaults["max_tokens"], rules.origin("max_tokens"), detail)
        return None

    def _origin(self, name: str) -> str:
        return "the agent's model_settings" if name in self.own_settings else self.rules.origin(name)

    def checked(self, output: Any, messages: Sequence[ModelMessage]) -> list[str]:
        """What to say about the run's final reply (its `output` and whole conversation), added to `warnings`."""
        if isinstance(output, str):
            reason = suspicion(output, self.tools, messages)
            if reason is not None:
                self.warn(reason)
        final = next((m for m in reversed(messages) if isinstance(m, ModelResponse)), None)
        if final is not None and final.finish_reason == "length":
            cap = self.defaults.get("max_tokens") if "max_tokens" not in self.own_settings else None
            where = f" max_tokens={cap} ({self.rules.origin('max_tokens')})" if cap else " its token limit"
            self.warn(f"the reply was cut off at{where}: the output is incomplete")
        return self.warnings


class ReplyCheck(AbstractCapability[Any]):
    """Looks at each reply that would end the run as text: runs the tool call it is written as (`text_tool_calls`),
    or asks the model again when it looks like an unexecuted call or an echoed prompt (`suspect_output=retry`)."""

    def __init__(self, guard: ModelGuard) -> None:
        self.guard = guard

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        params = request_context.model_request_parameters
        if not response.parts or any(not isinstance(part, TextPart) for part in response.parts):
            return response
        text = "".join(part.content for part in response.parts if isinstance(part, TextPart))
        tools = frozenset([tool.name for tool in params.function_tools])
        guard, rules = self.guard, self.guard.rules
        number = sum(isinstance(message, ModelResponse) for message in ctx.messages) + 1
        if rules.text_tool_calls:  # a call of an output tool (`final_result`) counts too: it gives the output
            callable_tools = tools | {tool.name for tool in params.output_tools}
            call = written_call(text, callable_tools, sent_texts(ctx.messages))
            if call is not None:
                name, arguments = call
                guard.warn(
                    f"reply {number} was a call to tool {name!r} written as JSON text; it was run as that call "
                    f"(text_tool_calls, {rules.origin('text_tool_calls')})"
                )
                return replace(response, parts=[ToolCallPart(name, arguments)])
        if rules.suspect_output == "retry" and params.allow_text_output:
            reason = suspicion(text, tools, ctx.messages)
            if reason is not None:
                guard.warn(f"reply {number}: {reason}; the model was asked again (suspect_output=retry)")
                raise ModelRetry(_steer(reason, tools, len(named_calls(text, tools))))
        return response


_NO_MODEL = "`model` must either be set on the agent or included when calling it"
"""pydantic-ai's error for an agent run given no model (and none put in place with `Agent.override`)."""


def no_model(entries: Sequence[str]) -> str:
    """What entries whose agents have no model, on a runtime with none, are told: where a model can come from."""
    named = f"entry {entries[0]!r} has" if len(entries) == 1 else f"entries {', '.join(map(repr, entries))} have"
    agents = "its agent names none" if len(entries) == 1 else "their agents name none"
    return (
        f"{named} no model: {agents}, and the runtime has none. Set LLM_DO_MODEL (provider:name, like "
        "openai:gpt-5.2), give the agent a model (Agent('provider:name', ...)), or give the runtime one "
        "(RuntimeConfig(model=...)); a test can put one in place with agent.override(model=...)"
    )


def refuse_repeat(ctx: RunContext[Any], tool: str, *, weighed: bool) -> None:
    """Refuse the tool call `ctx` runs when it makes a denied or failed call again (`repeat_of`): `ToolFailed`, which
    the model reads instead of a result. A call the approvals weigh (`weighed`) made again right after it ran runs
    again. Past the agent run's `repeated_calls`, either ends the run: `RepeatedCall`. Nothing outside a guarded
    agent run, or with `repeated_calls=0`."""
    guard = _CURRENT.get()
    if guard is None:
        return
    limit = guard.rules.value("repeated_calls")
    if not limit:
        return
    repeat = repeat_of(ctx.messages, ctx.tool_call_id, weighed=weighed)
    if repeat is None:
        return
    if repeat.times > limit:
        origin = guard.rules.origin("repeated_calls")
        raise RepeatedCall(guard.entry, repeat.call, repeat.how, repeat.told, repeat.times, limit, origin)
    if repeat.how != "ran":
        raise ToolFailed(_not_again(tool, repeat))


def _not_again(tool: str, repeat: Repeat) -> str:
    """What the model reads when its call repeats a denied or failed one."""
    if repeat.how == "denied":
        why = "the same call was denied before, and it is not asked again"
        instead = "do something else, or answer and say what could not be done"
    else:
        why = "the same call failed before, and nothing has run since that could change that"
        instead = "change what you pass, do something else, or answer"
    return f"The call to {tool!r} was not run: {why}. Do not make it again: {instead}."


def _steer(reason: str, tools: frozenset[str], calls: int) -> str:
    """What the model reads when its reply is refused: why, and what to do instead (one call at a time, when it
    wrote out a whole plan of calls)."""
    listed = ", ".join(sorted(tools)) or "none"
    one_by_one = (
        f" You wrote {calls} calls at once: call one tool, wait for its result, then the next, because a later "
        "call needs what an earlier one returns (a handle, a value); never make such values up."
        if calls > 1
        else ""
    )
    return (
        f"Your reply was not used: {reason.replace('the reply', 'it', 1)}. To use a tool, call it through "
        f"function calling (your tools: {listed}), not by writing the call in your reply.{one_by_one} When you "
        "have the answer, reply with the answer itself, in plain words."
    )


_TOOL_RETRIES = re.compile(r"Tool '(?P<tool>.+)' exceeded max retries count of (?P<count>\d+)\.")
"""pydantic-ai's error when the model's calls of one tool were refused (arguments, `ModelRetry`) too often."""


def _refusal(cause: BaseException | None) -> str:
    """What the model was last told about its refused call: a `ModelRetry`'s message, or the arguments' errors."""
    if isinstance(cause, ModelRetry):
        return cause.message
    if isinstance(cause, ValidationError):
        shown = [f"{'.'.join(map(str, item['loc'])) or 'arguments'}: {item['msg']}" for item in cause.errors()[:3]]
        more = len(cause.errors()) - len(shown)
        return "; ".join(shown) + (f" (and {more} more)" if more > 0 else "")
    return str(cause) if cause is not None else "not known"


def _described(reply: ModelResponse | None) -> str:
    """A reply as an error message tells it: the tools it called, else its text (cut short), else nothing."""
    if reply is None:
        return "never received"
    calls = [part.tool_name for part in reply.parts if isinstance(part, ToolCallPart)]
    if calls:
        return f"a call of {', '.join(map(repr, calls))}"
    text = "".join(part.content for part in reply.parts if isinstance(part, TextPart)).strip()
    if not text:
        return "empty"
    return f"the text {text if len(text) <= 120 else text[:117] + '...'!r}"


def _wanted(params: ModelRequestParameters | None) -> str:
    """What answer the entry takes, from the parameters of its last request."""
    names = " or ".join(repr(tool.name) for tool in params.output_tools) if params is not None else ""
    if names and params is not None and not params.allow_text_output:
        return f"its answer must be a call of its output tool {names} with arguments its output model takes"
    if names:
        return f"its answer must be text, or a call of {names} with arguments its output model takes"
    return "its answer must be text, or calls of its tools"
