"""`BuiltinToolsets`: providers of llm-do's built-in toolsets, configured from settings.

Subclass it (instead of `AgentContainer`) to offer the built-ins under their usual names, or
override a provider to configure one differently (see docs/toolsets.md).
"""

from dependency_injector import providers

from llm_do.toolsets import ShellToolset

from .agent import AgentContainer


class BuiltinToolsets(AgentContainer):
    """llm-do's built-in toolsets, each per call, under their usual names."""

    # shell: allowlisted programs, no shell, confined to the project root; asks by default
    shell = providers.Factory(
        ShellToolset,
        root=AgentContainer.config.project_root,
        allow=AgentContainer.config.shell_allow,
        timeout=AgentContainer.config.shell_timeout,
    )
