"""Native tools: the model provider's own tools (web search, web fetch, code execution, image generation).

A worker file names them under `native_tools:`; each name maps to pydantic-ai's capability for it
(`WebSearch`, `WebFetch`, `NativeTool(CodeExecutionTool())`, `ImageGeneration`), which the worker's
agent gets. A native tool runs at the provider, inside the model's request: no approval policy can
gate it, and a model that cannot run it is found here, at load, rather than by pydantic-ai's
`UserError` on the first request. A declared local fallback (a tool run in this process where the
model has no native one) makes a tool fine on any model.
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_ai import Agent
from pydantic_ai.capabilities import (
    AbstractCapability,
    CombinedCapability,
    ImageGeneration,
    NativeOrLocalTool,
    NativeTool,
    WebFetch,
    WebSearch,
)
from pydantic_ai.models import Model, infer_model, infer_model_profile
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.native_tools import (
    NATIVE_TOOL_TYPES,
    SUPPORTED_NATIVE_TOOLS,
    AbstractNativeTool,
    CodeExecutionTool,
    ImageAspectRatio,
    ImageSize,
    WebSearchUserLocation,
)
from pydantic_ai.providers import infer_provider_class

from ..approvals import NATIVE_TOOL_NOT_GATED
from ..errors import listing
from .models import DeferredModel, model_id
from .problems import Problem

__all__ = [
    "NATIVE_TOOLS",
    "left_out_native_tools",
    "NativeOptions",
    "NativeUse",
    "is_native_tool",
    "native_capabilities",
    "native_policy_problem",
    "native_rows",
    "native_tools_of",
    "parse_native_tools",
    "worker_native_problems",
]

Loc = tuple[str | int, ...]

_PROVIDER_MODEL = re.compile(r"^[\w.-]+:\S+$")


class NativeOptions(BaseModel):
    """The options of one native tool in a worker file; `capability()` is what the agent gets."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ClassVar[str]
    fallback_option: ClassVar[str | None] = None
    """How a worker file declares this tool's local fallback, when pydantic-ai has one."""

    def capability(self) -> AbstractCapability[Any]:
        raise NotImplementedError

    @property
    def fallback(self) -> str | None:
        """The declared local fallback, as written; None without one."""
        return None

    def options(self) -> dict[str, Any]:
        """The options as written (those left at their defaults omitted)."""
        return self.model_dump(mode="json", exclude_defaults=True)


class _Restricted(NativeOptions):
    """The restrictions pydantic-ai's web tools share: a model that cannot apply one cannot run the tool."""

    max_uses: int | None = Field(default=None, gt=0)
    allowed_domains: list[str] | None = None
    blocked_domains: list[str] | None = None


class WebSearchOptions(_Restricted):
    """`web_search`: pydantic-ai's `WebSearch` capability (`WebSearchTool`)."""

    kind: ClassVar[str] = "web_search"
    fallback_option: ClassVar[str | None] = "local: duckduckgo"

    search_context_size: Literal["low", "medium", "high"] | None = None
    user_location: WebSearchUserLocation | None = None
    local: Literal["duckduckgo", True, False] = False
    """`duckduckgo` (or `true`): search with DuckDuckGo in this process when the model has no web search."""

    @model_validator(mode="after")
    def _local_applies_no_restriction(self) -> WebSearchOptions:
        restricting = [name for name in ("max_uses", "allowed_domains", "blocked_domains") if getattr(self, name)]
        if self.local and restricting:
            raise ValueError(
                f"local: a local search cannot apply {', '.join(restricting)} (pydantic-ai would drop the fallback); "
                "remove local, or remove those options"
            )
        return self

    def capability(self) -> AbstractCapability[Any]:
        return WebSearch(
            local="duckduckgo" if self.local else None,
            max_uses=self.max_uses,
            allowed_domains=self.allowed_domains,
            blocked_domains=self.blocked_domains,
            search_context_size=self.search_context_size,
            user_location=self.user_location,
        )

    @property
    def fallback(self) -> str | None:
        return "duckduckgo" if self.local else None


class WebFetchOptions(_Restricted):
    """`web_fetch`: pydantic-ai's `WebFetch` capability (`WebFetchTool`)."""

    kind: ClassVar[str] = "web_fetch"
    fallback_option: ClassVar[str | None] = "local: true"

    local: bool = False
    """Fetch pages in this process (applying the domain lists) when the model has no web fetch."""

    @model_validator(mode="after")
    def _local_cannot_count(self) -> WebFetchOptions:
        if self.local and self.max_uses is not None:
            raise ValueError(
                "local: a local fetch cannot apply max_uses (pydantic-ai would drop the fallback); "
                "remove local, or remove max_uses"
            )
        return self

    def capability(self) -> AbstractCapability[Any]:
        return WebFetch(
            local=True if self.local else None,
            max_uses=self.max_uses,
            allowed_domains=self.allowed_domains,
            blocked_domains=self.blocked_domains,
        )

    @property
    def fallback(self) -> str | None:
        return "local web fetch" if self.local else None


class CodeExecutionOptions(NativeOptions):
    """`code_execution`: `NativeTool(CodeExecutionTool())`; it takes no options and has no local fallback."""

    kind: ClassVar[str] = "code_execution"

    def capability(self) -> AbstractCapability[Any]:
        return NativeTool(CodeExecutionTool())


class ImageGenerationOptions(NativeOptions):
    """`image_generation`: pydantic-ai's `ImageGeneration` capability (`ImageGenerationTool`)."""

    kind: ClassVar[str] = "image_generation"
    fallback_option: ClassVar[str | None] = "fallback_image_model: provider:model"

    size: ImageSize | None = None
    aspect_ratio: ImageAspectRatio | None = None
    output_format: Literal["png", "webp", "jpeg"] | None = None
    output_compression: int | None = Field(default=None, ge=0, le=100)
    fallback_image_model: str | None = None
    """A direct image model (`openai:gpt-image-2`) that generates in this process when the model cannot."""

    @field_validator("fallback_image_model")
    @classmethod
    def _provider_model(cls, value: str | None) -> str | None:
        if value is not None and not _PROVIDER_MODEL.match(value):
            raise ValueError(f"{value!r} is not a provider:model name; write one like openai:gpt-image-2")
        return value

    def capability(self) -> AbstractCapability[Any]:
        return ImageGeneration(
            fallback_image_model=self.fallback_image_model,
            size=self.size,
            aspect_ratio=self.aspect_ratio,
            output_format=self.output_format,
            output_compression=self.output_compression,
        )

    @property
    def fallback(self) -> str | None:
        return self.fallback_image_model


_KINDS: dict[str, type[NativeOptions]] = {
    options.kind: options
    for options in (WebSearchOptions, WebFetchOptions, CodeExecutionOptions, ImageGenerationOptions)
}

NATIVE_TOOLS: tuple[str, ...] = tuple(sorted(_KINDS))
"""The native tool names a worker file may declare."""


def parse_native_tools(
    raw: Any, file: Path, lines: Mapping[Loc, int]
) -> tuple[dict[str, NativeOptions], list[Problem]]:
    """The `native_tools:` of a worker file: a list of names, or a mapping of names to options (or nothing).

    `lines` maps frontmatter key paths to file lines. Every problem names its line, and what is allowed.
    """

    def problem(message: str, *loc: str | int) -> Problem:
        path: Loc = ("native_tools", *loc)
        while path and path not in lines:
            path = path[:-1]
        return Problem(file, lines.get(path, 1), message)

    if raw is None:
        return {}, []
    if isinstance(raw, list):
        items: list[tuple[Any, Any, Loc]] = [(name, None, (index,)) for index, name in enumerate(raw)]
    elif isinstance(raw, dict):
        items = [(name, options, (name,)) for name, options in raw.items()]
    else:
        example = "native_tools: [web_search] or native_tools: {web_search: {max_uses: 3}}"
        return {}, [problem(f"native_tools: write a list of names or a mapping of names to options, like {example}")]
    found: dict[str, NativeOptions] = {}
    problems: list[Problem] = []
    for name, options, loc in items:
        if not isinstance(name, str) or name not in _KINDS:
            close = difflib.get_close_matches(str(name), NATIVE_TOOLS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(
                problem(
                    f"native_tools: unknown native tool {name!r}{hint}; known: {listing(NATIVE_TOOLS, ordered=False)}",
                    *loc,
                )
            )
            continue
        if name in found:
            problems.append(problem(f"native_tools: {name!r} is listed twice; keep one", *loc))
            continue
        if options is not None and not isinstance(options, dict):
            problems.append(
                problem(f"native_tools.{name}: write its options as a mapping, like {{{_example(name)}}}", *loc)
            )
            continue
        try:
            found[name] = _KINDS[name].model_validate(options or {})
        except ValidationError as error:
            problems.extend(problem(_option_message(name, item), *loc, *item["loc"][:1]) for item in error.errors())
    return found, problems


def _example(name: str) -> str:
    fields = list(_KINDS[name].model_fields)
    return f"{fields[0]}: ..." if fields else ""


def _option_message(name: str, item: Any) -> str:
    known = ", ".join(_KINDS[name].model_fields) or "no options"
    loc = [str(part) for part in item["loc"]]
    if item["type"] == "extra_forbidden":
        close = difflib.get_close_matches(loc[0], _KINDS[name].model_fields, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"native_tools.{name}: unknown option {loc[0]!r}{hint}; {name} takes: {known}"
    message = str(item["msg"]).removeprefix("Value error, ")
    if item["type"] not in ("value_error", "assertion_error"):
        message = f"{message} (got {item['input']!r})"
    return f"{'.'.join(['native_tools', name, *loc])}: {message}"


def native_capabilities(
    tools: Mapping[str, NativeOptions], problem: Callable[..., Problem]
) -> tuple[list[AbstractCapability[Any]], list[Problem]]:
    """pydantic-ai's capability for each declared native tool; one that cannot be built (a fallback whose
    package is not installed) is a problem at its line (`problem(message, *loc)`)."""
    capabilities: list[AbstractCapability[Any]] = []
    problems: list[Problem] = []
    for name, options in tools.items():
        try:
            capabilities.append(options.capability())
        except Exception as error:  # pydantic-ai's UserError names the package to install
            problems.append(problem(f"native_tools.{name}: {error}", "native_tools", name))
    return capabilities, problems


# -- what an agent declares, and what a model can run ---------------------------------------------


@dataclass(frozen=True, slots=True)
class NativeUse:
    """One native tool an agent sends with its requests, and whether it has a local fallback."""

    tool: AbstractNativeTool
    fallback: bool

    @property
    def kind(self) -> str:
        return self.tool.kind


def native_tools_of(agent: Agent[Any, Any]) -> list[NativeUse]:
    """The native tools an agent's capabilities send (those decided per run, and optional ones, left out)."""
    uses: list[NativeUse] = []
    for capability in _leaves(agent.root_capability):
        fallback = isinstance(capability, NativeOrLocalTool) and capability.get_toolset() is not None
        for tool in capability.get_native_tools():
            if isinstance(tool, AbstractNativeTool) and not tool.optional:
                uses.append(NativeUse(tool, fallback))
    return uses


def _leaves(capability: AbstractCapability[Any]) -> Iterator[AbstractCapability[Any]]:
    if isinstance(capability, CombinedCapability):
        for inner in capability.capabilities:
            yield from _leaves(inner)
    else:
        yield capability


@dataclass(frozen=True, slots=True)
class _Support:
    """What a model runs natively: the tool types, and the restricting settings it cannot apply."""

    model: str
    kinds: frozenset[type[AbstractNativeTool]]
    unapplied: Callable[[AbstractNativeTool], frozenset[str]]

    def gap(self, use: NativeUse) -> frozenset[str] | None:
        """None when the model runs the tool (or its fallback covers it); else the settings it cannot
        apply (empty: it cannot run the tool at all). The same test as pydantic-ai's at request time."""
        if use.fallback:
            return None
        if not isinstance(use.tool, tuple(self.kinds)):
            return frozenset()
        settings = self.unapplied(use.tool)
        return settings or None

    def runs(self) -> str:
        """The native tools a worker file can declare that the model runs."""
        return ", ".join(sorted(kind.kind for kind in self.kinds if kind.kind in _KINDS)) or "none"


def _support(model: Model) -> _Support | None:
    """The model's own answer (its profile and `unsupported_native_tool_settings`), building a deferred model
    if it can be built; else its provider's profile for the name, which can claim more than the model class
    runs (so what it says is missing is missing); None when nothing is known."""
    try:
        profile = model.profile
        return _Support(
            model_id(model),
            profile.get("supported_native_tools", SUPPORTED_NATIVE_TOOLS),
            model.unsupported_native_tool_settings,
        )
    except Exception:  # no API key, no provider package, no base URL: the name's profile still says something
        while isinstance(model, WrapperModel) and not isinstance(model, DeferredModel):
            model = model.wrapped
        try:
            name = model_id(model)
            kinds = infer_model_profile(name).get("supported_native_tools", SUPPORTED_NATIVE_TOOLS)
        except Exception:
            return None
        return _Support(name, kinds, _unapplied_without_key(name))


def _unapplied_without_key(name: str) -> Callable[[AbstractNativeTool], frozenset[str]]:
    """The model class's own answer on the settings it cannot apply, from a model built with a stand-in key (it
    sends nothing: only its class's answer is read), so that whether a key is set never changes the verdict;
    nothing is missing when the model cannot be built even so."""
    try:

        def provider(name: str) -> Any:
            made: Any = infer_provider_class(name)
            return made(api_key=_NO_KEY)

        built = infer_model(name, provider_factory=provider)
        return built.unsupported_native_tool_settings
    except Exception:
        return lambda tool: frozenset()


_NO_KEY = "llm-do-check-sends-nothing"


def worker_native_problems(
    name: str, agent: Agent[Any, Any], model: Model, problem: Callable[..., Problem]
) -> list[Problem]:
    """Each native tool of worker `name` that its model cannot run, at its line (`problem(message, *loc)`)."""
    uses = native_tools_of(agent)
    support = _support(model) if uses else None
    if support is None:
        return []
    problems: list[Problem] = []
    for use in uses:
        settings = support.gap(use)
        if settings is None:
            continue
        who = f"worker {name!r}: model {support.model!r}"
        if settings:
            them = "them" if len(settings) > 1 else "it"
            message = (
                f"{who} runs the native tool {use.kind!r} but cannot apply its {', '.join(sorted(settings))}: "
                f"remove {them}, or choose another model"
            )
        else:
            options = _KINDS.get(use.kind)
            fallback = options.fallback_option if options is not None else None
            message = (
                f"{who} cannot run the native tool {use.kind!r} (it runs: {support.runs()}); choose a model that "
                "runs it (model: in the worker file, or --model)"
                + (f", or declare a local fallback ({fallback})" if fallback else "")
            )
        problems.append(problem(message, "native_tools", use.kind))
    return problems


# -- approvals ----------------------------------------------------------------------------------------


def is_native_tool(name: str, declared: Mapping[str, NativeOptions], toolsets: Collection[str]) -> bool:
    """Whether `name` is a native tool: one the worker declares, or a kind pydantic-ai knows that is no toolset."""
    return name in declared or (name in NATIVE_TOOL_TYPES and name not in toolsets)


def native_policy_problem(name: str, problem: Callable[..., Problem]) -> Problem:
    """An approval policy that names native tool `name` (at `problem`'s line for `approvals.NAME`)."""
    return problem(
        f"approvals: {name!r} is a native tool: {NATIVE_TOOL_NOT_GATED}; remove approvals.{name} "
        "(to gate what it does, use a toolset of your own instead)",
        "approvals",
        name,
    )


def native_rows(tools: Mapping[str, NativeOptions]) -> list[dict[str, Any]]:
    """What `llm-do list` shows of a worker's native tools: each one's options, local fallback, and that no
    approval policy gates it."""
    rows: list[dict[str, Any]] = []
    for name, options in tools.items():
        approval = "not gated: runs at the model's provider"
        if options.fallback is not None:
            approval += "; its local fallback is not gated either"
        rows.append({"name": name, "options": options.options(), "fallback": options.fallback, "approval": approval})
    return rows


def left_out_native_tools(workers: Mapping[str, Any], entries: Mapping[str, Any], *, ran: bool) -> str | None:
    """What the test model leaves out of its requests (`OfflineTestModel`): the native tools of each worker whose
    agent runs on that model, as the note `llm-do check` gives; with `ran`, those it left out of a request, as the
    note `llm-do run` gives after its run. None when there are none."""
    offline = sys.modules.get(f"{__package__}.offline")  # no test model was made when it was never imported
    if offline is None:
        return None
    left: list[str] = []
    for name, spec in workers.items():
        agent = getattr(entries.get(name), "agent", None)
        model = agent.model if isinstance(agent, Agent) else None
        if isinstance(model, offline.OfflineTestModel) and spec.native_tools:
            tools = model.left_out if ran else list(spec.native_tools)
            if tools:
                left.append(f"{listing(tools, ordered=False)} of {name}")
    if not left:
        return None
    told = "left them" if ran else "leaves them"
    return f"the test model cannot run native tools: it {told} out of its requests ({'; '.join(left)})"
