"""dependency-injector, and only here: per-run and per-session providers, a provider's kind read as a scope,
toolset specs, and the settings read from the environment (`LLM_DO_*`).

May import: errors, scopes, files, approvals, guards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_imports

if TYPE_CHECKING:
    from ._container import (
        is_provider as is_provider,
    )
    from ._env import (
        EnvSettings as EnvSettings,
        plain_url as plain_url,
        read_settings as read_settings,
    )
    from ._specs import (
        toolset_names as toolset_names,
    )

__getattr__, __dir__ = lazy_imports(globals())
