"""Shells with an allowlist and approvals of their own, asked for by name: `shell_readonly` to look around,
`shell_file_ops` to also make, copy and move files (copies and moves ask).

Both run their programs as the `shell` toolset does (no shell, a process group, the project root as the
working directory), and their policy's rule reads every command: paths must be relative and stay in the
project (no absolute path, no `..`), and what would write or run something else is denied, with the reason
the model reads. A symbolic link inside the project that points out of it is followed by the programs: where
that matters, use the `filesystem_readonly` and `filesystem` toolsets, which refuse such links.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ..approvals import ToolPolicy, Verdict
from ..errors import listing
from .shell import ShellToolset

__all__ = ["FILE_OPS_PROGRAMS", "READ_ONLY_PROGRAMS", "FileOpsShell", "ReadOnlyShell"]

READ_ONLY_PROGRAMS = ("ls", "cat", "head", "tail", "wc", "grep", "find", "stat", "du", "git")
"""What `ReadOnlyShell` runs (git: its `log`, `diff`, `status`, `show`, `blame`, `ls-files` and `grep` only)."""
FILE_OPS_PROGRAMS = (*READ_ONLY_PROGRAMS, "mkdir", "touch", "cp", "mv")
"""What `FileOpsShell` runs: the read-only programs, and `mkdir`, `touch`, `cp`, `mv` (copies and moves ask)."""

_GIT_READS = frozenset({"log", "diff", "status", "show", "blame", "ls-files", "grep"})
_FIND_ACTIONS = frozenset({"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"})
_GIT_REFUSED = ("-c", "-C", "--exec-path", "--git-dir", "--work-tree", "--output", "--ext-diff", "--textconv")


def _outside(argument: str) -> bool:
    return argument.startswith("/") or ".." in argument.replace("\\", "/").split("/")


def _problem(program: str, args: Sequence[str], programs: Sequence[str]) -> str | None:
    """Why this command is not for a shell of `programs`, or None."""
    if program not in programs:
        return f"{program} is not one of this shell's programs ({listing(programs)})"
    if any(_outside(argument.partition("=")[2] or argument) for argument in args):
        return "paths must be relative and stay in the project (no absolute path, no '..')"
    if program == "find" and _FIND_ACTIONS.intersection(args):
        return f"find may not {listing(_FIND_ACTIONS.intersection(args))} here: it only lists"
    if program == "git":
        refused = [arg for arg in args if arg.startswith(_GIT_REFUSED)]
        command = next((arg for arg in args if not arg.startswith("-")), None)
        if refused:
            return f"git {refused[0]} is not allowed here"
        if command not in _GIT_READS:
            return f"only git {listing(_GIT_READS)} run here, not git {command or '(no command)'}"
    return None


def _command(args: Mapping[str, Any]) -> tuple[str, list[str]]:
    command = [str(item) for item in args.get("command") or ()]
    return (os.path.basename(command[0]) if command else ""), command[1:]


def read_only_rule(tool: str, args: Mapping[str, Any]) -> Verdict | None:
    """Deny what a read-only shell must not run."""
    program, rest = _command(args)
    problem = _problem(program, rest, READ_ONLY_PROGRAMS) if program else None
    return Verdict("deny", problem) if problem else None


def file_ops_rule(tool: str, args: Mapping[str, Any]) -> Verdict | None:
    """Deny what the file-operations shell must not run; copies and moves ask."""
    program, rest = _command(args)
    problem = _problem(program, rest, FILE_OPS_PROGRAMS) if program else None
    if problem:
        return Verdict("deny", problem)
    if program in ("cp", "mv"):
        return Verdict("ask", f"{'copies' if program == 'cp' else 'moves'} files: {' '.join(rest)}")
    return None


class ReadOnlyShell(ShellToolset):
    """A shell to look around the project: `ls`, `cat`, `head`, `tail`, `wc`, `grep`, `find` (without actions),
    `stat`, `du`, and git's reading commands. Runs without asking; what would write is denied."""

    default_policy: ClassVar[ToolPolicy | None] = ToolPolicy(rule=read_only_rule)

    def __init__(self, root: str | os.PathLike[str], **options: Any) -> None:
        super().__init__(root, READ_ONLY_PROGRAMS, **options)


class FileOpsShell(ShellToolset):
    """The read-only shell's programs, and `mkdir`, `touch`, `cp` and `mv`: copies and moves ask."""

    default_policy: ClassVar[ToolPolicy | None] = ToolPolicy(rule=file_ops_rule)

    def __init__(self, root: str | os.PathLike[str], **options: Any) -> None:
        super().__init__(root, FILE_OPS_PROGRAMS, **options)
