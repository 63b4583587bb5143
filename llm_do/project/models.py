"""Model names to pydantic-ai models: built when first used, so loading a project needs no API key.

`resolve_model` is the one place a model name becomes a model. `replay:PATH` plays a recorded session
back through `llm_do.models.ReplayModel.from_file(PATH)` (PATH relative to the project root);
`openai:*` models use `openai_base_url` and `openai_api_key` from settings.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from pydantic_ai.models import Model, infer_model
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.providers import Provider, infer_provider

from ..models.replay import ReplayModel

__all__ = ["DeferredModel", "matches_any", "model_id", "resolve_model"]


class DeferredModel(WrapperModel):
    """A model built from its name the first time it is used (at run time), then kept."""

    def __init__(self, name: str, build: Callable[[], Model]) -> None:
        Model.__init__(self)  # not WrapperModel's: it would build the model now
        self._name = name
        self._build = build
        self._built: Model | None = None

    @property
    def wrapped(self) -> Model:
        if self._built is None:
            self._built = self._build()
        return self._built

    @wrapped.setter
    def wrapped(self, model: Model) -> None:
        self._built = model

    @property
    def built(self) -> bool:
        """Whether the model has been built yet."""
        return self._built is not None

    def __repr__(self) -> str:
        return f"DeferredModel({self._name!r})"


def resolve_model(name: str, *, root: Path, settings: Mapping[str, Any] | None = None) -> Model:
    """The model a name stands for. Raises `ValueError` with what to do when it cannot be resolved.

    `settings` is a mapping of llm-do settings (a container's `config()`), read for `openai_base_url`
    and `openai_api_key`.
    """
    if name.startswith("replay:"):
        return _replay(name.removeprefix("replay:"), root)
    if name == "test":
        return infer_model("test")
    settings = settings or {}
    base_url, api_key = settings.get("openai_base_url"), settings.get("openai_api_key")
    if name.startswith(_OPENAI_KINDS) and (base_url or api_key):
        return DeferredModel(name, lambda: infer_model(name, provider_factory=_openai(base_url, api_key)))
    return DeferredModel(name, lambda: infer_model(name))


_OPENAI_KINDS = ("openai:", "openai-chat:", "openai-responses:")
"""Model kinds that `openai_base_url` and `openai_api_key` apply to: most OpenAI-compatible servers
speak the chat completions API (`openai-chat:`); `openai:` is OpenAI's responses API."""


def model_id(model: Model | str) -> str:
    """`provider:name` of a model, as `compatible_models` patterns see it."""
    if isinstance(model, str):
        return model
    if isinstance(model, DeferredModel):
        return model._name
    name = model.model_name
    return name if name.startswith(f"{model.system}:") else f"{model.system}:{name}"


def matches_any(model: Model | str, patterns: tuple[str, ...]) -> bool:
    """Whether the model's id matches one of the glob patterns (`openai:*`, `*:gpt-5*`, ...)."""
    return any(fnmatch.fnmatchcase(model_id(model), pattern) for pattern in patterns)


def _openai(base_url: Any, api_key: Any) -> Callable[[str], Provider[Any]]:
    def provider(name: str) -> Provider[Any]:
        if name not in ("openai", "openai-chat", "openai-responses"):
            return infer_provider(name)
        from pydantic_ai.providers.openai import OpenAIProvider

        key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
        return OpenAIProvider(base_url=base_url, api_key=key)

    return provider


def _replay(path: str, root: Path) -> Model:
    return ReplayModel.from_file((root / path).resolve())
