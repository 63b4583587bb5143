"""`Toolset`: a toolset class whose tools are described once per class and bound to each instance."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar, overload

from pydantic_ai import RunContext, Tool
from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, ToolsetTool
from pydantic_core import ValidationError

from ..approvals._facts import READ_ONLY, ToolTraits
from ..approvals._policy import ToolPolicy
from ..errors import ConfigurationError
from ..scopes._teardown import never_closed, no_op_context
from ._injection import injected_parameters, resolve_injections, unwrapped, visible_signature
from ._sync import run_sync_tool

no_op_context(AbstractToolset)  # its __aenter__ and __aexit__ do nothing: a scope need not call them
never_closed(AbstractToolset)  # a toolset's close() may be a tool: released by __aexit__ or cleanup() only

F = TypeVar("F", bound=Callable[..., Any])
_MARK = "__llm_do_tool__"


@dataclass(frozen=True, slots=True)
class _ToolOptions:
    name: str | None
    description: str | None
    requires_approval: bool
    read_only: bool
    thread: bool


@dataclass(frozen=True, slots=True)
class _ToolDescription:
    method: str
    tool_def: ToolDefinition
    validator: Any
    takes_ctx: bool
    injections: Mapping[str, object]
    """The parameters the container fills (`Provide[...]`), hidden from the tool's schema."""
    function: Callable[..., Any]
    off_loop: bool
    """A sync method not declared `thread=False`: it runs on its run's own thread."""


@overload
def tool(func: F, /) -> F: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    read_only: bool = False,
    thread: bool = True,
) -> Callable[[F], F]: ...
def tool(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    read_only: bool = False,
    thread: bool = True,
) -> F | Callable[[F], F]:
    """Mark a `Toolset` method as a tool. The method stays an ordinary method.

    `read_only=True` declares that the tool changes nothing and sends nothing anywhere: without a declared
    policy for its toolset it runs without asking, while a tool not so declared asks (`approval_default`).
    `requires_approval=True` makes it ask whatever its policy allows.

    A parameter the container fills is declared as dependency-injector declares one (`repo: Repo =
    Provide[App.repo]`, or `Annotated[Repo, Provide[App.repo]]`): the model never sees it, and each call gets
    the object of the call's scope (a plain function tool declares them with `llm_do.injected`).

    A sync method runs off the event loop, on its run's own thread, after the run's other sync tools (one at a
    time); `thread=False` runs it on the event loop instead, for a quick tool that uses the loop or an object
    made on the loop's thread (docs/toolset-state.md, "Sync tools")."""
    if requires_approval and read_only:
        raise TypeError("a tool cannot be both read_only and requires_approval: choose one")

    def mark(method: F) -> F:
        setattr(method, _MARK, _ToolOptions(name, description, requires_approval, read_only, thread))
        return method

    return mark(func) if func is not None else mark


class Toolset(AbstractToolset[Any]):
    """Base class for stateful toolsets built fresh for each call.

    Methods marked with `@tool` become tools. Their JSON schemas and validators are derived
    once per class, on first use, so creating an instance costs no more than the class's own
    `__init__`. A method may take a `RunContext` first; its docstring describes the tool.
    Sync methods run on the event loop thread (keep them quick, or make them `async`).

    `default_policy` is the approval policy of a toolset name that builds this class when no
    policy is declared for that name (container, `Runtime(policies=)`); settings overrides
    (`LLM_DO_APPROVAL_POLICIES__...`) still apply on top of it.
    """

    default_policy: ClassVar[ToolPolicy | None] = None
    _llm_do_described: ClassVar[dict[str, _ToolDescription] | None] = None
    _llm_do_tool_names: ClassVar[frozenset[str] | None] = None
    _llm_do_asks: ClassVar[bool | None] = None
    _llm_do_traits: ClassVar[dict[str, ToolTraits] | None] = None

    @property
    def id(self) -> str | None:
        return None

    @classmethod
    def tool_names(cls) -> frozenset[str]:
        """Names of this class's tools, known without building any schema."""
        names = cls.__dict__.get("_llm_do_tool_names")
        if names is None:
            names = frozenset(options.name or attr for attr, options in _marked_methods(cls).items())
            cls._llm_do_tool_names = names
        return names

    @classmethod
    def asks_for_approval(cls) -> bool:
        """Whether a tool of this class is declared with `requires_approval=True`."""
        asks = cls.__dict__.get("_llm_do_asks")
        if asks is None:
            asks = any(options.requires_approval for options in _marked_methods(cls).values())
            cls._llm_do_asks = asks
        return asks

    @classmethod
    def tool_traits(cls) -> dict[str, ToolTraits]:
        """What each tool of this class declares (read-only, `requires_approval`), known without building any
        schema."""
        traits = cls.__dict__.get("_llm_do_traits")
        if traits is None:
            traits = {
                options.name or attr: ToolTraits(
                    read_only=options.read_only, requires_approval=options.requires_approval
                )
                for attr, options in _marked_methods(cls).items()
            }
            cls._llm_do_traits = traits
        return dict(traits)

    @classmethod
    def _described(cls) -> dict[str, _ToolDescription]:
        described = cls.__dict__.get("_llm_do_described")
        if described is None:
            described = {}
            for attr, options in _marked_methods(cls).items():
                item = _describe(getattr(cls, attr), attr, options)
                described[item.tool_def.name] = item
            cls._llm_do_described = described
        return described

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        return {
            name: ToolsetTool(
                toolset=self, tool_def=item.tool_def, max_retries=ctx.max_retries, args_validator=item.validator
            )
            for name, item in self._described().items()
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        item = self._described()[name]
        if item.injections:
            asked_by = f"{type(self).__qualname__}.{item.method}"
            tool_args = {**tool_args, **await resolve_injections(ctx.deps, item.injections, asked_by)}
            method = item.function.__get__(self, type(self))
        else:
            method = getattr(self, item.method)
        if item.off_loop:
            body = (
                functools.partial(method, ctx, **tool_args)
                if item.takes_ctx
                else functools.partial(method, **tool_args)
            )
            return await run_sync_tool(body, self, f"tool {name!r} of {type(self).__qualname__}")
        result = method(ctx, **tool_args) if item.takes_ctx else method(**tool_args)
        if inspect.isawaitable(result):
            result = await result
        return result


def _marked_methods(cls: type) -> dict[str, _ToolOptions]:
    marked: dict[str, _ToolOptions] = {}
    for klass in reversed(cls.__mro__):
        for attr, value in vars(klass).items():
            options = getattr(value, _MARK, None)
            if isinstance(options, _ToolOptions):
                marked[attr] = options
            else:
                marked.pop(attr, None)  # overridden without @tool: no longer a tool
    return marked


def _describe(marked: Callable[..., Any], attr: str, options: _ToolOptions) -> _ToolDescription:
    method = unwrapped(marked)
    injections = injected_parameters(method)
    signature = visible_signature(method, injections)
    parameters = list(signature.parameters.values())[1:]  # drop self
    for parameter in parameters:
        if parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL):
            raise TypeError(f"tool {method.__qualname__}: parameter {parameter.name!r} must be passable by keyword")

    def unbound(*args: Any, **kwargs: Any) -> Any:  # only its signature is used
        raise AssertionError("schema stub called")

    functools.update_wrapper(unbound, method)
    unbound.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    described = Tool(
        unbound,
        name=options.name or attr,
        description=options.description,
        requires_approval=options.requires_approval,
        metadata={READ_ONLY: True} if options.read_only else None,
    )
    return _ToolDescription(
        method=attr,
        tool_def=described.tool_def,
        validator=ReadableArguments(described.function_schema.validator),
        takes_ctx=described.function_schema.takes_ctx,
        injections=injections,
        function=method,
        off_loop=options.thread and not inspect.iscoroutinefunction(method),
    )


class ReadableArguments:
    """A tool's argument validator whose errors the model can always be shown.

    A model can send text that is not valid Unicode (a lone surrogate: `\\ud800` in JSON, or decoded so by
    a provider's SDK). pydantic-ai writes a validation error into the retry prompt as JSON, which such text
    cannot be, and the run failed with `UnicodeEncodeError`; here the text is shown escaped instead.
    """

    __slots__ = ("inner",)

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def validate_python(self, input: Any, **options: Any) -> Any:
        try:
            return self.inner.validate_python(input, **options)
        except ValidationError as error:
            raise _readable(error) from None

    def validate_json(self, input: str | bytes | bytearray, **options: Any) -> Any:
        try:
            return self.inner.validate_json(input, **options)
        except ValidationError as error:
            raise _readable(error) from None


def _readable(error: ValidationError) -> Exception:
    try:
        error.json()
        return error
    except ValueError:  # (pydantic-core reports unencodable text as a plain ValueError)
        pass
    safe: list[Any] = [
        {key: _escape(value) if key in ("loc", "input") else value for key, value in detail.items() if key != "msg"}
        for detail in error.errors(include_url=False)
    ]
    try:
        escaped = ValidationError.from_exception_data(error.title, safe)
        escaped.json()
        return escaped
    except (TypeError, ValueError, KeyError):  # an error pydantic-core cannot rebuild, or text elsewhere
        return ModelRetry(f"the arguments are not valid:\n{_escape(str(error))}")


def _escape(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_escape(key): _escape(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_escape(item) for item in value)
    return value


def known_tool_names(toolset: object) -> frozenset[str] | None:
    """Tool names known without a run: of a `Toolset` class or instance, or a `FunctionToolset`."""
    if isinstance(toolset, type):
        return toolset.tool_names() if issubclass(toolset, Toolset) else None
    if isinstance(toolset, Toolset):
        return type(toolset).tool_names()
    if isinstance(toolset, FunctionToolset):
        return frozenset(toolset.tools)
    return None


def known_tool_traits(toolset: object) -> dict[str, ToolTraits] | None:
    """What each tool declares (read-only, `requires_approval`, an agent), known without a run: of a `Toolset`
    class or instance, or a `FunctionToolset`."""
    if isinstance(toolset, type):
        return toolset.tool_traits() if issubclass(toolset, Toolset) else None
    if isinstance(toolset, Toolset):
        return type(toolset).tool_traits()
    if isinstance(toolset, FunctionToolset):
        return {
            name: ToolTraits.of(item.metadata, requires_approval=item.requires_approval)
            for name, item in toolset.tools.items()
        }
    return None


def injected_keys(toolset: object) -> list[tuple[str, str, object]]:
    """(tool, parameter, what it asks for) of each parameter the container fills, known without a run: of a
    `Toolset` class or instance, or a `FunctionToolset`."""
    cls = toolset if isinstance(toolset, type) else type(toolset)
    found: list[tuple[str, str, object]] = []
    if issubclass(cls, Toolset):
        for name, item in cls._described().items():
            found.extend((name, parameter, key) for parameter, key in item.injections.items())
    elif isinstance(toolset, FunctionToolset):
        for name, function_tool in toolset.tools.items():
            injections = injected_parameters(function_tool.function)
            found.extend((name, parameter, key) for parameter, key in injections.items())
    return found


def may_ask_for_approval(toolset: AbstractToolset[Any]) -> bool:
    """Whether a tool of `toolset` is declared to need approval; True when that cannot be known."""
    cls = type(toolset)
    if issubclass(cls, Toolset):
        return cls.asks_for_approval()
    if isinstance(toolset, FunctionToolset):
        return any(item.requires_approval for item in toolset.tools.values())
    knows = getattr(toolset, "may_ask_for_approval", None)  # a toolset that can tell (an MCP server)
    return bool(knows()) if callable(knows) else True


def check_unique_tools(entry: str, tools_by_toolset: Iterable[tuple[str, Iterable[str]]]) -> None:
    """Raise `ConfigurationError` when two of an entry's toolsets define the same tool name."""
    owner: dict[str, str] = {}
    for name, tool_names in tools_by_toolset:
        for tool_name in tool_names:
            if tool_name in owner:
                raise ConfigurationError(
                    f"entry {entry!r}: tool {tool_name!r} is defined by both toolset {owner[tool_name]!r} "
                    f"and toolset {name!r}; rename one of the tools or drop one toolset from the entry"
                )
            owner[tool_name] = name
