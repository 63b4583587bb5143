"""The earlier llm-do's words in agent files, and what replaces each today (docs/migrating.md).

The earlier llm-do wrote agents in `.agent` files (and, before that, in `.worker` files) with the
frontmatter we read today, plus a few keys whose name or meaning changed. Loading reports each of
those as a problem naming its replacement; `llm-do migrate` rewrites them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .. import PolicySettings

__all__ = ["EARLIER_KEYS", "EARLIER_TOOLSETS", "agent_call_approvals", "earlier_key_message", "earlier_toolset_message"]

EARLIER_KEYS: dict[str, str] = {
    "entry": "the earlier llm-do marked the default entry with 'entry: true' in its file; today the project "
    'names it: entry = "NAME" in project.toml',
    "input_model_ref": "today's key is input: module:Class or path.py:Class, a plain pydantic model "
    "(no AgentArgs, no prompt_messages)",
    "schema_in_ref": "today's key is input: module:Class or path.py:Class, a plain pydantic model",
    "server_side_tools": "today's key is native_tools: a mapping of web_search, web_fetch, code_execution or "
    "image_generation to their options (tool_type becomes the name)",
    "tools": "single tools are not named in files today: put them in a toolset (a FunctionToolset or a Toolset "
    "subclass in a project module) and name it in toolsets",
}
"""Frontmatter keys of the earlier `.agent`/`.worker` files that are not keys today, and what replaces each."""

EARLIER_TOOLSETS: dict[str, str | None] = {
    "filesystem_project": "filesystem",
    "filesystem_project_ro": "filesystem_readonly",
    "filesystem_cwd": None,
    "filesystem_cwd_ro": None,
}
"""Built-in toolset names of the earlier llm-do: today's toolset of the same meaning, or None when there is none."""

_NO_TOOLSET: dict[str, str] = {
    "filesystem_cwd": "today's built-in filesystem toolsets are rooted at the project directory "
    "(LLM_DO_PROJECT_ROOT to change it): use filesystem or filesystem_readonly",
    "filesystem_cwd_ro": "today's built-in filesystem toolsets are rooted at the project directory "
    "(LLM_DO_PROJECT_ROOT to change it): use filesystem_readonly",
}


def earlier_key_message(key: str) -> str | None:
    """The problem message for an earlier frontmatter key, or None when `key` is not one."""
    replacement = EARLIER_KEYS.get(key)
    return None if replacement is None else f"{key!r} is a key of the earlier llm-do: {replacement}"


def earlier_toolset_message(name: str) -> str | None:
    """What replaces an earlier built-in toolset name, or None when `name` is not one."""
    if name not in EARLIER_TOOLSETS:
        return None
    today = EARLIER_TOOLSETS[name]
    if today is not None:
        return f"{name!r} is the earlier llm-do's name of today's {today!r}; write {today}"
    return f"{name!r} is a toolset of the earlier llm-do: {_NO_TOOLSET[name]}"


DYNAMIC_AGENTS = "dynamic_agents"
"""The built-in toolset whose `agent_call` the earlier `project.json`'s approvals of calls to agents decided too."""


def agent_call_approvals(
    toolsets: Iterable[str], agents: Iterable[str], agent_approvals: Mapping[str, PolicySettings]
) -> dict[str, PolicySettings]:
    """What the earlier `project.json`'s approvals of calls to agents (`agent_approvals`, by agent name, "*" for
    every agent) give a worker whose toolsets are `toolsets`: each agent it calls (one of `agents`) gets its own
    (or every agent's); the built-in `dynamic_agents` gets an `agent_call` that asks when a call to any agent asked,
    and asks before calls that hand over files when such calls to any agent did. The earlier llm-do decided each
    `agent_call` by the agent it named; one policy decides them all today, so it is the strictest of them."""
    found: dict[str, PolicySettings] = {}
    named = set(agents)
    for name in toolsets:
        if name in named:
            policy = agent_approvals.get(name, agent_approvals.get("*"))
            if policy is not None and policy != PolicySettings():
                found[name] = policy
        elif name == DYNAMIC_AGENTS:
            calls = any(policy.default == "ask" for policy in agent_approvals.values())
            files = any(policy.attachments == "ask" for policy in agent_approvals.values())
            if calls:
                found[name] = PolicySettings(tools={"agent_call": "ask"})
            elif files:
                found[name] = PolicySettings(attachments="ask")
    return found
