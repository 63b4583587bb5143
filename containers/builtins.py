"""`BuiltinToolsets`: llm-do's built-in toolsets as per-call providers. Subclass it, or copy the providers you want."""

from dependency_injector import providers

from llm_do.toolsets import FilesystemToolset, ReadOnlyFilesystemToolset

from .agent import AgentContainer


class BuiltinToolsets(AgentContainer):
    """Every built-in toolset, each under its own name and configured from settings."""

    # filesystem: files under LLM_DO_PROJECT_ROOT; writes and deletes ask (FilesystemToolset.default_policy)
    filesystem = providers.Factory(
        FilesystemToolset,
        root=AgentContainer.config.project_root,
        max_read_bytes=AgentContainer.config.filesystem.max_read_bytes,
        max_write_bytes=AgentContainer.config.filesystem.max_write_bytes,
        max_entries=AgentContainer.config.filesystem.max_entries,
        max_scanned=AgentContainer.config.filesystem.max_scanned,
    )
    filesystem_readonly = providers.Factory(
        ReadOnlyFilesystemToolset,
        root=AgentContainer.config.project_root,
        max_read_bytes=AgentContainer.config.filesystem.max_read_bytes,
        max_entries=AgentContainer.config.filesystem.max_entries,
        max_scanned=AgentContainer.config.filesystem.max_scanned,
    )
