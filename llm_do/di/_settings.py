"""Settings from the environment (`LLM_DO_...`, `.env`) and the runtime configuration built from them."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, get_args

from dependency_injector import providers
from pydantic import AfterValidator, BaseModel, BeforeValidator, DirectoryPath, Field, SecretStr, ValidationError
from pydantic_ai.models import Model
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError as _ParseError

from ..approvals import ApprovalMode, ApprovalOnDeny, Decision, PolicySettings
from ..errors import InvalidSettings
from ..files import AttachmentSettings, FilesystemSettings
from ..guards import ModelLimits, SuspectOutput

__all__ = ["LlmDoSettings", "reveal", "settings_values"]


_MODEL_NAME = re.compile(r"^(test|[\w.-]+:\S+)$")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def _model_name(value: str) -> str:
    if not _MODEL_NAME.match(value):
        raise ValueError("not a provider:model name")
    return value


def _plain_url(value: str) -> str:
    if not _URL.match(value):
        raise ValueError("not a URL with a scheme")
    return value


def _url(value: SecretStr) -> SecretStr:
    _plain_url(value.get_secret_value())
    return value


def _comma_list(value: Any) -> Any:
    """`git, ls` or `["git", "ls"]` from the environment; a list given in code passes as is."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        return json.loads(text)
    return [part.strip() for part in text.split(",") if part.strip()]


def _program_names(names: list[str]) -> list[str]:
    for name in names:
        bare = "/" not in name and name not in (".", "..")
        absolute = os.path.isabs(name) and os.path.basename(name) not in ("", ".", "..")
        if not name or any(c.isspace() or c == "\0" for c in name) or not (bare or absolute):
            raise ValueError(f"{name!r} is not a program name or an absolute path")
    return names


# The expected form and an example for each of llm-do's own settings, used in error messages.
_FORMS: dict[str, tuple[str, str]] = {
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
    "filesystem": ("JSON, or one variable per limit", '{"max_read_bytes": 262144}'),
    "attachments": ("JSON, or one variable per limit", '{"max_file_bytes": 4194304}'),
    "sql_statement_timeout": ("a number of seconds > 0", "30"),
    "sql_pool_size": ("a whole number >= 1", "5"),
    "sql_max_rows": ("a whole number >= 1", "100"),
    "sql_max_bytes": ("a whole number of bytes >= 256", "65536"),
    "shell_allow": ("program names or absolute paths, separated by commas (or a JSON list)", "git,ls,rg"),
    "shell_timeout": ("a number of seconds > 0", "30"),
    "openai_base_url": ("a URL with a scheme", "http://localhost:8000/v1"),
    "openai_api_key": ("the API key of the OpenAI-compatible server", "sk-..."),
    "limits": ("JSON, or one variable per limit", '{"max_tokens": 8192}'),
    "suspect_output": ("one of flag, retry", "flag"),
    "text_tool_calls": ("true or false", "false"),
}


class LlmDoSettings(BaseSettings):
    """llm-do's settings, read from `LLM_DO_*` variables and an optional `.env` file.

    Subclass it to add your own fields (`LLM_DO_<FIELD>`, nested models as `LLM_DO_<FIELD>__<PART>`).
    Invalid values raise `InvalidSettings`, naming each variable and the form it expects.
    """

    model_config = SettingsConfigDict(
        env_prefix="LLM_DO_", env_file=".env", env_file_encoding="utf-8", env_nested_delimiter="__", extra="ignore"
    )

    model: Annotated[str, AfterValidator(_model_name)] | None = None
    """Model for entries whose agent has none, e.g. `openai:gpt-5.2`."""
    max_depth: int = Field(default=5, ge=0)
    """Deepest allowed nesting of agent calls below the top-level call."""
    approval_mode: ApprovalMode = "prompt"
    """How gated tools are decided: ask the callback, approve all, or reject all."""
    approval_on_deny: ApprovalOnDeny = "tell_model"
    """What a denied call does: the model reads the denial as the tool result, or `ApprovalDenied` is raised."""
    approval_policies: dict[str, PolicySettings] = {}
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
    database_url: Annotated[SecretStr, AfterValidator(_url)] | None = None
    """Your application's database; a secret, shown as `**********`. Read it with `reveal(config.database_url)`."""
    filesystem: FilesystemSettings = FilesystemSettings()
    """Limits of the built-in `filesystem` and `filesystem_readonly` toolsets."""
    attachments: AttachmentSettings = AttachmentSettings()
    """Limits of the files handed to agents as attachments (see docs/attachments.md)."""
    sql_statement_timeout: float = Field(default=30.0, gt=0)
    """The `sql` toolset: seconds a statement (or a wait for a free connection) may take before it is cancelled."""
    sql_pool_size: int = Field(default=5, ge=1)
    """The `sql` toolset: connections in the database pool."""
    sql_max_rows: int = Field(default=100, ge=1)
    """The `sql` toolset: rows a `query` returns at most."""
    sql_max_bytes: int = Field(default=65536, ge=256)
    """The `sql` toolset: bytes of JSON rows a `query` returns at most."""
    shell_allow: Annotated[list[str], NoDecode, BeforeValidator(_comma_list), AfterValidator(_program_names)] = []
    """Programs the built-in `shell` toolset may run, with any arguments (see docs/toolsets.md)."""
    shell_timeout: float = Field(default=30.0, gt=0)
    """Seconds a `shell` command may run before its whole process group is killed."""
    openai_base_url: Annotated[str, AfterValidator(_plain_url)] | None = None
    """Base URL of an OpenAI-compatible server, used for `openai:` models (e.g. a local vLLM or Ollama)."""
    openai_api_key: SecretStr | None = None
    """API key for `openai:` models; a secret, shown as `**********`. Unset: OpenAI's own OPENAI_API_KEY."""
    limits: ModelLimits = ModelLimits()
    """Limits on model replies, requests and runs (`LLM_DO_LIMITS__MAX_TOKENS`, ...; see docs/local-models.md)."""
    suspect_output: SuspectOutput = "flag"
    """A final reply that looks like an unexecuted tool call or an echoed prompt: `flag` it, or `retry` (the model
    is told and asked again)."""
    text_tool_calls: bool = False
    """Run a reply that is only a JSON call to one of the call's tools as that call (for small local models)."""

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
            return
        except ValidationError as error:
            problems = [_describe(type(self), item, given=values) for item in error.errors()]
        except _ParseError as error:
            problems = [_describe_parse_error(type(self), error)]
        raise InvalidSettings(problems)  # raised outside `except`: the raw error (and any secret) stays out


def _variable(cls: type[BaseSettings], loc: tuple[int | str, ...]) -> str:
    config = cls.model_config
    field = cls.model_fields.get(str(loc[0]))
    alias = field.validation_alias if field is not None else None
    head = alias if isinstance(alias, str) else f"{config.get('env_prefix', '')}{loc[0]}"
    name = (config.get("env_nested_delimiter") or "__").join([head, *map(str, loc[1:])])
    return name if config.get("case_sensitive") else name.upper()


def _is_secret(cls: type[BaseModel], loc: tuple[int | str, ...]) -> bool:
    """Whether the value at `loc` is (inside) a secret field, or holds one (a model with a secret field, which a
    validator of the whole model fails on), so it must not be shown."""
    annotation: Any = cls
    for part in loc:
        model = next((t for t in (annotation, *get_args(annotation)) if _is_model(t)), None)
        field = None if model is None else model.model_fields.get(str(part))
        if field is None:
            return False
        if "Secret" in repr(field.annotation):
            return True
        annotation = field.annotation
    return _holds_secret(annotation, set())


def _holds_secret(annotation: Any, seen: set[type[BaseModel]]) -> bool:
    """Whether `annotation` is, or names, a model with a secret field at any depth."""
    for model in (t for t in (annotation, *get_args(annotation)) if _is_model(t) and t not in seen):
        seen.add(model)
        for declared in model.model_fields.values():
            if "Secret" in repr(declared.annotation) or _holds_secret(declared.annotation, seen):
                return True
    return False


def _is_model(candidate: Any) -> bool:
    return isinstance(candidate, type) and issubclass(candidate, BaseModel)


def _expected(cls: type[BaseSettings], name: str, loc: tuple[int | str, ...], message: str) -> str:
    if name in _FORMS and len(loc) == 1 and issubclass(cls, LlmDoSettings):
        form, example = _FORMS[name]
        return f"expected {form}, like {{variable}}={example}"
    text = message.removeprefix("Value error, ")
    text = text.removeprefix("Input should be ").removeprefix("input should be ").split(", unable to")[0]
    field = cls.model_fields.get(name)
    default = field.default if field is not None and len(loc) == 1 else None
    example = f", like {{variable}}={default}" if isinstance(default, str | int | float | Path) else ""
    return f"expected {text}{example}"


def _describe(cls: type[BaseSettings], item: Any, *, given: Mapping[str, Any], label: str | None = None) -> str:
    loc: tuple[int | str, ...] = tuple(item["loc"]) or ("?",)
    name = str(loc[0])
    variable = _variable(cls, loc)
    where = label or (".".join(map(str, loc)) if name in given else variable)
    if item["type"] == "missing":
        return f"{where} is required but not set"
    expected = _expected(cls, name, loc, str(item["msg"])).format(variable=variable)
    shown = "<hidden>" if _is_secret(cls, loc) else repr(item["input"])
    return f"{where}={shown}: {expected}"


def _describe_parse_error(cls: type[BaseSettings], error: _ParseError) -> str:
    match = re.search(r'field "([^"]+)"', str(error))
    field = match.group(1) if match else "?"
    variable = _variable(cls, (field,))
    delimiter = cls.model_config.get("env_nested_delimiter") or "__"
    return f"{variable} could not be parsed: expected JSON, or one variable per part like {variable}{delimiter}<PART>"


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
            problems.extend(_describe(LlmDoSettings, item, given={}, label=f"config.{name}") for item in error.errors())
        else:
            values[name] = getattr(scratch, name)
    if problems:
        raise InvalidSettings(problems)
    if len(values) < len(names):
        environment = LlmDoSettings()
        for name in names:
            values.setdefault(name, getattr(environment, name))
    return values
