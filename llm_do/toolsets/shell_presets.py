"""Shells with an allowlist and approvals of their own, asked for by name: `shell_readonly` to look around,
`shell_file_ops` to list files and move them (moves ask). They are the earlier llm-do's presets of the same
names: what it ran without asking runs without asking, what it asked for asks, and every other program is denied.

Both run their programs as the `shell` toolset does (no shell, a process group, the project root as the
working directory), and their policy's rule reads every command: paths must be relative and stay in the
project (no absolute path, no `..`), and what would write a file or run another program without asking is
denied, with the reason the model reads. git looks for its repository no higher than the project root. A symbolic
link inside the project that points out of it is followed by the programs: where that matters, use the
`filesystem_readonly` and `filesystem` toolsets, which refuse such links.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from .. import ToolPolicy, Verdict
from ..errors import listing
from .shell import ShellToolset

__all__ = ["FILE_OPS_PROGRAMS", "READ_ONLY_PROGRAMS", "FileOpsShell", "ReadOnlyShell"]

READ_ONLY_PROGRAMS = ("ls", "cat", "head", "tail", "wc", "grep", "find", "sort", "uniq", "git")
"""What `ReadOnlyShell` runs (git: its `log`, `diff`, `show` and `status` only), as the earlier `shell_readonly`."""
FILE_OPS_PROGRAMS = ("ls", "mv")
"""What `FileOpsShell` runs, as the earlier `shell_file_ops`: `ls`, and `mv`, which asks."""

_GIT_READS = frozenset({"log", "diff", "show", "status"})
_FIND_RUNS = frozenset({"-exec", "-execdir", "-delete"})
"""`find`'s actions the earlier `shell_readonly` asked for."""
_FIND_WRITES = frozenset({"-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"})
"""`find`'s actions that write a file or wait for an answer on the terminal: denied."""
_GIT_REFUSED = (
    "-c",
    "-C",
    "--config-env",
    "--exec-path",
    "--git-dir",
    "--work-tree",
    "--output",
    "--ext-diff",
    "--textconv",
)
_GIT_GLOBAL_READS = frozenset(
    {
        "--no-pager",
        "-P",
        "--no-optional-locks",
        "--no-replace-objects",
        "--literal-pathspecs",
        "--glob-pathspecs",
        "--noglob-pathspecs",
        "--icase-pathspecs",
    }
)
"""git's options before the command that take no value and change nothing: the only ones allowed there, since
another (`--namespace NAME`) takes the next argument as its value, which makes the one after it git's command."""
_SORT_VALUED = frozenset("kSTt")
"""`sort`'s short options that take a value (`-o` is one too: the file it writes)."""
_UNIQ_VALUED = frozenset({"-f", "-s", "-w", "--skip-fields", "--skip-chars", "--check-chars"})


_PARENT = re.compile(r"\.\.(?:[/\\]|\Z)")
"""A '..' that is a whole name: before a separator or at the end."""


def _outside(argument: str) -> bool:
    return argument.startswith("/") or ".." in argument.replace("\\", "/").split("/")


def _leaves_project(argument: str) -> bool:
    """Whether `argument` may name a path outside the project: itself, the value after its `=`, or, for short
    options, a value joined to one of them (`-f/etc/passwd`, `-t../out`)."""
    if _outside(argument) or _outside(argument.partition("=")[2]):
        return True
    if argument.startswith("-") and not argument.startswith("--"):
        joined = argument[2:]  # a value may start after any letter: one that starts with '/' or '..' leaves
        return "/" in joined or _PARENT.search(joined) is not None
    return False


def _sort_problem(args: Sequence[str]) -> str | None:
    """Why `sort` may not run with `args` here (it writes a file, or runs a program), or None."""
    expects_value = False
    for argument in args:
        if expects_value:
            expects_value = False
            continue
        if argument == "--":
            return None
        if argument.startswith("--"):
            name = argument[2:].partition("=")[0]
            if name and "output".startswith(name):
                return f"sort may not write a file ({argument}) here"
            if len(name) > 1 and "compress-program".startswith(name):
                return f"sort may not run {argument} here"
        elif argument.startswith("-") and len(argument) > 1:
            for index, letter in enumerate(argument[1:], start=2):
                if letter == "o":
                    return f"sort may not write a file ({argument}) here"
                if letter in _SORT_VALUED:
                    expects_value = index == len(argument)
                    break
    return None


def _uniq_problem(args: Sequence[str]) -> str | None:
    """Why `uniq` may not run with `args` here (a second file name is the file it writes), or None."""
    operands: list[str] = []
    expects_value, options = False, True
    for argument in args:
        if expects_value:
            expects_value = False
        elif options and argument == "--":
            options = False
        elif options and argument.startswith("-") and argument != "-":
            expects_value = argument in _UNIQ_VALUED
        else:
            operands.append(argument)
    return f"uniq may not write a file ({operands[1]}) here" if len(operands) > 1 else None


def _problem(program: str, args: Sequence[str], programs: Sequence[str]) -> str | None:
    """Why this command is not for a shell of `programs`, or None."""
    if program not in programs:
        return f"{program} is not one of this shell's programs ({listing(programs)})"
    if any(_leaves_project(argument) for argument in args):
        return "paths must be relative and stay in the project (no absolute path, no '..')"
    if program == "find" and _FIND_WRITES.intersection(args):
        return f"find may not {listing(_FIND_WRITES.intersection(args))} here"
    if program == "sort":
        return _sort_problem(args)
    if program == "uniq":
        return _uniq_problem(args)
    if program == "git":
        refused = [arg for arg in args if arg.startswith(_GIT_REFUSED)]
        command = next((arg for arg in args if arg not in _GIT_GLOBAL_READS), None)
        if refused:
            return f"git {refused[0]} is not allowed here"
        if command is not None and command.startswith("-"):
            return f"git {command} before the command is not allowed here; write the command first (git log ...)"
        if command not in _GIT_READS:
            return f"only git {listing(_GIT_READS)} run here, not git {command or '(no command)'}"
    return None


def _command(args: Mapping[str, Any]) -> tuple[str, list[str]]:
    command = [str(item) for item in args.get("command") or ()]
    return (os.path.basename(command[0]) if command else ""), command[1:]


def read_only_rule(tool: str, args: Mapping[str, Any]) -> Verdict | None:
    """Deny what a read-only shell must not run; `find` that runs a program or deletes asks."""
    program, rest = _command(args)
    problem = _problem(program, rest, READ_ONLY_PROGRAMS) if program else None
    if problem:
        return Verdict("deny", problem)
    if program == "find" and _FIND_RUNS.intersection(rest):
        return Verdict("ask", f"find {listing(_FIND_RUNS.intersection(rest))}: {' '.join(rest)}")
    return None


def file_ops_rule(tool: str, args: Mapping[str, Any]) -> Verdict | None:
    """Deny what the file-operations shell must not run; moves ask."""
    program, rest = _command(args)
    problem = _problem(program, rest, FILE_OPS_PROGRAMS) if program else None
    if problem:
        return Verdict("deny", problem)
    if program == "mv":
        return Verdict("ask", f"moves files: {' '.join(rest)}")
    return None


class ReadOnlyShell(ShellToolset):
    """A shell to look around the project: `ls`, `cat`, `head`, `tail`, `wc`, `grep`, `sort`, `uniq`, `find`, and
    git's `log`, `diff`, `show` and `status`. Runs without asking, except `find` with `-exec`, `-execdir` or
    `-delete`, which asks; what would write a file is denied."""

    default_policy: ClassVar[ToolPolicy | None] = ToolPolicy(rule=read_only_rule)

    def __init__(self, root: str | os.PathLike[str], **options: Any) -> None:
        # git looks for its repository from the working directory up: never above the project, whose parent
        # repository's other files `git show HEAD:<path>` and `git log -p` would print.
        above = {"GIT_CEILING_DIRECTORIES": os.path.dirname(os.path.realpath(root))}
        super().__init__(root, READ_ONLY_PROGRAMS, **{**options, "env": {**above, **(options.get("env") or {})}})


class FileOpsShell(ShellToolset):
    """`ls`, which runs without asking, and `mv`, which asks; no other program."""

    default_policy: ClassVar[ToolPolicy | None] = ToolPolicy(rule=file_ops_rule)

    def __init__(self, root: str | os.PathLike[str], **options: Any) -> None:
        super().__init__(root, FILE_OPS_PROGRAMS, **options)
