"""`RuntimeConfig`: what a `Runtime` needs to know, built from settings or a container's config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from dependency_injector import providers
from pydantic_ai.models import Model

from ..approvals._policy import ApprovalMode, ApprovalOnDeny, Decision, PolicySettings
from ..files._limits import AttachmentSettings
from ..guards._limits import ModelLimits, ModelRules, SuspectOutput
from ._settings import LlmDoSettings, settings_values


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """What a `Runtime` needs to know.

    Build it with `from_settings` or `from_container`; keyword arguments given there win over
    the container's config, which wins over the environment and `.env`.
    """

    max_depth: int = 5
    cleanup_timeout: float = 10.0
    approval_mode: ApprovalMode = "prompt"
    model: Model | str | None = None
    approval_on_deny: ApprovalOnDeny = "tell_model"
    approval_policies: Mapping[str, PolicySettings] = field(default_factory=dict, hash=False)
    approval_timeout: float = 600.0
    """Seconds an approver may take to answer before the call is denied."""
    approval_default: Decision = "ask"
    """What a call gets to a tool nobody declared safe: its toolset has no declared policy and the tool is not
    declared read-only (nor an agent, nor an MCP tool, whose annotations decide). `allow` keeps the behaviour of
    llm-do before this setting: such tools run without asking."""
    project_root: Path = Path(".")
    """The directory attachments are read from (and confined to): names are relative to it."""
    attachments: AttachmentSettings = field(default_factory=AttachmentSettings, hash=False)
    """Limits of attachments: per file, per text file, per call."""
    session_idle_timeout: float = 1800.0
    """Seconds a session may stay without a run before it closes."""
    stream_buffer: int = 256
    """Model events a live run holds for its consumer before the run waits for it."""
    resume_buffer: int = 10_000
    """Events a resumable live run keeps for consumers that come later before it drops completed responses'
    deltas."""
    limits: ModelLimits = field(default_factory=ModelLimits, hash=False)
    """Limits on model replies, requests and runs, for entries that set none of their own."""
    suspect_output: SuspectOutput = "flag"
    """What a final reply that looks like an unexecuted tool call or an echoed prompt does: `flag` or `retry`."""
    text_tool_calls: bool = False
    """Whether a reply that is only a JSON call to one of the call's tools is run as that call."""
    made_agent_max_instructions_bytes: int = 32_768
    """The most bytes (UTF-8) of instructions an agent made in a run may have: they go with each of its requests."""

    @property
    def rules(self) -> ModelRules:
        """`limits`, `suspect_output` and `text_tool_calls` as the rules entries lay their own over."""
        return ModelRules.of_settings(self.limits, self.suspect_output, self.text_tool_calls)

    def __post_init__(self) -> None:
        if self.max_depth < 0:
            raise ValueError(f"max_depth must be >= 0, got {self.max_depth}")
        if self.stream_buffer < 1:
            raise ValueError(f"stream_buffer must be >= 1, got {self.stream_buffer}")
        if self.resume_buffer < 1:
            raise ValueError(f"resume_buffer must be >= 1, got {self.resume_buffer}")
        if self.made_agent_max_instructions_bytes < 1:
            raise ValueError(
                f"made_agent_max_instructions_bytes must be >= 1, got {self.made_agent_max_instructions_bytes}"
            )
        for name in ("cleanup_timeout", "approval_timeout", "session_idle_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0 seconds, got {getattr(self, name)}")

    @classmethod
    def from_settings(
        cls, settings: LlmDoSettings | Mapping[str, Any] | None = None, **overrides: Any
    ) -> RuntimeConfig:
        """Config from settings, or a mapping such as a container's `config()` (missing keys come
        from the environment), or the environment when omitted; keyword overrides win."""
        if isinstance(settings, Mapping):
            values = settings_values(settings, _RUNTIME_FIELDS)
        else:
            source = settings if settings is not None else LlmDoSettings()
            values = {name: getattr(source, name) for name in _RUNTIME_FIELDS}
        values.update(overrides)
        return cls(**values)

    @classmethod
    def from_container(cls, container: object, **overrides: Any) -> RuntimeConfig:
        """Config from a container's `config` provider (an `AgentContainer`'s holds its settings),
        or from the environment when it has none; keyword overrides win."""
        provider = getattr(container, "config", None)
        values = provider() if isinstance(provider, providers.Configuration) else None
        return cls.from_settings(values if isinstance(values, Mapping) and values else None, **overrides)


_RUNTIME_FIELDS = tuple(item.name for item in fields(RuntimeConfig))
"""The settings a `RuntimeConfig` is built from: its own fields, each one of `LlmDoSettings`."""
