"""`AgentContainer`: the base container users subclass to declare their agents' resources."""

from dependency_injector import containers, providers

from llm_do import LlmDoSettings, RunState


class AgentContainer(containers.DeclarativeContainer):
    """Settings and run state; subclasses add pools (global), ledgers (per run) and toolsets (per call)."""

    config = providers.Configuration(pydantic_settings=[LlmDoSettings()])
    run_state = providers.ContextLocalSingleton(RunState)
    approval_policies = providers.Dict()  # toolset name -> llm_do.ToolPolicy; see docs/approvals.md
