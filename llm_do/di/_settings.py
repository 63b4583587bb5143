"""`LlmDoSettings`: the library's settings, from the environment (`LLM_DO_...`, `.env`); `reveal` and the values a
`RuntimeConfig` is built from."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar

from dependency_injector import providers
from pydantic import AfterValidator, DirectoryPath, Field, SecretStr, ValidationError
from pydantic_ai.models import Model

from ..approvals._policy import ApprovalMode, ApprovalOnDeny, Decision, PolicySettings
from ..errors import InvalidSettings
from ..files._limits import AttachmentSettings
from ..guards._limits import ModelLimits, SuspectOutput
from ._env import EnvSettings, describe, secret_url

_MODEL_NAME = re.compile(r"^(test|[\w.-]+:\S+)$")


def _model_name(value: str) -> str:
    if not _MODEL_NAME.match(value):
        raise ValueError("not a provider:model name")
    return value


class LlmDoSettings(EnvSettings):
    """The library's settings, read from `LLM_DO_*` variables and an optional `.env` file: what the runtime reads,
    and your application's database.

    Subclass it to add your own fields (`LLM_DO_<FIELD>`, nested models as `LLM_DO_<FIELD>__<PART>`).
    Invalid values raise `InvalidSettings`, naming each variable and the form it expects. The built-in toolsets'
    settings are `llm_do.toolsets.ToolsetSettings`; the projects' and the command's, `llm_do.project.ProjectSettings`.
    """

    setting_forms: ClassVar[Mapping[str, tuple[str, str]]] = {
        "model": ("provider:model-name", "openai:gpt-5.2"),
        "max_depth": ("a whole number >= 0", "5"),
        "approval_mode": ("one of prompt, approve_all, reject_all", "prompt"),
        "approval_on_deny": ("one of tell_model, raise", "tell_model"),
        "cleanup_timeout": ("a number of seconds > 0", "10"),
        "approval_timeout": ("a number of seconds > 0", "600"),
        "approval_default": ("one of ask, allow, deny", "ask"),
        "session_idle_timeout": ("a number of seconds > 0", "1800"),
        "stream_buffer": ("a whole number of events >= 1", "256"),
        "resume_buffer": ("a whole number of events >= 1", "10000"),
        "project_root": ("an existing directory", "/path/to/project"),
        "database_url": ("a URL with a scheme", "sqlite:///data/app.db"),
        "attachments": ("JSON, or one variable per limit", '{"max_file_bytes": 4194304}'),
        "limits": ("JSON, or one variable per limit", '{"max_tokens": 8192}'),
        "suspect_output": ("one of flag, retry", "flag"),
        "text_tool_calls": ("true or false", "false"),
        "made_agent_max_instructions_bytes": ("a whole number of bytes >= 1", "32768"),
    }

    model: Annotated[str, AfterValidator(_model_name)] | None = None
    """Model for entries whose agent has none, e.g. `openai:gpt-5.2`."""
    max_depth: int = Field(default=5, ge=0)
    """Deepest allowed nesting of agent calls below the top-level call."""
    approval_mode: ApprovalMode = "prompt"
    """How gated tools are decided: ask the callback, approve all, or reject all."""
    approval_on_deny: ApprovalOnDeny = "tell_model"
    """What a denied call does: the model reads the denial as the tool result, or `ApprovalDenied` is raised."""
    approval_policies: dict[str, PolicySettings] = Field(default_factory=dict)
    """Policy overrides per toolset name, on top of the declared policies (see docs/approvals.md)."""
    approval_timeout: float = Field(default=600.0, gt=0)
    """Seconds an approver may take to answer; then the call is denied (the model reads why)."""
    approval_default: Decision = "ask"
    """What a call to a tool nobody declared safe gets (no declared policy, not declared read-only): `ask`, or
    `allow` to run such tools without asking, as llm-do did before (see docs/approvals.md)."""
    session_idle_timeout: float = Field(default=1800.0, gt=0)
    """Seconds a session may stay without a run before it closes (its objects are torn down)."""
    cleanup_timeout: float = Field(default=10.0, gt=0)
    """Seconds each finalizer may take during teardown before it is cancelled."""
    stream_buffer: int = Field(default=256, ge=1)
    resume_buffer: int = Field(default=10_000, ge=1)
    """Model events a live run (`Runtime.stream`) holds for a consumer that has not read them; when it is
    full, the run waits for the consumer."""
    project_root: DirectoryPath = Path(".")
    """The project's directory (worker files, relative paths)."""
    database_url: Annotated[SecretStr, AfterValidator(secret_url)] | None = None
    """Your application's database; a secret, shown as `**********`. Read it with `reveal(config.database_url)`."""
    attachments: AttachmentSettings = AttachmentSettings()
    """Limits of the files handed to agents as attachments (see docs/attachments.md)."""
    limits: ModelLimits = ModelLimits()
    """Limits on model replies, requests and runs (`LLM_DO_LIMITS__MAX_TOKENS`, ...; see docs/local-models.md)."""
    suspect_output: SuspectOutput = "flag"
    """A final reply that looks like an unexecuted tool call or an echoed prompt: `flag` it, or `retry` (the model
    is told and asked again)."""
    text_tool_calls: bool = False
    """Run a reply that is only a JSON call to one of the call's tools as that call (for small local models)."""
    made_agent_max_instructions_bytes: int = Field(default=32_768, ge=1)
    """The most bytes (UTF-8) of instructions an agent made in a run (`dynamic_agents`' `agent_create`,
    `scope.make_agent`) may have; longer ones are refused, and a model reads why."""


def reveal(option: providers.Provider[Any]) -> providers.Provider[Any]:
    """A provider of the plain text of a secret setting: `dsn=reveal(AgentContainer.config.database_url)`."""
    return providers.Callable(_plain, option)


def _plain(value: SecretStr | str | None) -> str | None:
    return value.get_secret_value() if isinstance(value, SecretStr) else value


def settings_values(mapping: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """The settings `names`, validated, from `mapping` (a container's `config()`), the rest from the environment;
    `InvalidSettings` lists every bad value (`config.NAME=...`)."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    scratch = LlmDoSettings.model_construct()
    for name in names:
        if name not in mapping:
            continue
        value = mapping[name]
        if name == "model" and isinstance(value, Model):
            values[name] = value
            continue
        try:
            LlmDoSettings.__pydantic_validator__.validate_assignment(scratch, name, value)
        except ValidationError as error:
            problems.extend(describe(LlmDoSettings, item, given={}, label=f"config.{name}") for item in error.errors())
        else:
            values[name] = getattr(scratch, name)
    if problems:
        raise InvalidSettings(problems)
    if len(values) < len(names):
        environment = LlmDoSettings()
        for name in names:
            values.setdefault(name, getattr(environment, name))
    return values
