"""Containers module."""

from __future__ import annotations

from dependency_injector import containers, providers
from pydantic_ai import Agent

from llm_do import AgentEntry, RunLocalSingleton, RuntimeResource, ToolPolicy

from .assistant import INSTRUCTIONS, UnitOfWork, UserTools
from .database import Database
from .repositories import UserRepository
from .services import UserService


class Container(containers.DeclarativeContainer):
    __self__ = providers.Self()

    wiring_config = containers.WiringConfiguration(modules=[".endpoints"])

    config = providers.Configuration()

    db = providers.Singleton(Database, db_url=config.db.url)

    user_repository = providers.Factory(
        UserRepository,
        session_factory=db.provided.session,
    )

    user_service = providers.Factory(
        UserService,
        user_repository=user_repository,
    )

    # The assistant: its transaction per request, its tools per call, and the runtime that runs it.
    unit_of_work = RunLocalSingleton(UnitOfWork, db=db)

    user_tools = providers.Factory(UserTools)

    approval_policies = providers.Dict({user_tools: ToolPolicy(tools={"deactivate_user": "ask"})})

    assistant = providers.Object(AgentEntry(Agent(instructions=INSTRUCTIONS), name="assistant", toolsets=[user_tools]))

    runtime = RuntimeResource(__self__, entries=providers.List(assistant))
