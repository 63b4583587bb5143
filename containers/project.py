"""`ProjectContainer`: the container of an llm-do project that declares none of its own."""

from .builtins import BuiltinToolsets


class ProjectContainer(BuiltinToolsets):
    """The built-in toolsets (sql, filesystem, filesystem_readonly, shell and its presets, dynamic_agents), rooted
    at the project.

    A project that needs its own providers defines a subclass of `BuiltinToolsets` (to keep the
    built-ins) or of `AgentContainer` in one of its modules; see docs/projects.md.
    """
