"""Built-in toolsets. Their providers live in `containers.builtins.BuiltinToolsets`."""

from .shell import DEFAULT_PATH, AllowSpec, CommandResult, ShellRule, ShellToolset

__all__ = ["DEFAULT_PATH", "AllowSpec", "CommandResult", "ShellRule", "ShellToolset"]
