"""`AgentContainer`: the base container users subclass to declare their agents' resources."""

from typing import Any, ClassVar, Self

from dependency_injector import containers, providers
from pydantic_settings import BaseSettings

from llm_do import LlmDoSettings, RunLocalSingleton, RunState
from llm_do.di import read_settings


class AgentContainer(containers.DeclarativeContainer):
    """Settings and run state; subclasses add pools (global), ledgers (per run) and toolsets (per call).

    `config` is filled from `settings_class` and `builtin_settings` (the environment and `.env`) each time a
    container is created, so a bad variable fails there, naming it. Set `settings_class` to your own
    `LlmDoSettings` subclass and read its fields as `AgentContainer.config.<field>`.
    """

    settings_class: ClassVar[type[LlmDoSettings]] = LlmDoSettings
    builtin_settings: ClassVar[tuple[type[BaseSettings], ...]] = ()
    """The settings of llm-do's parts that the container wires, read into `config` beside `settings_class` (whose
    values win): `BuiltinToolsets` names `llm_do.toolsets.ToolsetSettings`."""

    config = providers.Configuration()
    run_state = RunLocalSingleton(RunState)
    approval_policies = providers.Dict()  # toolset name -> llm_do.ToolPolicy; see docs/approvals.md

    def __new__(cls, **overriding_providers: Any) -> Self:
        container: Self = super().__new__(cls, **overriding_providers)
        for settings in reversed(read_settings(cls.settings_class, *cls.builtin_settings)):  # settings_class last
            container.config.from_pydantic(settings)
        return container
