"""The built-in `shell` toolset: run allowlisted programs, never through a shell, inside the project root."""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import ClassVar, TypeAlias

from pydantic_ai.exceptions import ToolFailed

from .. import ToolPolicy, Toolset, tool
from ..errors import listing
from ._process import Completed, run_in_process_group

__all__ = ["DEFAULT_PATH", "AllowSpec", "CommandResult", "ShellRule", "ShellToolset"]

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
"""The PATH programs are looked up on and run with, unless the toolset is given another."""


@dataclass(frozen=True, slots=True)
class ShellRule:
    """One allowed program and, optionally, the arguments it may get.

    `program` is a bare name looked up on the toolset's PATH (`"git"`) or an absolute path
    (`"/opt/tools/lint"`, which the model may call by its base name too). `args` are regular
    expressions: every argument must match one of them in full (`re.fullmatch`). `args=None`
    allows any arguments; `args=()` allows none.
    """

    program: str
    args: Sequence[str] | None = None
    _patterns: tuple[re.Pattern[str], ...] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        problem = program_problem(self.program)
        if problem:
            raise ValueError(f"ShellRule: program {self.program!r} {problem}")
        if isinstance(self.args, str):
            raise TypeError(f"ShellRule({self.program!r}): args must be a list of patterns, not one string")
        patterns = None if self.args is None else tuple(re.compile(pattern) for pattern in self.args)
        object.__setattr__(self, "args", None if self.args is None else tuple(self.args))
        object.__setattr__(self, "_patterns", patterns)

    @property
    def name(self) -> str:
        """What the model calls the program: the bare name, or an absolute path's base name."""
        return os.path.basename(self.program)

    def refusal(self, args: Sequence[str]) -> str | None:
        """Why `args` are not allowed for this program, or None when they are."""
        if self._patterns is None:
            return None
        for position, argument in enumerate(args, start=1):
            if not any(pattern.fullmatch(argument) for pattern in self._patterns):
                allowed = ", ".join(f"'{pattern.pattern}'" for pattern in self._patterns) or "none (no arguments)"
                return (
                    f"argument {position} {argument!r} is not allowed for {self.name!r}; each argument must match "
                    f"one of these patterns in full: {allowed}"
                )
        return None


AllowSpec: TypeAlias = Iterable[str | ShellRule] | Mapping[str, Sequence[str] | None] | None
"""An allowlist: program names and `ShellRule`s, or a mapping program -> argument patterns (None: any)."""


def program_problem(program: str) -> str | None:
    """What is wrong with an allowlisted program name, or None: a bare name, or an absolute path."""
    if not program or any(character.isspace() or character == "\0" for character in program):
        return "must be a program name or an absolute path, without spaces"
    if os.path.isabs(program):
        return None if os.path.basename(program) not in ("", ".", "..") else "must name a file"
    if "/" in program or program in (".", ".."):
        return "must be a bare name (looked up on PATH) or an absolute path, not a relative path"
    return None


def _encodable(text: str) -> bool:
    """Whether `text` is valid Unicode: no lone surrogate, not even one `os.fsencode` would turn into a raw byte
    (a model's `"\\udc80"` is not the byte 0x80 it would become)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(command: Sequence[str], limit: int = 200) -> str:
    text = repr(list(command))
    return text if len(text) <= limit else text[: limit - 4] + " ...]"


def _signal_name(number: int) -> str:
    try:
        return f"{signal.Signals(number).name} ({number})"
    except ValueError:
        return str(number)


def _rules(allow: AllowSpec) -> dict[str, ShellRule]:
    if allow is None:
        return {}
    if isinstance(allow, str):
        raise TypeError(f"allow must be a list of programs, not the string {allow!r}")
    items: tuple[_Item, ...]
    if isinstance(allow, Mapping):
        items = tuple((program, _hashable(args)) for program, args in allow.items())
    else:
        items = tuple(item if isinstance(item, ShellRule) else (item, None) for item in allow)
    return dict(_parsed(items))  # a copy: the cached one stays untouched


_Item: TypeAlias = ShellRule | tuple[str, Sequence[str] | None]


def _hashable(args: Sequence[str] | None) -> Sequence[str] | None:
    return args if args is None or isinstance(args, str) else tuple(args)  # ShellRule refuses a str


@functools.lru_cache(maxsize=64)
def _parsed(items: tuple[_Item, ...]) -> dict[str, ShellRule]:
    """Rules by name; cached, since a per-call toolset is built with the same allowlist every call."""
    rules: dict[str, ShellRule] = {}
    for item in items:
        rule = item if isinstance(item, ShellRule) else ShellRule(*item)
        if rule.name in rules:
            first = rules[rule.name].program
            raise ValueError(f"the shell allowlist names {rule.name!r} twice ({first!r}, {rule.program!r})")
        rules[rule.name] = rule
    return rules


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What `run` returns. `exit_code` is negative only when the time limit's signal ended the program
    (-15, or -9 once SIGKILL was needed); a program ended by any other signal is a `ToolFailed` instead."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False


class ShellToolset(Toolset):
    """Run allowlisted programs without a shell, in a working directory inside the project root.

    Per call (declare it with `providers.Factory`). Each command runs in its own process group
    with a minimal environment (PATH, LANG, a private empty HOME, and `env`, which wins), no stdin, a
    `timeout`, and at most `max_output` bytes kept of stdout and of stderr. When the command
    ends, times out or is cancelled, its whole process group is ended: SIGTERM, then SIGKILL
    after `kill_grace` seconds. Calls need approval by default (`default_policy`).
    """

    default_policy: ClassVar[ToolPolicy | None] = ToolPolicy(default="ask")

    def __init__(
        self,
        root: str | os.PathLike[str],
        allow: AllowSpec,
        *,
        timeout: float | None = None,
        max_output: int = 32_768,
        kill_grace: float = 2.0,
        path: str = DEFAULT_PATH,
        env: Mapping[str, str] | None = None,
        lang: str = "C.UTF-8",
    ) -> None:
        resolved = os.path.realpath(root)
        if not os.path.isdir(resolved):
            raise ValueError(f"shell toolset: root {os.fspath(root)!r} is not an existing directory")
        self.root = Path(resolved)
        self.rules = _rules(allow)
        self.timeout = 30.0 if timeout is None else float(timeout)
        if self.timeout <= 0 or max_output < 0 or kill_grace < 0:
            raise ValueError(
                f"shell toolset: timeout must be > 0 and max_output, kill_grace >= 0; "
                f"got timeout={timeout!r}, max_output={max_output!r}, kill_grace={kill_grace!r}"
            )
        self.max_output = max_output
        self.kill_grace = kill_grace
        self.base_env = {"PATH": path, "LANG": lang, **(env or {})}
        for key, value in self.base_env.items():
            if not key or "=" in key or "\0" in key + value:
                raise ValueError(f"shell toolset: environment variable {key!r} has an invalid name or value")
        self._home: str | None = None

    @tool
    async def run(self, command: list[str], cwd: str = ".") -> CommandResult:
        """Run one program and return its exit code, stdout and stderr.

        Args:
            command: the program and its arguments as separate strings, like ["git", "log", "-n", "3"]. There
                is no shell: pipes, redirections, `;`, `&&`, `$(...)`, globs and quotes reach the program as
                literal text. Only allowed programs run; a refusal lists them.
            cwd: the working directory, relative to the project root (default: the root itself).
        """
        rule, args = self._checked(command)
        directory = self._directory(cwd)
        env = self.base_env if "HOME" in self.base_env else {**self.base_env, "HOME": self._home_directory()}
        executable = self._executable(rule, env["PATH"])
        try:
            done = await run_in_process_group(
                [executable, *args],
                cwd=directory,
                env=env,
                time_limit=self.timeout,
                max_output=self.max_output,
                kill_grace=self.kill_grace,
            )
        except OSError as error:
            raise ToolFailed(f"run: {rule.name!r} could not be started: {error.strerror or error}") from None
        return self._result(command, done)

    def _checked(self, command: list[str]) -> tuple[ShellRule, list[str]]:
        if not command:
            raise ToolFailed('run: the command is empty; give the program and its arguments, like ["ls", "-l"]')
        name, args = command[0], command[1:]
        for position, argument in enumerate(command):
            which = "the program name" if position == 0 else f"argument {position}"
            if "\0" in argument:
                raise ToolFailed(f"run: {which} contains a NUL character, which no program can receive; remove it")
            if not _encodable(argument):
                raise ToolFailed(
                    f"run: {which} ({argument!r}) contains a lone surrogate, which is not text and cannot be "
                    "passed to a program; remove it"
                )
        rule = self.rules.get(name) or next((r for r in self.rules.values() if r.program == name), None)
        if rule is None:
            allowed = listing(self.rules, empty="none (the allowlist is empty)")
            hint = ""
            if len(command) == 1 and " " in name.strip():
                hint = f" The command is a list of arguments, not a shell line: write {name.split()!r}."
            raise ToolFailed(
                f"run: program {name!r} is not allowed; allowed programs: {allowed}.{hint} Use an allowed "
                "program, or ask the user to add this one to the allowlist (LLM_DO_SHELL_ALLOW)."
            )
        refusal = rule.refusal(args)
        if refusal is not None:
            raise ToolFailed(f"run: {refusal}.")
        return rule, args

    def _directory(self, cwd: str) -> Path:
        if not _encodable(cwd):
            raise ToolFailed(f"run: cwd {cwd!r} contains a lone surrogate, which no directory name has; remove it")
        relative = PurePosixPath(cwd)
        if "\0" in cwd or relative.is_absolute() or ".." in relative.parts:
            raise ToolFailed(
                f"run: cwd {cwd!r} is not allowed; give a directory relative to the project root, "
                "without '..' (like 'src' or '.')"
            )
        try:
            directory = (self.root / relative).resolve()
        except (OSError, RuntimeError) as error:  # a symbolic link loop, a name too long
            why = os.strerror(error.errno) if isinstance(error, OSError) and error.errno else "a symbolic link loop?"
            raise ToolFailed(f"run: cwd {cwd!r} cannot be resolved ({why}); use another directory") from None
        if not directory.is_relative_to(self.root):
            raise ToolFailed(
                f"run: cwd {cwd!r} leads outside the project root (through a symbolic link); use a directory inside it"
            )
        if not os.path.isdir(directory):
            raise ToolFailed(f"run: cwd {cwd!r} is not a directory under the project root")
        return directory

    def _executable(self, rule: ShellRule, path: str) -> str:
        if os.path.isabs(rule.program):
            found = rule.program if os.path.isfile(rule.program) and os.access(rule.program, os.X_OK) else None
        else:
            found = shutil.which(rule.program, path=path)
        if found is None:
            where = "does not exist or is not executable" if os.path.isabs(rule.program) else f"is not on PATH={path}"
            raise ToolFailed(
                f"run: program {rule.name!r} is allowed but {where}; ask the user to install it "
                "or to allow it by its absolute path"
            )
        return found

    def _home_directory(self) -> str:
        if self._home is None:
            self._home = tempfile.mkdtemp(prefix="llm-do-shell-home-")
        return self._home

    def _result(self, command: list[str], done: Completed) -> CommandResult:
        stdout = done.stdout.decode("utf-8", errors="replace")
        stderr = done.stderr.decode("utf-8", errors="replace")
        if done.stdout_dropped:
            stdout += self._cut_note("stdout", done.stdout_dropped)
        if done.stderr_dropped:
            stderr += self._cut_note("stderr", done.stderr_dropped)
        if done.returncode is not None and done.returncode < 0 and not done.timed_out:
            raise ToolFailed(
                f"run: the command {_shown(command)} was ended by signal {_signal_name(-done.returncode)} before "
                "it finished. llm-do did not send it (the time limit had not passed): it came from outside (another "
                "process, or the system running out of memory) or from the program itself (a crash). Whatever was "
                f"left of its processes was ended too. stdout so far: {stdout!r}; stderr so far: {stderr!r}"
            )
        if done.timed_out:
            stderr += (
                f"\n[llm-do: the command was stopped after {self.timeout:g} s (its time limit) "
                "and all its processes were killed]"
            )
        if done.pipes_left_open:
            stderr += (
                "\n[llm-do: a process that left the command's process group kept its output open; "
                "what it wrote later was not read]"
            )
        return CommandResult(
            exit_code=done.returncode,
            stdout=stdout,
            stderr=stderr,
            timed_out=done.timed_out,
            truncated=bool(done.stdout_dropped or done.stderr_dropped),
        )

    def _cut_note(self, stream: str, dropped: int) -> str:
        return (
            f"\n[llm-do: {stream} truncated: {dropped} more bytes were not shown "
            f"(at most {self.max_output} bytes per stream); narrow the command to see the rest]"
        )

    def cleanup(self) -> None:
        """Remove the private HOME directory, if a command ran."""
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None
