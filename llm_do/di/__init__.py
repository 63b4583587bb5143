"""dependency-injector, and only here: per-run and per-session providers, a provider's kind read as a scope,
toolset specs, and the settings read from the environment (`LLM_DO_*`).

May import: errors, scopes, files, approvals, guards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._config import (
        RuntimeConfig as RuntimeConfig,
    )
    from ._container import (
        CapturablePerRunWarning as CapturablePerRunWarning,
        ClosedFirst as ClosedFirst,
        Container as Container,
        ContainerParts as ContainerParts,
        Resources as Resources,
        is_provider as is_provider,
        policies_built as policies_built,
        provider_name as provider_name,
    )
    from ._env import (
        EnvSettings as EnvSettings,
        plain_url as plain_url,
        read_settings as read_settings,
    )
    from ._overrides import (
        Graph as Graph,
        Overrides as Overrides,
        OverridesSource as OverridesSource,
        check_session_overrides as check_session_overrides,
    )
    from ._settings import (
        LlmDoSettings as LlmDoSettings,
        reveal as reveal,
        settings_values as settings_values,
    )
    from ._singletons import (
        RunLocalSingleton as RunLocalSingleton,
        SessionLocalSingleton as SessionLocalSingleton,
    )
    from ._specs import (
        ToolsetRef as ToolsetRef,
        ToolsetSource as ToolsetSource,
        ToolsetSpec as ToolsetSpec,
        injection_scope as injection_scope,
        scope_of_provider as scope_of_provider,
        toolset_names as toolset_names,
    )

_EXPORTS: dict[str, tuple[str, ...]] = {
    "_config": ("RuntimeConfig",),
    "_env": (
        "EnvSettings",
        "plain_url",
        "read_settings",
    ),
    "_container": (
        "CapturablePerRunWarning",
        "ClosedFirst",
        "Container",
        "ContainerParts",
        "Resources",
        "is_provider",
        "policies_built",
        "provider_name",
    ),
    "_overrides": (
        "Graph",
        "Overrides",
        "OverridesSource",
        "check_session_overrides",
    ),
    "_settings": (
        "LlmDoSettings",
        "reveal",
        "settings_values",
    ),
    "_singletons": (
        "RunLocalSingleton",
        "SessionLocalSingleton",
    ),
    "_specs": (
        "ToolsetRef",
        "ToolsetSource",
        "ToolsetSpec",
        "injection_scope",
        "scope_of_provider",
        "toolset_names",
    ),
}
"""Each private module of the room, and the names it gives the other rooms."""

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
