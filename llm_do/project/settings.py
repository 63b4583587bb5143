"""`ProjectSettings`: the settings a project's model names and the `llm-do` command read (`LLM_DO_OPENAI_*`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar

from pydantic import AfterValidator, SecretStr

from ..di import EnvSettings, plain_url

__all__ = ["ProjectSettings"]


class ProjectSettings(EnvSettings):
    """The OpenAI-compatible server that a project's `openai:`, `openai-chat:` and `openai-responses:` model names
    use, read from `LLM_DO_*` variables and `.env` when a project loads (`load_project`, the `llm-do` command).

    Invalid values raise `InvalidSettings`, naming each variable and the form it expects.
    """

    setting_forms: ClassVar[Mapping[str, tuple[str, str]]] = {
        "openai_base_url": ("a URL with a scheme", "http://localhost:8000/v1"),
        "openai_api_key": ("the API key of the OpenAI-compatible server", "sk-..."),
    }

    openai_base_url: Annotated[str, AfterValidator(plain_url)] | None = None
    """Base URL of an OpenAI-compatible server, used for `openai:` models (e.g. a local vLLM or Ollama)."""
    openai_api_key: SecretStr | None = None
    """API key for `openai:` models; a secret, shown as `**********`. Unset: OpenAI's own OPENAI_API_KEY."""
