"""`BuiltinToolsets`: providers of llm-do's built-in toolsets, configured from settings.

Subclass it (instead of `AgentContainer`) to offer the built-ins under their usual names, or
override a provider to configure one differently (see docs/toolsets.md).
"""

from typing import ClassVar

from dependency_injector import providers
from pydantic_settings import BaseSettings

from llm_do import reveal
from llm_do.toolsets import (
    DynamicAgents,
    FileOpsShell,
    FilesystemToolset,
    ReadOnlyFilesystemToolset,
    ReadOnlyShell,
    ShellToolset,
    SqlToolset,
    ToolsetSettings,
    open_database,
)

from .agent import AgentContainer


class BuiltinToolsets(AgentContainer):
    """llm-do's built-in toolsets, each per call, under their usual names; their settings (`ToolsetSettings`) are
    read into `config` beside `settings_class`."""

    builtin_settings: ClassVar[tuple[type[BaseSettings], ...]] = (ToolsetSettings,)

    # sql: transactions on the database of LLM_DO_DATABASE_URL; execute and commit ask by default
    sql_database = providers.Resource(  # global: one pool, closed when the runtime closes
        open_database,
        url=reveal(AgentContainer.config.database_url),
        pool_size=AgentContainer.config.sql_pool_size,
        statement_timeout=AgentContainer.config.sql_statement_timeout,
    )
    sql = providers.Factory(
        SqlToolset,
        database=sql_database,
        max_rows=AgentContainer.config.sql_max_rows,
        max_bytes=AgentContainer.config.sql_max_bytes,
    )

    # filesystem: files under LLM_DO_PROJECT_ROOT; writes and deletes ask (FilesystemToolset.default_policy)
    filesystem = providers.Factory(
        FilesystemToolset,
        root=AgentContainer.config.project_root,
        max_read_bytes=AgentContainer.config.filesystem.max_read_bytes,
        max_write_bytes=AgentContainer.config.filesystem.max_write_bytes,
        max_entries=AgentContainer.config.filesystem.max_entries,
        max_scanned=AgentContainer.config.filesystem.max_scanned,
        allow_hard_links=AgentContainer.config.filesystem.allow_hard_links,
    )
    filesystem_readonly = providers.Factory(
        ReadOnlyFilesystemToolset,
        root=AgentContainer.config.project_root,
        max_read_bytes=AgentContainer.config.filesystem.max_read_bytes,
        max_entries=AgentContainer.config.filesystem.max_entries,
        max_scanned=AgentContainer.config.filesystem.max_scanned,
    )

    # shell: allowlisted programs, no shell, confined to the project root; asks by default
    shell = providers.Factory(
        ShellToolset,
        root=AgentContainer.config.project_root,
        allow=AgentContainer.config.shell_allow,
        timeout=AgentContainer.config.shell_timeout,
    )

    # presets of the shell, asked for by name, as the earlier llm-do's: one to look around (runs without asking,
    # find -exec/-delete asks, denies what writes), one that lists and moves files (moves ask); paths stay relative
    shell_readonly = providers.Factory(
        ReadOnlyShell, root=AgentContainer.config.project_root, timeout=AgentContainer.config.shell_timeout
    )
    shell_file_ops = providers.Factory(
        FileOpsShell, root=AgentContainer.config.project_root, timeout=AgentContainer.config.shell_timeout
    )

    # dynamic_agents: a model makes an agent for its run (instructions, some of its own toolsets) and calls it
    dynamic_agents = providers.Factory(DynamicAgents)
