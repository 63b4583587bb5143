"""Model names to pydantic-ai models: built when first used, so loading a project needs no API key.

`resolve_model` is the one place a model name becomes a model. `test` is pydantic-ai's `TestModel`, which leaves
a worker's native tools out of its requests (`offline.OfflineTestModel`). `replay:PATH` plays a recorded session
back through `llm_do.models.ReplayModel.from_file(PATH)` (a relative PATH is taken from `root`: the
project; the command line makes its paths absolute first); `openai:*` models use `openai_base_url`
and `openai_api_key` from settings. A model that cannot be built for want of an API key raises
`MissingApiKey`, which names the environment variable to set.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload
from urllib.parse import urlsplit

from pydantic import SecretStr
from pydantic_ai.exceptions import UserError
from pydantic_ai.models import Model, infer_model, known_model_names, parse_model_id
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.providers import Provider, infer_provider, infer_provider_class

from ..errors import ConfigurationError
from ..models.observed import ObservedModel
from ..models.replay import ReplayModel

if TYPE_CHECKING:
    from pydantic_ai.profiles.openai import OpenAIModelProfile

__all__ = [
    "DeferredModel",
    "MissingApiKey",
    "ModelFactory",
    "ModelServer",
    "matches_any",
    "model_factory",
    "model_id",
    "missing_package",
    "model_problem",
    "resolve_model",
]

_KEY_VARIABLE = re.compile(r"`([A-Z][A-Z0-9_]*)` environment variable")


@dataclass(frozen=True, slots=True)
class ModelServer:
    """An OpenAI-compatible server a project names (`[providers.NAME]` in `project.toml`): a model name
    `NAME:model` is that model on this server, over the chat completions API."""

    base_url: str
    api_key_env: str | None = None
    """The environment variable holding its API key, if it needs one (a local server needs none)."""


_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")


@dataclass(frozen=True, slots=True)
class ModelFactory:
    """A project's own model prefix (`llm_do.project.model_factory`): a model name `PREFIX:NAME`, in the project's
    files or on the command line, is the model `build(NAME)` returns, built when first used. It holds for the
    project whose module defines it (as a module attribute), never for another project."""

    prefix: str
    build: Callable[[str], Model]

    def __call__(self, model_name: str) -> Model:
        """The model `PREFIX:model_name` stands for; `ConfigurationError` when `build` returns no pydantic-ai
        `Model`."""
        model = self.build(model_name)
        if not isinstance(model, Model):
            raise ConfigurationError(
                f"the model factory of prefix {self.prefix!r} ({_qualified(self.build)}) returned "
                f"{type(model).__name__}, not a pydantic-ai Model; return one (OpenAIChatModel(...), "
                "FunctionModel(...))"
            )
        return model


@overload
def model_factory(prefix: str) -> Callable[[Callable[[str], Model]], ModelFactory]: ...
@overload
def model_factory(prefix: str, build: Callable[[str], Model]) -> ModelFactory: ...
def model_factory(
    prefix: str, build: Callable[[str], Model] | None = None
) -> ModelFactory | Callable[[Callable[[str], Model]], ModelFactory]:
    """Declare, in a project module, that model names `PREFIX:NAME` are `build(NAME)`: a decorator
    (`@model_factory("acme")` over `def acme(name: str) -> Model`), or a call whose result is kept as a module
    attribute (`acme = model_factory("acme", build_acme)`). The module attribute is what counts: a project that
    does not load the module knows no such prefix. Raises `ValueError` for a prefix that is not a provider name
    (letters, digits, `_`, `.`, `-`, starting with a letter) or is `test` or `replay`."""
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix) or prefix in ("test", "replay"):
        raise ValueError(
            f"model_factory({prefix!r}): a model prefix is letters, digits, '_', '.' or '-', starting with a letter, "
            "and not 'test' or 'replay'"
        )

    def declare(function: Callable[[str], Model]) -> ModelFactory:
        if not callable(function):
            raise TypeError(f"model_factory({prefix!r}) takes a function of the model's name, got {function!r}")
        return ModelFactory(prefix, function)

    return declare(build) if build is not None else declare


def _qualified(function: Callable[..., Any]) -> str:
    return f"{getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', repr(function))}"


class MissingApiKey(ConfigurationError):
    """A model cannot be built because its provider's API key is not set. `variable` is what to set."""

    def __init__(self, model: str, variable: str) -> None:
        self.model = model
        self.variable = variable
        also = " (or LLM_DO_OPENAI_API_KEY)" if model.startswith(_OPENAI_KINDS) else ""
        super().__init__(
            f"model {model!r} needs an API key: set the environment variable {variable}{also}, "
            "or choose another model (--model, LLM_DO_MODEL, or model: in the worker file)"
        )


class DeferredModel(WrapperModel):
    """A model built from its name the first time it is used (at run time), then kept. `endpoint_setting` names
    the setting that gave its server's address, if one did (`LLM_DO_OPENAI_BASE_URL`)."""

    def __init__(self, name: str, build: Callable[[], Model], endpoint_setting: str | None = None) -> None:
        Model.__init__(self)  # not WrapperModel's: it would build the model now
        self.name = name
        """The name it is built from (`provider:model`, `PREFIX:model`)."""
        self._build = build
        self._built: Model | None = None
        self.endpoint_setting = endpoint_setting

    @property
    def wrapped(self) -> Model:
        if self._built is None:
            try:
                self._built = self._build()
            except UserError as error:
                found = _KEY_VARIABLE.search(str(error))
                if found is None:
                    raise
                raise MissingApiKey(self.name, found.group(1)) from None
        return self._built

    @wrapped.setter
    def wrapped(self, model: Model) -> None:
        self._built = model

    @property
    def built(self) -> bool:
        """Whether the model has been built yet."""
        return self._built is not None

    def __repr__(self) -> str:
        return f"DeferredModel({self.name!r})"


def resolve_model(
    name: str,
    *,
    root: Path,
    settings: Mapping[str, Any] | None = None,
    servers: Mapping[str, ModelServer] | None = None,
    factories: Mapping[str, ModelFactory] | None = None,
) -> Model:
    """The model a name stands for. Raises `ValueError` with what to do when it cannot be resolved.

    `settings` is a mapping of llm-do settings (a container's `config()`), read for `openai_base_url`
    and `openai_api_key`; `servers` are the project's OpenAI-compatible servers by name (`NAME:model`), and
    `factories` its modules' model factories by prefix (`PREFIX:model`).
    """
    prefix, _, model_name = name.partition(":")
    if factories and prefix in factories and model_name:
        factory = factories[prefix]
        return DeferredModel(name, lambda: factory(model_name))
    known = {*(servers or ()), *(factories or ())}
    if servers and prefix in servers and model_name:
        server = servers[prefix]
        return DeferredModel(name, lambda: _served(model_name, server), f"[providers.{prefix}] in project.toml")
    if name.startswith("replay:"):
        return _replay(name.removeprefix("replay:"), root)
    if name == "test":
        from .offline import OfflineTestModel  # only when asked for: it imports pydantic-ai's test models

        return OfflineTestModel()
    problem = model_problem(name, servers=known)
    if problem is not None:
        raise ValueError(problem)
    settings = settings or {}
    base_url, api_key = settings.get("openai_base_url"), settings.get("openai_api_key")
    if name.startswith(_OPENAI_KINDS) and (base_url or api_key):
        setting = "LLM_DO_OPENAI_BASE_URL" if base_url else None
        return DeferredModel(name, lambda: _openai_model(name, base_url, api_key), setting)
    return DeferredModel(name, lambda: infer_model(name))


_OPENAI_KINDS = ("openai:", "openai-chat:", "openai-responses:")
"""Model kinds that `openai_base_url` and `openai_api_key` apply to: most OpenAI-compatible servers
speak the chat completions API (`openai-chat:`); `openai:` is OpenAI's responses API."""


def missing_package(name: str, *, servers: Collection[str] = ()) -> str | None:
    """The package to install (a pip requirement, `pydantic-ai-slim[anthropic]`) before model `name` of a provider
    pydantic-ai knows can be used, when it is not installed; None when it is, or the name is no such model."""
    if name == "test" or name.startswith("replay:") or name.partition(":")[0] in servers:
        return None
    provider, _ = parse_model_id(name)
    if provider is None:
        return None
    try:
        infer_provider_class(provider)
    except ImportError as error:
        named = re.search(r'pip install "([^"]+)"', str(error))
        return named.group(1) if named else f"pydantic-ai-slim[{provider}]"
    except ValueError:
        return None
    return None


def model_problem(name: str, *, installed: bool = False, servers: Collection[str] = ()) -> str | None:
    """What is wrong with a model name (`provider:name`, `test` or `replay:PATH`), or None.

    The provider must be one pydantic-ai knows, or one of the project's own prefixes (`servers`: its
    `[providers.NAME]` and its modules' `model_factory` prefixes). With `installed`, the
    package its client needs must be installed too (imported to find out); without, a missing package is left
    for run time.
    """
    if name == "test" or name.startswith("replay:"):
        return None
    prefix, _, model_name = name.partition(":")
    if prefix in servers:
        return None if model_name else f"{name!r} names no model after the provider; write {prefix}:model-name"
    provider, model_name = parse_model_id(name)
    known = [k for k in known_model_names() if not k.startswith("gateway/")]
    if provider is None:
        close = difflib.get_close_matches(name, [k.split(":", 1)[1] for k in known if ":" in k], n=1)
        hint = next((f" (did you mean {k!r}?)" for k in known if close and k.endswith(f":{close[0]}")), "")
        return f"{name!r} is not a model name{hint}; write provider:model-name, like openai:gpt-5.2, or test"
    try:
        infer_provider_class(provider)
    except ValueError:
        providers = sorted({k.split(":", 1)[0] for k in known if ":" in k})
        close = difflib.get_close_matches(provider, [*servers, *providers], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        own = f"the project's own prefixes are {', '.join(sorted(servers))}; " if servers else ""
        return f"unknown model provider {provider!r}{hint}; {own}known providers include {', '.join(providers)}"
    except ImportError as error:
        if installed:
            return f"the {provider!r} provider cannot be used here: {error}"
    if not model_name:
        return f"{name!r} names no model after the provider; write {provider}:model-name"
    return None


def model_id(model: Model | str) -> str:
    """`provider:name` of a model, as `compatible_models` patterns see it; a model that records or journals
    another (`--record`) is named as the model it wraps."""
    if isinstance(model, str):
        return model
    while isinstance(model, ObservedModel):
        model = model.wrapped
    if isinstance(model, DeferredModel):
        return model.name
    name = model.model_name
    return name if name.startswith(f"{model.system}:") else f"{model.system}:{name}"


def matches_any(model: Model | str, patterns: tuple[str, ...]) -> bool:
    """Whether the model's id matches one of the glob patterns (`openai:*`, `*:gpt-5*`, ...)."""
    return any(fnmatch.fnmatchcase(model_id(model), pattern) for pattern in patterns)


def _openai_model(name: str, base_url: Any, api_key: Any) -> Model:
    """An `openai*:` model on the server `base_url` names. A chat model on a server that is not OpenAI's is sent
    what OpenAI-compatible servers (llama.cpp, Ollama, vLLM) all read (`_compatible_profile`)."""
    if name.startswith("openai-chat:") and base_url and urlsplit(str(base_url)).hostname != "api.openai.com":
        from pydantic_ai.models.openai import OpenAIChatModel

        provider = _openai(base_url, api_key)("openai-chat")
        return OpenAIChatModel(name.removeprefix("openai-chat:"), provider=provider, profile=_compatible_profile())
    return infer_model(name, provider_factory=_openai(base_url, api_key))


def _openai(base_url: Any, api_key: Any) -> Callable[[str], Provider[Any]]:
    def provider(name: str) -> Provider[Any]:
        if name not in ("openai", "openai-chat", "openai-responses"):
            return infer_provider(name)
        from pydantic_ai.providers.openai import OpenAIProvider

        key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
        return OpenAIProvider(base_url=base_url, api_key=key)

    return provider


def _served(model_name: str, server: ModelServer) -> Model:
    """`model_name` on an OpenAI-compatible server, sent what such servers read (`_compatible_profile`)."""
    import os

    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    key = os.environ.get(server.api_key_env) if server.api_key_env else None
    provider = OpenAIProvider(base_url=server.base_url, api_key=key or "not-needed")
    return OpenAIChatModel(model_name, provider=provider, profile=_compatible_profile())


def _compatible_profile() -> OpenAIModelProfile:
    """What a chat model on an OpenAI-compatible server is sent in the fields every such server reads: its token
    limit as `max_tokens` (not OpenAI's newer `max_completion_tokens`), and a `tool_choice` list as `"required"`
    with the tools narrowed to the list (not OpenAI's newer `allowed_tools`, which not every such server reads:
    pydantic-ai's own OpenRouter and xAI providers leave it off)."""
    from pydantic_ai.profiles.openai import OpenAIModelProfile

    return OpenAIModelProfile(
        openai_chat_supports_max_completion_tokens=False, openai_chat_supports_allowed_tools=False
    )


def _replay(path: str, root: Path) -> Model:
    return ReplayModel.from_file((root / path).resolve())  # an absolute path stays as it is
