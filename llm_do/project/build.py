"""`load_project`: a project's workers, modules and container built into entries and a ready `Runtime`."""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any

from dependency_injector import containers
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model

from .. import (
    AgentEntry,
    Approver,
    Attachment,
    CallScope,
    Entry,
    LlmDoSettings,
    PolicySettings,
    Runtime,
    RuntimeConfig,
    Scope,
    Session,
    ToolPolicy,
    ToolsetSpec,
)
from ..di import toolset_names
from ..errors import ConfigurationError, InvalidSettings, listing
from ..files import check_call
from ..guards import ModelRules
from ..results import RunResult
from ..run import entry_toolset, models_given_later
from ..toolkit import known_tool_names
from .earlier import EARLIER_TOOLSETS, agent_call_approvals, earlier_toolset_message
from .layout import ProjectLayout, survey_project
from .mcp import Declared, declared_servers, mcp_toolset_specs, parse_servers
from .model_settings import OUTPUT_TOOL, tool_choice_problem
from .models import ModelFactory, matches_any, missing_package, model_id, model_problem, resolve_model
from .modules import ProjectModules, factory_line, load_modules
from .native import is_native_tool, native_capabilities, native_policy_problem, worker_native_problems
from .problems import Install, Problem, ProjectError, raise_if_any
from .settings import ProjectSettings
from .worker import WorkerSpec, check_worker_file

__all__ = ["DEFAULT_CONTAINER", "ModelNameError", "Project", "load_project"]

DEFAULT_CONTAINER = "containers.project:ProjectContainer"
"""The container of a project that declares none: llm-do's built-in toolsets."""

_RESERVED = frozenset({"approval_policies", "config", "run_state"})

_ALIAS = "@"
"""Between a toolset's name and its worker's in the name a worker's own `approvals:` give the toolset."""


class ModelNameError(ProjectError):
    """The model name given to `load_project` (`--model`) is none the project can build: `name` is the name,
    `problem` says why (naming the prefixes known); `problems` also lists those found before it (a module that
    failed to import, which may declare the prefix)."""

    def __init__(self, name: str, problem: str, others: Sequence[Problem] = ()) -> None:
        self.name = name
        self.problem = problem
        super().__init__([*others, Problem(None, None, f"the model given, {name!r}: {problem}")])


@dataclass
class Project:
    """A loaded project: its runtime, entries and defaults. `async with` it to close the runtime."""

    root: Path
    runtime: Runtime
    entries: Mapping[str, Entry]
    workers: Mapping[str, WorkerSpec]
    default_entry: str | None = None
    default_input: Any = None
    layout: ProjectLayout | None = field(default=None, repr=False)
    mcp_servers: Mapping[str, Declared] = field(default_factory=dict, repr=False)
    """MCP servers declared in the project's files, by toolset name."""
    mcp_specs: Mapping[str, ToolsetSpec] = field(default_factory=dict, repr=False)
    model_factories: Mapping[str, ModelFactory] = field(default_factory=dict, repr=False)
    """The model factories of the project's modules, by prefix (`model_factory`)."""
    default_attachments: tuple[str, ...] = ()
    """Files (relative to the project directory) handed to a run of the default entry that is given none: the
    project file's `attachments`."""
    to_install: tuple[Install, ...] = ()
    """Packages the models its files name need that are not installed (found with `models_installed`): the
    project loads, and such a model fails its first request until its package is installed."""

    @staticmethod
    def declared_toolset(name: str) -> str:
        """The toolset a name among an entry's toolsets stands for: itself, or `TOOLSET` for `TOOLSET@worker`, the
        name a worker's own `approvals:` give it."""
        return name.partition(_ALIAS)[0]

    def attachments_for(self, entry: str | None) -> tuple[Attachment, ...]:
        """The files a run of `entry` (None: the default entry) is handed when it is given none: the project's
        default attachments for its default entry, read now (blocking) and checked against the settings' limits;
        none for any other entry."""
        name = entry or self.default_entry
        if not self.default_attachments or name is None or name != self.default_entry:
            return ()
        settings = self.runtime.config.attachments
        found = tuple(Attachment.read(self.root, path, settings=settings) for path in self.default_attachments)
        check_call(found, settings)
        return found

    async def run(
        self,
        entry: str | None = None,
        input_data: Any = None,
        *,
        message_history: list[ModelMessage] | None = None,
        attachments: Sequence[Attachment] = (),
        session: Session | str | None = None,
    ) -> RunResult:
        """Run `entry` (default: the project's default entry) on `input_data` (default: its default input),
        handing it `attachments` (default: the project's default attachments, for its default entry), in `session`
        if given (see `Runtime.run`)."""
        name = entry or self.default_entry
        if name is None:
            raise ConfigurationError(
                f"the project at {self.root} has no default entry; name one of {', '.join(self.entries)}, "
                "or set entry = NAME in its project.toml"
            )
        if input_data is None:
            if self.default_input is None:
                raise ConfigurationError(f"no input for entry {name!r}: give one, or set input = ... in project.toml")
            input_data = self.default_input
        if not attachments and self.default_attachments:
            loop = asyncio.get_running_loop()
            attachments = await loop.run_in_executor(None, self.attachments_for, name)
        return await self.runtime.run(
            name, input_data, message_history=message_history, attachments=attachments, session=session
        )

    async def aclose(self) -> None:
        """Close the runtime (its global toolsets and resources)."""
        await self.runtime.aclose()

    async def __aenter__(self) -> Project:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def load_project(
    path: Path | str,
    *,
    model: Model | str | None = None,
    config: RuntimeConfig | None = None,
    approver: Approver | None = None,
    default_container: type[containers.DeclarativeContainer] | str = DEFAULT_CONTAINER,
    event_stream_handler: EventStreamHandler[Any] | None = None,
    models_required: bool = True,
    models_installed: bool = False,
) -> Project:
    """Load the project at `path` (a directory, its `project.toml`, or a `.worker` file).

    `model` serves the workers that name none (a model name, or a pydantic-ai `Model`); `config`
    replaces the runtime configuration read from the container's settings; `approver` answers
    approvals; `event_stream_handler` receives every agent run's streamed events (see `Runtime`).
    The project's own container class, if one of its modules defines one, else
    `default_container`, provides toolsets. Raises `ProjectError` listing every problem found.
    With `models_required=False`, a worker left without a model is not a problem (its agent has
    none: it runs with `config.model`), for tools that inspect a project without running it.
    With `models_installed`, each model's provider package must be installed too (it is imported).
    """
    layout, problems = survey_project(path)
    builder = _Builder(layout, model, config, approver, default_container, event_stream_handler)
    builder.problems.extend(problems)
    builder.models_required = models_required
    builder.models_installed = models_installed
    return builder.build()


class _Builder:
    def __init__(
        self,
        layout: ProjectLayout,
        model: Model | str | None,
        config: RuntimeConfig | None,
        approver: Approver | None,
        default_container: type[containers.DeclarativeContainer] | str,
        event_stream_handler: EventStreamHandler[Any] | None = None,
    ) -> None:
        self.layout = layout
        self.event_stream_handler = event_stream_handler
        self.root = layout.root
        self.model = model
        self.config = config
        self.approver = approver
        self.default_container = default_container
        self.problems: list[Problem] = []
        self.toolsets: dict[str, ToolsetSpec] = {}
        self.policies: dict[str, ToolPolicy] = {}
        self.overrides: dict[str, PolicySettings] = {}
        """Policy overrides of the toolset names workers' `approvals:` make (`toolset@worker`)."""
        self.entry_aliases: dict[str, str] = {}
        """The names workers' `approvals:` give an entry's toolset (`deployer@caller`), with the entry's name."""
        self.broken_servers: set[str] = set()
        """Names of MCP servers declared wrong (reported once, where they are declared)."""
        self.agents: dict[str, AgentEntry] = {}
        self.models_required = True
        self.models_installed = False
        self.settings_class: object = None
        self.factories: dict[str, ModelFactory] = {}
        self.to_install: list[Install] = []

    def build(self) -> Project:
        workers = self._parse_workers()
        modules = load_modules(self.root, self.layout.module_files)
        self.problems.extend(modules.problems)
        project_settings = self._project_settings_values()
        container = self._container(modules)
        if container is None:
            self._raise()
        assert container is not None
        config = self.config if self.config is not None else self._runtime_config(container)
        if self.config is None and config is not None:
            config = self._project_settings(config)
        if self.config is not None and self.config.project_root == Path("."):  # attachments: the project's files
            config = replace(self.config, project_root=_project_root(container, self.root))
        settings = {**project_settings, **_settings_of(container)}
        fallback = self.model if self.model is not None else config.model if config is not None else None
        if fallback is None:
            fallback = self.layout.default_model
        self.factories = self._model_factories(modules)
        self._check_given_model(modules)
        self.toolsets = {name: spec for name, (spec, _) in modules.toolsets.items()}
        providers = {name: p for name, p in container.providers.items() if name not in _RESERVED}
        self._check_names(workers, modules, providers)
        servers = self._mcp_servers(workers, {*providers, *modules.toolsets, *workers, *modules.entries})
        mcp_specs, problems = mcp_toolset_specs(servers, self.root, settings)
        self.problems.extend(problems)
        self.toolsets.update(mcp_specs)
        workers = {name: _with_servers(spec, servers) for name, spec in workers.items()}
        known = {*providers, *modules.toolsets, *workers, *modules.entries, *servers, *self.broken_servers}
        approvals = self.layout.agent_approvals
        workers = {name: _today(spec, known, set(workers), approvals) for name, spec in workers.items()}
        for spec in workers.values():
            self._worker(spec, known, modules, container, providers, fallback, settings, config)
        entries: dict[str, Entry] = {**self.agents, **{name: e for name, (e, _) in modules.entries.items()}}
        declared = {*workers, *modules.entries, *(path.stem for path in self.layout.worker_files)}
        default_entry = self._default_entry(entries, declared, modules.failed)
        if self.problems or config is None:
            self._raise()
        assert config is not None
        if self.overrides:
            config = replace(config, approval_policies={**config.approval_policies, **self.overrides})
        quiet = models_given_later() if not self.models_required else nullcontext()  # `check` notes them itself
        for alias, name in self.entry_aliases.items():  # the entry's own tool, known at load as under its own name
            self.toolsets[alias] = _entry_tool(entries[name])
        try:
            with quiet:
                runtime = Runtime(
                    container,
                    entries=entries.values(),
                    toolsets=self.toolsets,
                    config=config,
                    policies=self.policies,
                    approver=self.approver,
                    event_stream_handler=self.event_stream_handler,
                )
        except ConfigurationError as error:
            raise ProjectError([Problem(self.layout.config_file or self.root, None, str(error))]) from None
        return Project(
            root=self.root,
            runtime=runtime,
            entries=MappingProxyType(entries),
            workers=MappingProxyType(workers),
            default_entry=default_entry,
            default_input=self.layout.default_input,
            layout=self.layout,
            mcp_servers=MappingProxyType(servers),
            mcp_specs=MappingProxyType(mcp_specs),
            model_factories=MappingProxyType(self.factories),
            default_attachments=self.layout.default_attachments,
            to_install=tuple(self.to_install),
        )

    def _raise(self) -> None:
        raise_if_any(self.problems, self.to_install)

    def _model_factories(self, modules: ProjectModules) -> dict[str, ModelFactory]:
        """The modules' model factories by prefix; one that a `[providers.NAME]` also names is a problem."""
        found: dict[str, ModelFactory] = {}
        for prefix, (factory, path) in modules.model_factories.items():
            if prefix in self.layout.model_servers:
                config = self.layout.config_file
                where = config.name if config is not None else "the project file"
                self.problems.append(
                    Problem(
                        path,
                        factory_line(factory),
                        f"the model factory of prefix {prefix!r} has the name of [providers.{prefix}] in {where}; "
                        "keep one of them, or rename one",
                    )
                )
                continue
            found[prefix] = factory
        return found

    def _prefixes(self) -> set[str]:
        """The project's own model prefixes: its `[providers.NAME]` and its modules' model factories."""
        return {*self.layout.model_servers, *self.factories}

    def _check_given_model(self, modules: ProjectModules) -> None:
        """A model name given to `load_project` must be one the project can build (`ModelNameError`)."""
        if not isinstance(self.model, str):
            return
        problem = model_problem(self.model, servers=self._prefixes())
        if problem is None:
            return
        if modules.failed:
            failed = ", ".join(path.name for path in modules.failed)
            problem += f" ({failed} could not be imported, and may declare its prefix)"
        raise ModelNameError(self.model, problem, self.problems)

    def _project_settings(self, config: RuntimeConfig) -> RuntimeConfig:
        """The project file's approval mode, approval default and max depth, where the settings (and so the
        command line's flags) set none."""
        layout = self.layout
        if layout.approval_mode is None and layout.max_depth is None and layout.approval_default is None:
            return config
        settings_class = self.settings_class if isinstance(self.settings_class, type) else LlmDoSettings
        try:
            explicit = settings_class().model_fields_set
        except Exception:  # invalid settings: reported by the container
            return config
        if layout.approval_mode is not None and "approval_mode" not in explicit:
            config = replace(config, approval_mode=layout.approval_mode)  # type: ignore[arg-type]  # checked
        if layout.max_depth is not None and "max_depth" not in explicit:
            config = replace(config, max_depth=layout.max_depth)
        if layout.approval_default is not None and "approval_default" not in explicit:
            config = replace(config, approval_default=layout.approval_default)  # type: ignore[arg-type]  # checked
        return config

    def _mcp_servers(self, workers: Mapping[str, WorkerSpec], taken: set[str]) -> dict[str, Declared]:
        """The MCP servers of `project.toml` and of the workers' frontmatter; each name a new toolset name.
        The names of servers declared wrong go to `broken_servers`, so that naming them is no second problem."""
        layout = self.layout
        servers, problems = declared_servers(
            self.root, layout.mcp_servers, layout.mcp_config, layout.config_file, layout.line_of
        )
        self.problems.extend(problems)
        for spec in workers.values():
            found, problems = parse_servers(
                spec.mcp_servers,
                spec.file,
                spec.line_of("mcp_servers"),
                line_of=lambda name, spec=spec: spec.line_of("mcp_servers", name),  # type: ignore[misc]
            )
            self.problems.extend(problems)
            for name, declared in found.items():
                if name in servers:
                    first = servers[name]
                    where = f" in {first.file.name}" if first is not None else ""
                    self.problems.append(
                        spec.problem(f"MCP server {name!r} is also declared{where}; declare it once", "mcp_servers")
                    )
                    continue
                servers[name] = declared
        for name, declared in servers.items():
            if name in taken and declared is not None:
                self.problems.append(
                    Problem(
                        declared.file,
                        declared.line,
                        f"MCP server {name!r} has the name of another toolset or entry of the project; rename it",
                    )
                )
        self.broken_servers = {name for name, declared in servers.items() if declared is None}
        return {name: declared for name, declared in servers.items() if declared is not None}

    # -- parts -------------------------------------------------------------------

    def _parse_workers(self) -> dict[str, WorkerSpec]:
        workers: dict[str, WorkerSpec] = {}
        for path in self.layout.worker_files:
            spec, problems = check_worker_file(path)
            self.problems.extend(problems)
            if spec is None:
                continue
            if spec.name in workers:
                first = workers[spec.name].file.name
                self.problems.append(
                    spec.problem(f"a second worker named {spec.name!r} (the first is {first}); rename one", "name")
                )
                continue
            workers[spec.name] = spec
        return workers

    def _project_settings_values(self) -> dict[str, Any]:
        """`ProjectSettings` from the environment (the OpenAI-compatible server of `openai:` model names); bad
        values are a problem, named by variable."""
        try:
            return ProjectSettings().model_dump()
        except InvalidSettings as error:
            self.problems.append(Problem(None, None, str(error)))
            return {}

    def _container(self, modules: ProjectModules) -> containers.DeclarativeContainer | None:
        where: Path | None = None
        if modules.container is not None:
            cls, where = modules.container
        elif isinstance(self.default_container, str):
            try:
                cls = modules.resolve(self.default_container)
            except LookupError as error:
                self.problems.append(Problem(None, None, f"the default container cannot be loaded: {error}"))
                return None
        else:
            cls = self.default_container
        try:
            container: containers.DeclarativeContainer = cls()
        except ConfigurationError as error:  # invalid settings: named by variable
            self.problems.append(Problem(where, None, str(error)))
            return None
        except Exception as error:
            self.problems.append(
                Problem(where, None, f"creating the container {cls.__name__} failed: {type(error).__name__}: {error}")
            )
            return None
        self.settings_class = getattr(cls, "settings_class", None)
        self._set_project_root(container, self.settings_class)
        return container

    def _set_project_root(self, container: containers.DeclarativeContainer, settings_class: object) -> None:
        """The project directory is the built-ins' root, unless LLM_DO_PROJECT_ROOT says otherwise."""
        config = getattr(container, "config", None)
        if config is None or not (isinstance(settings_class, type) and issubclass(settings_class, LlmDoSettings)):
            return
        if "project_root" not in settings_class().model_fields_set:
            config.project_root.from_value(self.root)

    def _runtime_config(self, container: containers.DeclarativeContainer) -> RuntimeConfig | None:
        try:
            return RuntimeConfig.from_container(container)
        except ConfigurationError as error:
            self.problems.append(Problem(None, None, str(error)))
            return None

    def _check_names(
        self, workers: Mapping[str, WorkerSpec], modules: ProjectModules, providers: Mapping[str, Any]
    ) -> None:
        for name, spec in workers.items():
            other = (
                f"the entry in {modules.entries[name][1].name}"
                if name in modules.entries
                else f"the toolset in {modules.toolsets[name][1].name}"
                if name in modules.toolsets
                else "a provider of the container"
                if name in providers
                else None
            )
            if other is not None:
                self.problems.append(
                    spec.problem(f"worker {name!r} has the name of {other}; rename the worker (name: ...)", "name")
                )
        for name, (_, path) in modules.entries.items():
            if name in modules.toolsets or name in providers:
                self.problems.append(Problem(path, None, f"entry {name!r} has the name of a toolset; rename the entry"))

    def _worker(
        self,
        spec: WorkerSpec,
        known: set[str],
        modules: ProjectModules,
        container: containers.DeclarativeContainer,
        providers: Mapping[str, Any],
        fallback: Model | str | None,
        settings: Mapping[str, Any],
        config: RuntimeConfig | None,
    ) -> None:
        count = len(self.problems)
        not_toolsets = set(providers) - set(toolset_names(providers))  # a pool, settings: listed as no toolset
        for index, name in enumerate(spec.toolsets):
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                if name in modules.unbuildable:
                    hint = f"{modules.unbuildable[name]}. "
                if not close and modules.failed:
                    failed = ", ".join(path.name for path in modules.failed)
                    hint = f"{failed} could not be imported and may define it (its problems are listed too); "
                earlier = earlier_toolset_message(name)
                if earlier is not None:
                    hint = f"{earlier}. "
                self.problems.append(
                    spec.problem(
                        f"unknown toolset {name!r}: {hint}known toolsets are {listing(known - not_toolsets)}; "
                        "fix the name, or define it (a provider of the project's container, a toolset in a "
                        "project module, or another worker)",
                        "toolsets",
                        index,
                    )
                )
        schema_in = self._model_class(spec, "input", modules)
        output_type = self._model_class(spec, "output", modules)
        model = self._model(spec, fallback, settings)
        names = list(spec.toolsets)
        for toolset, override in spec.approvals.items():
            if toolset not in spec.toolsets and is_native_tool(toolset, spec.native_tools, known):
                self.problems.append(native_policy_problem(toolset, spec.problem))
                continue
            if toolset not in spec.toolsets:
                self.problems.append(
                    spec.problem(
                        f"approvals for toolset {toolset!r}, which this worker does not use; "
                        f"add it to toolsets or fix the name (its toolsets: {listing(spec.toolsets, ordered=False)})",
                        "approvals",
                        toolset,
                    )
                )
                continue
            if toolset not in known or toolset in self.broken_servers:
                continue
            calls_entry = toolset not in self.toolsets and toolset not in providers  # a worker, a module's entry
            original = None if calls_entry else self._spec_of(toolset, providers)
            tools = frozenset({toolset}) if calls_entry else known_tool_names(original.provides) if original else None
            unknown = [tool for tool in override.tools if tools is not None and tool not in tools]
            for tool in unknown:
                self.problems.append(
                    spec.problem(
                        f"approvals: toolset {toolset!r} has no tool {tool!r} "
                        f"(its tools: {listing(tools or ())}); fix the tool name",
                        "approvals",
                        toolset,
                        "tools",
                        tool,
                    )
                )
            if unknown or (original is None and not calls_entry):
                continue
            alias = f"{toolset}{_ALIAS}{spec.name}"
            names[names.index(toolset)] = alias
            if original is None:
                self.entry_aliases[alias] = toolset  # its toolset is made once every entry is built
            else:
                self.toolsets[alias] = original
            # The worker's approvals are an override, like the settings' (which still win): laid over the
            # toolset's declared policy, or over its tools' MCP annotations when it has none.
            operator = config.approval_policies.get(toolset) if config is not None else None
            self.overrides[alias] = override.overridden(operator) if operator is not None else override
            declared = _declared_policy(container, toolset, None if original is None else original.provides)
            if declared is not None:
                self.policies[alias] = declared
        capabilities, problems = native_capabilities(spec.native_tools, spec.problem)
        self.problems.extend(problems)
        model_settings = self._model_settings(spec)
        forcing = tool_choice_problem(model_settings.get("tool_choice"), (OUTPUT_TOOL,) if output_type else ())
        if forcing is not None:
            own = "tool_choice" in spec.model_settings
            origin = "" if own else f" (from {self.layout.config_name})"
            where = ("model_settings", "tool_choice") if own else ()
            self.problems.append(spec.problem(f"model_settings.tool_choice{origin}: {forcing}", *where))
        if len(self.problems) > count or (model is None and (self.models_required or spec.model is not None)):
            return
        agent: Agent[CallScope, Any] = Agent(
            model,
            instructions=spec.instructions or None,
            output_type=output_type if output_type is not None else str,
            model_settings=model_settings or None,  # type: ignore[arg-type]
            name=spec.name,
            deps_type=CallScope,
            capabilities=capabilities,
        )
        if model is not None:
            self.problems.extend(worker_native_problems(spec.name, agent, model, spec.problem))
        self.agents[spec.name] = AgentEntry(
            agent,
            name=spec.name,
            toolsets=names,
            schema_in=schema_in,
            description=spec.description,
            rules=self._rules(spec),
            takes_attachments=spec.takes_attachments,
        )

    def _model_settings(self, spec: WorkerSpec) -> dict[str, Any]:
        """The worker's model settings: its own, over the project file's `[model_settings]`, key by key; a project
        setting that is also one of the worker's own `limits` (`max_tokens`, `request_timeout`) gives way to it,
        so the worker's file wins whichever of its keys says it."""
        project = {name: value for name, value in self.layout.model_settings.items() if name not in spec.rules}
        return {**project, **spec.model_settings}

    def _rules(self, spec: WorkerSpec) -> ModelRules:
        """The worker's model rules: what its file sets, over what `project.toml` sets (over the settings)."""
        project = self.layout.rules or {}
        origins = {name: _origin(name, self.layout.config_name) for name in project}
        origins.update({name: _origin(name, spec.file.name) for name in spec.rules})
        return ModelRules({**project, **spec.rules}, origins)

    def _spec_of(self, name: str, providers: Mapping[str, Any]) -> ToolsetSpec | None:
        """The spec of a toolset name that is no entry: a project module's toolset, an MCP server or a provider."""
        if name in self.toolsets:  # a project module's toolset or an MCP server
            return self.toolsets[name]
        try:
            return ToolsetSpec.from_provider(providers[name])
        except TypeError:
            return None  # the runtime reports it

    def _model_class(self, spec: WorkerSpec, key: str, modules: ProjectModules) -> type[BaseModel] | None:
        reference = spec.input if key == "input" else spec.output
        if reference is None:
            return None
        try:
            found = modules.resolve(reference)
        except LookupError as error:
            self.problems.append(spec.problem(f"{key}: {reference!r} cannot be found: {error}; fix the reference", key))
            return None
        except Exception as error:
            message = f"{key}: importing {reference!r} failed: {type(error).__name__}: {error}"
            self.problems.append(spec.problem(message, key))
            return None
        if not (isinstance(found, type) and issubclass(found, BaseModel)):
            self.problems.append(
                spec.problem(f"{key}: {reference!r} is {found!r}, not a pydantic model class (BaseModel)", key)
            )
            return None
        return found

    def _model(self, spec: WorkerSpec, fallback: Model | str | None, settings: Mapping[str, Any]) -> Model | None:
        if spec.model is not None:
            return self._resolved(spec, spec.model, settings, "model")
        if "model" in spec.invalid:
            return None  # reported with the file's problems
        if fallback is None:
            if not self.models_required:
                return None
            self.problems.append(
                spec.problem(
                    f"worker {spec.name!r} has no model: set model: in its frontmatter, pass one when running it "
                    "(--model, or model= to load_project), or set LLM_DO_MODEL",
                    "compatible_models",
                )
            )
            return None
        if spec.compatible_models and not matches_any(fallback, spec.compatible_models):
            self.problems.append(
                spec.problem(
                    f"worker {spec.name!r} needs a model matching {', '.join(map(repr, spec.compatible_models))}, "
                    f"but the model given is {model_id(fallback)!r}; give a matching one (--model, model= or "
                    "LLM_DO_MODEL)",
                    "compatible_models",
                )
            )
            return None
        if isinstance(fallback, Model):
            return fallback
        return self._resolved(spec, fallback, settings, "model")

    def _resolved(self, spec: WorkerSpec, name: str, settings: Mapping[str, Any], key: str) -> Model | None:
        try:
            model = resolve_model(
                name, root=self.root, settings=settings, servers=self.layout.model_servers, factories=self.factories
            )
        except (ValueError, OSError) as error:
            self.problems.append(spec.problem(f"model {name!r}: {error}", key))
            return None
        servers = self._prefixes()
        package = missing_package(name, servers=servers) if self.models_installed else None
        if package is not None:  # no problem of the project's files: a package to install
            where = spec.problem("", key)
            self.to_install.append(Install(package, name, where.file, where.line))
            return model
        problem = model_problem(name, installed=True, servers=servers) if self.models_installed else None
        if problem is not None:
            self.problems.append(spec.problem(f"model {name!r}: {problem}", key))
            return None
        return model

    def _default_entry(self, entries: Mapping[str, Entry], declared: set[str], failed: Sequence[Path]) -> str | None:
        """The default entry; one the project file names that no worker file or module declares is a problem,
        reported with the others (a worker with problems of its own still declares its name)."""
        name = self.layout.default_entry
        if name is None:
            return next(iter(entries)) if len(entries) == 1 else "main" if "main" in entries else None
        if name not in declared:
            config = self.layout.config_file
            line = self.layout.line_of("entry")
            where = f"in {config.name}" if config is not None else "given"
            self.problems.append(
                Problem(
                    config or self.root,
                    line,
                    f"the default entry {name!r} {where} is not an entry of the project "
                    f"(entries: {listing(declared)}); fix the name"
                    + (
                        f", or {', '.join(path.name for path in failed)}, which could not be imported" if failed else ""
                    ),
                )
            )
        return name


def _today(
    spec: WorkerSpec, known: set[str], agents: set[str], agent_approvals: Mapping[str, PolicySettings]
) -> WorkerSpec:
    """A worker with the earlier llm-do's built-in toolset names that have an equivalent written as today's
    (`filesystem_project` is `filesystem`), and the approvals of calls to agents an earlier `project.json`
    set (`agent_call_approvals`), under the worker's own."""
    renamed = tuple(
        EARLIER_TOOLSETS.get(name) or name if name not in known and name in EARLIER_TOOLSETS else name
        for name in spec.toolsets
    )
    approvals = dict(spec.approvals)
    for name, policy in agent_call_approvals(renamed, agents, agent_approvals).items():
        approvals[name] = policy.overridden(approvals[name]) if name in approvals else policy
    if renamed == spec.toolsets and approvals == spec.approvals:
        return spec
    return replace(spec, toolsets=renamed, approvals=approvals)


def _origin(name: str, file: str) -> str:
    """Where a file set a model rule, as an error names it: `limits.max_tokens in clerk.worker`."""
    return f"{name if name in ('suspect_output', 'text_tool_calls') else 'limits.' + name} in {file}"


def _with_servers(spec: WorkerSpec, servers: Mapping[str, Declared]) -> WorkerSpec:
    """A worker uses the MCP servers its own frontmatter declares (those declared well)."""
    extra = tuple(name for name in spec.mcp_servers if name in servers and name not in spec.toolsets)
    return replace(spec, toolsets=(*spec.toolsets, *extra)) if extra else spec


def _settings_of(container: containers.DeclarativeContainer) -> Mapping[str, Any]:
    config = getattr(container, "config", None)
    values = config() if callable(config) else None
    return values if isinstance(values, Mapping) else {}


def _project_root(container: containers.DeclarativeContainer, root: Path) -> Path:
    """The container's project root (the project directory unless LLM_DO_PROJECT_ROOT says otherwise)."""
    config = getattr(container, "config", None)
    value = config.get("project_root") if config is not None else None
    return Path(value) if isinstance(value, str | Path) else root


def _entry_tool(entry: Entry) -> ToolsetSpec:
    """The toolset that calls `entry` (one tool, the entry's name), as the runtime makes it for the entry's own name:
    built once, so that the runtime knows at load which entry it calls, and gates every call of the entry from the
    worker that names it so (`scope.call_agent`, `agent_call`) under the worker's approvals."""
    toolset = entry_toolset(entry)
    return ToolsetSpec(lambda: toolset, Scope.GLOBAL, toolset)


def _declared_policy(container: containers.DeclarativeContainer, name: str, provides: Any) -> ToolPolicy | None:
    """The policy declared for a toolset name: the container's, else the default of the class its spec `provides`;
    None when there is none."""
    provider = container.providers.get("approval_policies")
    declared = provider() if provider is not None else None
    if isinstance(declared, Mapping) and isinstance(declared.get(name), ToolPolicy):
        policy: ToolPolicy = declared[name]
        return policy
    provides = provides if isinstance(provides, type) or provides is None else type(provides)
    default = getattr(provides, "default_policy", None)
    return default if isinstance(default, ToolPolicy) else None
