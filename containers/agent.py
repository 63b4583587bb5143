"""`AgentContainer`: the base container users subclass to declare their agents' resources."""

from typing import Any, ClassVar, Self

from dependency_injector import containers, providers

from llm_do import LlmDoSettings, RunLocalSingleton, RunState


class AgentContainer(containers.DeclarativeContainer):
    """Settings and run state; subclasses add pools (global), ledgers (per run) and toolsets (per call).

    `config` is filled from `settings_class` (the environment and `.env`) each time a container is
    created, so a bad variable fails there, naming it. Set `settings_class` to your own
    `LlmDoSettings` subclass and read its fields as `AgentContainer.config.<field>`.
    """

    settings_class: ClassVar[type[LlmDoSettings]] = LlmDoSettings

    config = providers.Configuration()
    run_state = RunLocalSingleton(RunState)
    approval_policies = providers.Dict()  # toolset name -> llm_do.ToolPolicy; see docs/approvals.md

    def __new__(cls, **overriding_providers: Any) -> Self:
        container: Self = super().__new__(cls, **overriding_providers)
        container.config.from_pydantic(cls.settings_class())
        return container
