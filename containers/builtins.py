"""`BuiltinToolsets`: providers of llm-do's built-in toolsets, configured from settings.

Subclass it (instead of `AgentContainer`) to offer the built-ins under their usual names, or
override a provider to configure one differently (see docs/toolsets.md).
"""

from dependency_injector import providers

from llm_do import reveal
from llm_do.toolsets import SqlToolset, open_database

from .agent import AgentContainer


class BuiltinToolsets(AgentContainer):
    """llm-do's built-in toolsets, each per call, under their usual names."""

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
