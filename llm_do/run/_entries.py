"""Entries: what a runtime can run, as a top-level request or as a tool of another entry."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Annotated, Any, TypeVar, overload

from pydantic import BaseModel, Field, ValidationError, create_model
from pydantic_ai import Agent, RunContext, Tool, capture_run_messages
from pydantic_ai.messages import ModelMessage
from pydantic_ai.tools import ToolDefinition, ToolPrepareFunc
from pydantic_ai.toolsets import FunctionToolset

from .._compat import RUN_ALONE, current_run_context, leaves_out_empty_own_toolset
from ..approvals._facts import AGENT_CALL
from ..di._config import RuntimeConfig
from ..di._specs import ToolsetRef
from ..errors import ToolsetError
from ..events import AgentStarted, CallWarning
from ..files._attachments import TAKES_ATTACHMENTS, check_model, prompt_with
from ..guards._guard import GuardedModel, GuardPlan, ModelGuard
from ..guards._limits import ModelRules
from ._call_scope import CallScope
from ._entry import Entry, Produced

T = TypeVar("T")


def _validated(entry_name: str, schema_in: type[BaseModel], input_data: Any) -> BaseModel:
    if isinstance(input_data, schema_in):
        return input_data
    try:
        if isinstance(input_data, str | bytes):
            return schema_in.model_validate_json(input_data)
        return schema_in.model_validate(input_data)
    except ValidationError as error:
        raise ToolsetError(f"entry {entry_name!r}: input does not match {schema_in.__name__}: {error}") from None


class _Described:
    """What every built-in entry declares: a name, its toolsets, its input schema, a description."""

    def __init__(
        self,
        *,
        name: str,
        toolsets: Sequence[ToolsetRef],
        schema_in: type[BaseModel] | None,
        description: str | None,
    ) -> None:
        _check_name(name)
        self._name = name
        self._toolsets = tuple(toolsets)
        self._schema_in = schema_in
        self._description = description

    @property
    def name(self) -> str:
        return self._name

    @property
    def toolsets(self) -> tuple[ToolsetRef, ...]:
        return self._toolsets

    @property
    def schema_in(self) -> type[BaseModel] | None:
        return self._schema_in

    @property
    def description(self) -> str | None:
        return self._description

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name!r}, toolsets={list(self._toolsets)})"


class AgentEntry(_Described):
    """A pydantic-ai `Agent` as an entry. The agent gets the `CallScope` as `deps`.

    An agent without a name takes the entry's, so that pydantic-ai's spans and logs name the entry
    (`invoke_agent clerk`); an agent named otherwise runs under the entry's name. Tools registered
    on the agent itself (`@agent.tool`, `tools=`, `toolsets=`) run beside the call's toolsets, as
    pydantic-ai runs them: llm-do's approval policies gate the call's toolsets only.
    """

    def __init__(
        self,
        agent: Agent[Any, Any],
        *,
        name: str,
        toolsets: Sequence[ToolsetRef] = (),
        schema_in: type[BaseModel] | None = None,
        description: str | None = None,
        rules: ModelRules | None = None,
        takes_attachments: bool = False,
    ) -> None:
        super().__init__(name=name, toolsets=toolsets, schema_in=schema_in, description=description)
        self.agent = agent
        self.rules = rules or ModelRules()
        """Limits and reply checks of this entry's model over the runtime's (see `llm_do.guards`)."""
        self.takes_attachments = takes_attachments
        """Whether another agent calling this entry as a tool is always offered its `attachments` parameter."""
        if agent.name is None:
            agent.name = name
        self._renamed = agent.name != name
        """The agent carries another name (another entry's, say): each run overrides it with this one."""
        self._alone = leaves_out_empty_own_toolset(agent)
        self._planned: tuple[RuntimeConfig, GuardPlan] | None = None
        """The call's toolsets can be the only ones of the agent's runs when it has no tool of its own."""

    def _plan(self, config: RuntimeConfig) -> GuardPlan:
        """The guard's plan under `config`, worked out once per runtime (the last one's kept)."""
        planned = self._planned
        if planned is None or planned[0] is not config:
            planned = self._planned = (config, GuardPlan.of(self.rules.over(config.rules)))
        return planned[1]

    def _prompt(self, input_data: Any) -> Any:
        if self._schema_in is not None:
            return _validated(self._name, self._schema_in, input_data).model_dump_json()
        if isinstance(input_data, BaseModel):
            return input_data.model_dump_json()
        if isinstance(input_data, str | list | tuple):
            return input_data
        raise ToolsetError(
            f"entry {self._name!r} takes a text prompt, got {type(input_data).__name__}; "
            "give the entry a schema_in model to accept structured input"
        )

    async def run_turn(self, scope: CallScope, input_data: Any) -> Any:
        agent = self.agent
        model = scope._config.model if agent.model is None else None
        sink = scope._sink
        if sink is not None:
            sink.emit(AgentStarted(scope._tag(), model if agent.model is None else agent.model))
        prompt = self._prompt(input_data)
        if scope.attachments:
            check_model(scope.attachments, model if agent.model is None else agent.model)
            prompt = prompt_with(prompt, scope.attachments)
        renamed = agent.override(name=self._name) if self._renamed else None
        if renamed is not None:
            renamed.__enter__()
        alone = RUN_ALONE.set(agent) if self._alone and scope._toolsets else None
        told = None if sink is None else lambda warning: sink.emit(CallWarning(scope._tag(), warning))
        guard = ModelGuard(
            self._name, agent, self._plan(scope._config), model if agent.model is None else agent.model, told
        )
        messages: list[ModelMessage] = []
        conversation: list[ModelMessage] = []
        try:
            with capture_run_messages() as captured, guard:
                try:
                    async with guard.run_deadline():
                        result = await agent.run(
                            prompt,
                            message_history=scope.message_history,
                            toolsets=scope._toolsets,
                            capabilities=guard.capabilities(scope._capabilities),
                            deps=scope,
                            usage=scope.state.usage,
                            usage_limits=guard.usage_limits,
                            model=guard.model,
                            event_stream_handler=scope._event_stream_handler,
                        )
                except BaseException as error:
                    messages = _added(captured, scope.message_history)  # for the call's usage and log
                    limit = guard.limit_error(error)
                    if limit is not None:
                        raise limit from error
                    raise
                messages = result.new_messages()
                conversation = list(result.all_messages())  # pydantic-ai's list is emptied when the call ends
                guard.checked(result.output, conversation)
        finally:
            if alone is not None:
                RUN_ALONE.reset(alone)
            if renamed is not None:
                renamed.__exit__(None, None, None)
            scope._report(Produced(messages, conversation, tuple(guard.warnings)))
        return result.output


def _added(captured: list[ModelMessage], history: list[ModelMessage] | None) -> list[ModelMessage]:
    """The messages a failed run added: what pydantic-ai captured, less the history it was given
    (which it keeps as the same objects unless it had to repair them)."""
    given = {id(message) for message in history or ()}
    return [message for message in captured if id(message) not in given]


class FunctionEntry(_Described):
    """An async function `(scope, input) -> output` that orchestrates with the scope's tools and agents."""

    def __init__(
        self,
        func: Callable[[CallScope, Any], Awaitable[Any]],
        *,
        name: str,
        toolsets: Sequence[ToolsetRef] = (),
        schema_in: type[BaseModel] | None = None,
        description: str | None = None,
        takes_attachments: bool = False,
    ) -> None:
        super().__init__(name=name, toolsets=toolsets, schema_in=schema_in, description=description)
        self.func = func
        self.takes_attachments = takes_attachments
        """Whether an agent calling this entry as a tool is always offered its `attachments` parameter."""

    async def run_turn(self, scope: CallScope, input_data: Any) -> Any:
        if self._schema_in is not None:
            input_data = _validated(self._name, self._schema_in, input_data)
        return await self.func(scope, input_data)


def made_agent(
    creator: Entry, name: str, instructions: str, toolsets: Sequence[str], description: str | None
) -> AgentEntry:
    """The entry of an agent a call makes (`CallScope.make_agent`): `instructions`, the toolsets named (checked by
    the caller), the creator's rules, and the model the creator's agent run is using (so that a journal or a
    test's override around it holds the made agent too), else the creator's agent's own, else the runtime's."""
    context = current_run_context()
    model: Any = context.model if context is not None else None
    while isinstance(model, GuardedModel):  # the creator's guard: the made agent's run gets its own
        model = model.wrapped
    if model is None and isinstance(creator, AgentEntry):
        model = creator.agent.model
    rules = creator.rules if isinstance(creator, AgentEntry) else None
    agent: Agent[Any, str] = Agent(model, instructions=instructions, name=name)
    return AgentEntry(agent, name=name, toolsets=toolsets, description=description, rules=rules)


@overload
def entry(func: Callable[[CallScope, Any], Awaitable[Any]], /) -> FunctionEntry: ...
@overload
def entry(
    *,
    name: str | None = None,
    toolsets: Sequence[ToolsetRef] = (),
    schema_in: type[BaseModel] | None = None,
    description: str | None = None,
    takes_attachments: bool = False,
) -> Callable[[Callable[[CallScope, Any], Awaitable[Any]]], FunctionEntry]: ...
def entry(
    func: Callable[[CallScope, Any], Awaitable[Any]] | None = None,
    /,
    *,
    name: str | None = None,
    toolsets: Sequence[ToolsetRef] = (),
    schema_in: type[BaseModel] | None = None,
    description: str | None = None,
    takes_attachments: bool = False,
) -> FunctionEntry | Callable[[Callable[[CallScope, Any], Awaitable[Any]]], FunctionEntry]:
    """Turn an async function `(scope, input)` into an entry; name and description default to its own."""

    def wrap(f: Callable[[CallScope, Any], Awaitable[Any]]) -> FunctionEntry:
        doc = (f.__doc__ or "").strip() or None
        return FunctionEntry(
            f,
            name=name or f.__name__,
            toolsets=toolsets,
            schema_in=schema_in,
            description=description or doc,
            takes_attachments=takes_attachments,
        )

    return wrap(func) if func is not None else wrap


def entry_toolset(target: Entry) -> FunctionToolset[Any]:
    """A stateless toolset with one tool that runs `target` as a child call of the calling scope.

    The tool takes the entry's input (`input`, or the fields of its `schema_in` model) and
    `attachments`: names of files to hand over (see docs/attachments.md), offered to the calling model when
    the entry takes files (`takes_attachments`) or the caller received some to hand on. Like every toolset a
    scope lends out, it is gated by the approval policy of its name (the entry's).
    """
    schema_in = target.schema_in
    takes = schema_in is None or "attachments" not in schema_in.model_fields  # else the entry's own field wins
    call: Callable[..., Awaitable[Any]]
    if schema_in is None:

        async def call_text(ctx: RunContext[Any], input: str, attachments: _Names) -> Any:
            return await _hand_over(ctx, target, input, attachments)

        call = call_text
    else:
        typed = _with_attachments(schema_in) if takes else schema_in

        async def call_typed(ctx: RunContext[Any], input: Any) -> Any:  # one model: its fields are the tool's
            if typed is schema_in:
                return await _hand_over(ctx, target, input, [])
            own = {name: getattr(input, name) for name in schema_in.model_fields}
            given = schema_in.model_construct(input.model_fields_set - {"attachments"}, **own)
            return await _hand_over(ctx, target, given, input.attachments)

        call_typed.__annotations__ = {**call_typed.__annotations__, "input": typed}
        call = call_typed
    description = target.description or f"Ask the {target.name!r} agent to do a task and return its answer."
    # The typed tool takes one model, which pydantic-ai hands over as its `input` argument.
    metadata: dict[str, Any] = {AGENT_CALL: True}  # without a declared policy, calling an agent asks nothing
    if takes:
        metadata[TAKES_ATTACHMENTS] = True if schema_in is None else "input"
    offered = not takes or getattr(target, "takes_attachments", False)  # else only to a caller holding files
    prepare: ToolPrepareFunc[Any] | None = None if offered else _attachments_when_held
    tool: Tool[Any] = Tool(
        call, name=target.name, description=description, takes_ctx=True, metadata=metadata, prepare=prepare
    )
    return FunctionToolset([tool])


def _attachments_when_held(ctx: RunContext[Any], definition: ToolDefinition) -> ToolDefinition:
    """A tool's `prepare`: its `attachments` parameter is offered only to a caller that received files to hand on.

    An entry that does not take files (`takes_attachments`) gets none from a caller that has none: a small model
    offered the parameter fills it with `[]`, or drops the question for it. A call that passes it anyway is still
    accepted (its files are read and handed over as usual)."""
    if getattr(ctx.deps, "attachments", ()):
        return definition
    schema = dict(definition.parameters_json_schema)
    schema["properties"] = {k: v for k, v in schema.get("properties", {}).items() if k != "attachments"}
    if "required" in schema:
        schema["required"] = [name for name in schema["required"] if name != "attachments"]
    return replace(definition, parameters_json_schema=schema)


@functools.cache
def _with_attachments(schema_in: type[BaseModel]) -> type[BaseModel]:
    """`schema_in` with an `attachments` field (made once per model: building a model costs milliseconds)."""
    fields: Any = {"attachments": (list[str], Field(default_factory=list, description=_NAMES_DESCRIPTION))}
    return create_model(schema_in.__name__, __base__=schema_in, __module__=schema_in.__module__, **fields)


def _hand_over(ctx: RunContext[Any], target: Entry, input_data: Any, attachments: Sequence[str]) -> Awaitable[Any]:
    """The child call the tool awaits (not a coroutine of its own: each level is resumed at every step
    of the child's run)."""
    scope = ctx.deps
    if not isinstance(scope, CallScope):
        raise ToolsetError(f"tool {target.name!r} must run inside an llm-do CallScope")
    if attachments:
        return _hand_over_attached(scope, ctx.tool_call_id, target, input_data, attachments)
    return scope._call_child(target.name, input_data, tool_call_id=ctx.tool_call_id)


async def _hand_over_attached(
    scope: CallScope, tool_call_id: str | None, target: Entry, input_data: Any, attachments: Sequence[str]
) -> Any:
    handed = await scope._attachments_for(tool_call_id, attachments)
    return await scope._call_child(target.name, input_data, tool_call_id=tool_call_id, attachments=handed)


_NAMES_DESCRIPTION = (
    "Files to hand over with the input, by name: files under the project root (like 'reports/q3.pdf'), "
    "or attachments you received yourself"
)
_Names = Annotated[list[str], Field(default_factory=list, description=_NAMES_DESCRIPTION)]


def _check_name(name: str) -> None:
    if not name or not name.replace("-", "_").isidentifier():
        raise ValueError(f"entry name must look like an identifier (letters, digits, _ or -), got {name!r}")
