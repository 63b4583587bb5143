"""Settings from the environment (`LLM_DO_...`) and the runtime configuration built from them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field
from pydantic_ai.models import Model
from pydantic_settings import BaseSettings, SettingsConfigDict

from .policy import PolicySettings

__all__ = ["ApprovalMode", "ApprovalOnDeny", "LlmDoSettings", "RuntimeConfig"]

ApprovalMode = Literal["prompt", "approve_all", "reject_all"]
ApprovalOnDeny = Literal["tell_model", "raise"]


class LlmDoSettings(BaseSettings):
    """llm-do's settings, read from `LLM_DO_*` variables and an optional `.env` file."""

    model_config = SettingsConfigDict(env_prefix="LLM_DO_", env_file=".env", env_nested_delimiter="__", extra="ignore")

    model: str | None = None
    """Default model name for entries whose agent has none, e.g. `openai:gpt-5.2`."""
    max_depth: int = Field(default=5, ge=0)
    """Deepest allowed nesting of agent calls below the top-level call."""
    approval_mode: ApprovalMode = "prompt"
    """How gated tools are decided: ask the callback, approve all, or reject all."""
    approval_on_deny: ApprovalOnDeny = "tell_model"
    """What a denied call does: the model reads the denial as the tool result, or `ApprovalDenied` is raised."""
    approval_policies: dict[str, PolicySettings] = {}
    """Policy overrides per toolset name, on top of the declared policies (see docs/approvals.md)."""
    cleanup_timeout: float = Field(default=10.0, gt=0)
    """Seconds each finalizer may take during teardown before it is cancelled."""


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """What a `Runtime` needs to know; explicit values win over the environment."""

    max_depth: int = 5
    cleanup_timeout: float = 10.0
    approval_mode: ApprovalMode = "prompt"
    model: Model | str | None = None
    approval_on_deny: ApprovalOnDeny = "tell_model"
    approval_policies: Mapping[str, PolicySettings] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.max_depth < 0:
            raise ValueError(f"max_depth must be >= 0, got {self.max_depth}")
        if self.cleanup_timeout <= 0:
            raise ValueError(f"cleanup_timeout must be > 0 seconds, got {self.cleanup_timeout}")

    @classmethod
    def from_settings(cls, settings: LlmDoSettings | None = None, **overrides: Any) -> RuntimeConfig:
        """Config from settings (the environment when omitted), with keyword overrides on top."""
        settings = settings if settings is not None else LlmDoSettings()
        values: dict[str, Any] = {
            "max_depth": settings.max_depth,
            "cleanup_timeout": settings.cleanup_timeout,
            "approval_mode": settings.approval_mode,
            "model": settings.model,
            "approval_on_deny": settings.approval_on_deny,
            "approval_policies": settings.approval_policies,
        }
        values.update(overrides)
        return cls(**values)
