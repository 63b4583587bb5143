"""`ScriptedModel`: a `FunctionModel` that plays tool calls and final texts, and says clearly when it can't;
`answering`: a model that answers every request with a function of the turn; `response`: a step as a `ModelResponse`."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from llm_do.errors import shortened

__all__ = [
    "Returned",
    "ScriptError",
    "ScriptedModel",
    "Step",
    "ToolCall",
    "Turn",
    "answering",
    "response",
    "returned",
    "tool_call",
]


class ScriptError(AssertionError):
    """The scripted model could not follow its script: it ran out, or the agent's tools did not match."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call the scripted model makes. Build it with `tool_call(name, **args)`."""

    tool: str
    args: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Returned:
    """Stands for what a tool last returned in the conversation. Build it with `returned(tool)`."""

    tool: str

    def __repr__(self) -> str:
        return f"returned({self.tool!r})"


def tool_call(tool: str, /, **args: Any) -> ToolCall:
    """A step that calls `tool` with `args`; an argument may be `returned("other_tool")`."""
    return ToolCall(tool, args)


def returned(tool: str) -> Any:
    """Placeholder for the latest value `tool` returned in this conversation (a handle, an id, ...)."""
    return Returned(tool)


@dataclass(frozen=True, slots=True)
class Turn:
    """One request the agent made to the scripted model."""

    index: int
    """0 for the model's first response, counted across every run that used this model."""
    messages: list[ModelMessage]
    info: AgentInfo

    @property
    def step(self) -> int:
        """How many responses this conversation already has (0 for its first request; a session's history counts)."""
        return sum(isinstance(message, ModelResponse) for message in self.messages)

    @property
    def steps_since_prompt(self) -> int:
        """How many responses the model gave since the latest prompt: 0 for the first request of each run, in a
        session too (where `step` counts the history)."""
        since = 0
        for message in reversed(self.messages):
            if isinstance(message, ModelResponse):
                since += 1
            elif any(isinstance(part, UserPromptPart) for part in message.parts):
                break
        return since

    @property
    def latest_prompt(self) -> str:
        """The latest prompt's text: the message this run answers (in a session, `prompt` is the conversation's
        first)."""
        for message in reversed(self.messages):
            if isinstance(message, ModelRequest):
                text = _prompt_text(message)
                if text is not None:
                    return text
        return ""

    @property
    def offered(self) -> tuple[str, ...]:
        """Names of the tools the agent offered (function tools, then output tools)."""
        return tuple(tool.name for tool in (*self.info.function_tools, *self.info.output_tools))

    @property
    def prompt(self) -> str:
        """The conversation's first text prompt (of a prompt with attachments, its first text)."""
        for message in self.messages:
            if isinstance(message, ModelRequest):
                text = _prompt_text(message)
                if text is not None:
                    return text
        return ""

    @property
    def returns(self) -> list[Any]:
        """Contents of the tool returns and retry prompts in the latest request."""
        last = self.messages[-1] if self.messages else None
        if not isinstance(last, ModelRequest):
            return []
        return [part.content for part in last.parts if isinstance(part, ToolReturnPart | RetryPromptPart)]

    def returned(self, tool: str) -> Any:
        """The latest value `tool` returned in this conversation."""
        for message in reversed(self.messages):
            if isinstance(message, ModelRequest):
                for part in reversed(message.parts):
                    if isinstance(part, ToolReturnPart) and part.tool_name == tool:
                        return part.content
        raise ScriptError(
            f"step {self.index + 1} uses returned({tool!r}), but no {tool!r} call has returned in this "
            f"conversation yet; {_last_request(self.messages)}"
        )


def _prompt_text(request: ModelRequest) -> str | None:
    """The first text of the request's prompt (of a prompt with attachments, its first text), None without one."""
    for part in request.parts:
        if isinstance(part, UserPromptPart):
            if isinstance(part.content, str):
                return part.content
            texts = [item for item in part.content if isinstance(item, str)]
            if texts:
                return texts[0]
    return None


Step: TypeAlias = "str | ToolCall | Sequence[ToolCall] | ModelResponse | Callable[[Turn], Step]"
"""A final text, one tool call, several parallel tool calls, a raw response, or a function of the turn."""


class ScriptedModel(FunctionModel):
    """A model that answers each request with the next step of its script.

    ```python
    model = ScriptedModel(tool_call("begin"), tool_call("commit", txn=returned("begin")), "Done.")
    ```

    It answers streamed requests too (a run with an `event_stream_handler`, a live run): text comes
    word by word, each tool call whole. Steps are used in order across every run that uses the model
    (for an agent that many runs share, `answering` starts again in each conversation).
    It raises `ScriptError`, saying what the agent last sent, when the script runs out, when a step
    calls a tool the agent does not offer, and, when `tools` is given, when the agent offers a
    different set of tools.
    """

    def __init__(self, *steps: Step, tools: Iterable[str] | None = None, name: str = "scripted") -> None:
        self.steps: list[Step] = list(steps)
        self.turns: list[Turn] = []
        """Every request the model was asked to answer, in order."""
        self.tools = None if tools is None else frozenset(tools)
        super().__init__(self._respond, stream_function=self._stream, model_name=name)

    @property
    def remaining(self) -> int:
        """Steps not used yet."""
        return max(len(self.steps) - len(self.turns), 0)

    def assert_done(self) -> None:
        """Fail when some steps were never used: the agent stopped earlier than the script expected."""
        if self.remaining:
            unused = ", ".join(_describe(step) for step in self.steps[len(self.turns) :])
            raise ScriptError(
                f"scripted model {self.model_name!r} used {len(self.turns)} of {len(self.steps)} steps; "
                f"never used: {unused}"
            )

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = Turn(len(self.turns), list(messages), info)
        self.turns.append(turn)
        self._check_offered(turn)
        if turn.index >= len(self.steps):
            raise ScriptError(
                f"scripted model {self.model_name!r} ran out of steps: the agent asked for response "
                f"{turn.index + 1} but the script has {len(self.steps)}; {_last_request(messages)}"
            )
        step = self.steps[turn.index]
        while callable(step):
            step = step(turn)
        return self._response(step, turn)

    async def _stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        for delta in _streamed(self._respond(messages, info)):
            yield delta

    def _check_offered(self, turn: Turn) -> None:
        if self.tools is None:
            return
        offered = {tool.name for tool in turn.info.function_tools}
        unexpected, missing = sorted(offered - self.tools), sorted(self.tools - offered)
        if unexpected or missing:
            problems = [f"unexpected tool(s) offered: {', '.join(unexpected)}"] if unexpected else []
            problems += [f"expected tool(s) not offered: {', '.join(missing)}"] if missing else []
            raise ScriptError(
                f"scripted model {self.model_name!r}, response {turn.index + 1}: {'; '.join(problems)} "
                f"(the script expects exactly: {', '.join(sorted(self.tools)) or 'no tools'})"
            )

    def _response(self, step: Step, turn: Turn) -> ModelResponse:
        if isinstance(step, str):
            if not turn.info.allow_text_output:
                raise ScriptError(
                    f"step {turn.index + 1} answers with text, but the agent wants structured output: "
                    f"script tool_call({turn.info.output_tools[0].name!r}, ...) instead"
                )
            return ModelResponse(parts=[TextPart(step)])
        answer = _as_response(step, turn)
        for part in answer.parts:
            if isinstance(part, ToolCallPart) and part.tool_name not in turn.offered:
                raise ScriptError(
                    f"step {turn.index + 1} calls tool {part.tool_name!r}, which the agent does not offer; "
                    f"it offers: {', '.join(turn.offered) or 'no tools'} (check the entry's toolsets)"
                )
        return answer


def _streamed(response: ModelResponse) -> Iterator[str | DeltaToolCalls]:
    """A response as a streamed one: its text word by word, each tool call whole."""
    for index, part in enumerate(response.parts):
        if isinstance(part, TextPart):
            for number, word in enumerate(part.content.split(" ")):
                yield word if number == 0 else f" {word}"
        elif isinstance(part, ToolCallPart):
            yield {index: DeltaToolCall(part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id)}


def answering(answer: Callable[[Turn], Step], *, threads: bool = True) -> FunctionModel:
    """A model that answers every request with `answer(turn)`, a step: for an agent that many runs share.

    ```python
    model = answering(lambda turn: tool_call("lookup", name=turn.prompt) if turn.step == 0 else "Done.")
    ```

    `turn.step` counts the responses of the request's own conversation, so each run starts again at 0. The
    model never runs out, keeps no turns, and does not check answers against the agent's tools (a test can call a
    tool the agent lacks, to see what it is told). It answers streamed requests too (a live run), as
    `ScriptedModel` does. pydantic-ai runs a sync model function in worker threads,
    and an idle thread keeps its last job (the messages) until it takes another; `threads=False` answers on the
    event loop instead, as a real model's async client does: for tests that count what stays alive.
    """
    turns = itertools.count()

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = Turn(next(turns), list(messages), info)
        step = answer(turn)
        while callable(step):
            step = step(turn)
        return _as_response(step, turn)

    async def respond_on_the_loop(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return respond(messages, info)

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        for delta in _streamed(respond(messages, info)):
            yield delta

    return FunctionModel(respond if threads else respond_on_the_loop, stream_function=stream, model_name="answering")


def response(step: str | ToolCall | Sequence[ToolCall] | ModelResponse) -> ModelResponse:
    """The pydantic-ai `ModelResponse` a step stands for, for code that answers with responses (a `FunctionModel`).

    `response("Done.")` is a final text, `response(tool_call("stock", sku="pen"))` one tool call, and a list
    of tool calls parallel calls. A `returned(...)` argument needs a conversation: use it in a script instead.
    """
    return _as_response(step, None)


def _as_response(step: Step, turn: Turn | None) -> ModelResponse:
    if isinstance(step, str):
        return ModelResponse(parts=[TextPart(step)])
    if isinstance(step, ModelResponse):
        return step
    if callable(step):
        raise ScriptError(f"{_describe(step)} is a function of the turn; call response() with what it returns")
    calls: list[ToolCall] = [step] if isinstance(step, ToolCall) else list(step)
    return ModelResponse(
        parts=[ToolCallPart(call.tool, {k: _resolve(v, turn) for k, v in call.args.items()}) for call in calls]
    )


def _resolve(value: Any, turn: Turn | None) -> Any:
    if isinstance(value, Returned):
        if turn is None:
            raise ScriptError(f"{value!r} needs a conversation: use it in a script, not in response()")
        return turn.returned(value.tool)
    if isinstance(value, list | tuple):
        return type(value)(_resolve(item, turn) for item in value)
    if isinstance(value, dict):
        return {key: _resolve(item, turn) for key, item in value.items()}
    return value


def _describe(step: Step) -> str:
    if isinstance(step, str):
        return repr(shortened(step, 120))
    if isinstance(step, ToolCall):
        return f"tool_call({step.tool!r})"
    if isinstance(step, ModelResponse):
        return "a ModelResponse"
    if callable(step):
        return f"{getattr(step, '__name__', 'a function')}(turn)"
    return "[" + ", ".join(_describe(item) for item in step) + "]"


def _last_request(messages: Sequence[ModelMessage]) -> str:
    last = messages[-1] if messages else None
    if not isinstance(last, ModelRequest):
        return "no request yet"
    seen: list[str] = []
    for part in last.parts:
        if isinstance(part, UserPromptPart):
            seen.append(f"prompt {shortened(part.content, 120)!r}")
        elif isinstance(part, ToolReturnPart):
            seen.append(f"{part.tool_name} returned {shortened(part.content, 120)!r}")
        elif isinstance(part, RetryPromptPart):
            seen.append(f"retry for {part.tool_name or 'the output'}: {shortened(part.content, 120)!r}")
    return f"the agent's last request had: {'; '.join(seen) or 'nothing'}"
