"""The earlier llm-do's names that no rewrite of a project's code can keep the meaning of, with today's behaviour.

`llm-do migrate` points a project's imports of these names here (docs/migrating.md says which names, and why).
"""

from __future__ import annotations

from typing import Any

from pydantic_ai.providers.openai import OpenAIProvider  # the openai package: pydantic-ai-slim[openai]

__all__ = ["OpenAICompatibleProvider"]


class OpenAICompatibleProvider(OpenAIProvider):
    """The earlier llm-do's provider for a server that speaks OpenAI's API (Ollama, vLLM): pydantic-ai's
    `OpenAIProvider` at `base_url`, under its own `name` (what the model's responses name as their provider), with
    an API key the server ignores unless one is given. Today a `[providers.NAME]` table in `project.toml` declares
    such a server without code (docs/projects.md)."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str = "unused",
        name: str = "openai-compatible",
        http_client: Any = None,
    ) -> None:
        super().__init__(base_url=base_url.rstrip("/"), api_key=api_key, http_client=http_client)
        self._compatible_name = name

    @property
    def name(self) -> str:
        return self._compatible_name
