"""`llm-do`: the command table, argument parsing and exit codes (0 ok, 1 error, 2 usage error, 130 interrupted).

This module stays light: it imports the standard library only, so `llm-do --help` and `--version`
answer without importing pydantic-ai. Each command's handler lives in its own module, named in
`COMMANDS` and imported when that command runs. To add a command, add a `Command` to `COMMANDS`.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import import_module

from ..errors import extra_missing
from .failures import ERROR, USAGE, UsageError, report
from .worker_arguments import worker_arguments

__all__ = ["CLI_EXTRA", "COMMANDS", "Command", "UsageError", "main", "parser", "version"]


@dataclass(frozen=True, slots=True)
class Command:
    """One subcommand: its name, help, arguments, and its handler `module:function` (under `llm_do.cli`).

    The handler takes the parsed arguments and returns the exit code; it is imported only when the
    command runs, so a command may import whatever it needs without slowing down the others.
    """

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    handler: str


def _project(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("project", metavar="PROJECT", help="a project directory, its project.toml or a .worker file")
    parser.add_argument(
        "-m",
        "--model",
        help="the model of workers that name none: provider:name, test, or replay:PATH (PATH relative to here)",
    )
    parser.add_argument("--debug", action="store_true", help="print tracebacks")


def _running(parser: argparse.ArgumentParser) -> None:
    _project(parser)
    parser.add_argument("--entry", help="the entry to run (default: the project's default entry)")
    parser.add_argument("--max-depth", type=int, metavar="N", help="the deepest nesting of calls (LLM_DO_MAX_DEPTH)")
    approvals = parser.add_mutually_exclusive_group()
    approvals.add_argument("--approve-all", action="store_true", help="approve every call that asks")
    approvals.add_argument("--reject-all", action="store_true", help="deny every call that asks")
    parser.add_argument("--record", metavar="PATH", help="record the model's responses to PATH (for replay:PATH)")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="-v: tool calls; -vv: model text too")


def _run(parser: argparse.ArgumentParser) -> None:
    _running(parser)
    parser.add_argument("prompt", nargs="?", metavar="PROMPT", help="the input (else --input-json or stdin)")
    parser.add_argument("--input-json", metavar="JSON", help="the input as JSON (for an input model)")
    parser.add_argument(
        "--attach",
        action="append",
        default=[],
        metavar="PATH",
        help="hand a file under the project to the entry (repeat for more; PATH relative to here)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document: output, usage, calls")
    parser.add_argument("--otel", action="store_true", help="export a trace (OTEL_EXPORTER_OTLP_*)")


def _inspect(parser: argparse.ArgumentParser) -> None:
    _project(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")


def _migrate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "project", metavar="PROJECT", help="a project directory of the earlier llm-do, or its project.json"
    )
    parser.add_argument("--write", action="store_true", help="apply the changes (default: print them as a diff)")
    parser.add_argument("--debug", action="store_true", help="print tracebacks")


CLI_EXTRA = ("rich", "yaml")
"""The modules the command needs beyond the library: its `cli` extra installs them (rich, PyYAML)."""

COMMANDS: list[Command] = [
    Command("run", "Run an entry once and print its output.", _run, "running:run"),
    Command("chat", "Talk to an entry, turn by turn.", _running, "running:chat"),
    Command("check", "Load a project and report every problem.", _inspect, "checking:check"),
    Command("list", "List a project's entries, toolsets, models and policies.", _inspect, "checking:list_project"),
    Command(
        "migrate",
        "Rewrite a project of the earlier llm-do into today's format (a diff; --write applies it).",
        _migrate,
        "migrating:migrate",
    ),
    Command(
        "worker", "Run agent jobs from the PostgreSQL queue (needs the jobs extra).", worker_arguments, "worker:run"
    ),
]
"""The subcommands, in the order `--help` shows them."""


def version() -> str:
    """The version of llm-do."""
    import llm_do

    return llm_do.__version__


class _Version(argparse.Action):
    """`--version`: looks the version up only when asked."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"llm-do {version()}")
        parser.exit()


class _Intermixed(argparse.ArgumentParser):
    """A command's parser, which takes its positionals between its flags (`run . --entry clerk "hi"`): plain
    argparse fills an optional positional (the prompt) with nothing as soon as it meets the project."""

    _parsing = False

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self._parsing:  # the two passes of parse_known_intermixed_args
            return super().parse_known_args(args, namespace)
        self._parsing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._parsing = False


def parser() -> argparse.ArgumentParser:
    """The argument parser of the command, built from `COMMANDS`."""
    top = argparse.ArgumentParser(prog="llm-do", description="Run, chat with, check and list agent projects.")
    top.add_argument("--version", action=_Version, help="print the version of llm-do and exit")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Intermixed)
    for command in COMMANDS:
        sub = commands.add_parser(command.name, help=command.help, description=command.help)
        command.arguments(sub)
        sub.set_defaults(handler=command.handler)
    return top


def main(argv: list[str] | None = None) -> int:
    """Run the command line `argv` (default: `sys.argv[1:]`) and return the exit code."""
    earlier = _earlier_command_line(sys.argv[1:] if argv is None else argv)
    if earlier is not None:
        print(f"llm-do: error: {earlier}", file=sys.stderr)
        return USAGE
    try:
        args = parser().parse_args(argv)
    except SystemExit as exit_:  # --help, --version (0) or a bad command line (2); argparse printed why
        return exit_.code if isinstance(exit_.code, int) else USAGE
    try:
        for name in CLI_EXTRA:  # every command imports them: a missing one is said in one line, not a traceback
            import_module(name)
    except ModuleNotFoundError as error:
        print(f"llm-do: error: {extra_missing('cli', 'the llm-do command', error.name or name)}", file=sys.stderr)
        return ERROR
    module, _, function = str(args.handler).partition(":")
    import_module(".wiring", __package__).import_wiring_without_web_frameworks()  # before any container
    handler: Callable[[argparse.Namespace], int] = getattr(import_module(f".{module}", __package__), function)
    try:
        return handler(args)
    except BrokenPipeError:  # the reader went away (`| head`): nothing more to say to it
        _quiet_stdout()
        return ERROR
    except (Exception, KeyboardInterrupt) as error:
        return report(error, debug=bool(getattr(args, "debug", False)))


_PROJECT_FILES = (".json", ".toml", ".agent", ".worker")
"""What a project is given as, beside its directory: its project file, or an agent file."""
_EARLIER_ONLY = {"--headless", "--tui", "--chat"}
"""Flags of the earlier llm-do's command line that have no counterpart today (--chat is `llm-do chat`)."""


def _earlier_command_line(argv: Sequence[str]) -> str | None:
    """What to type today for the earlier llm-do's command line, `llm-do PROJECT [PROMPT] [flags]`: a project
    given where the command goes. None for any other command line (argparse says what is wrong with it)."""
    if not argv or argv[0].startswith("-") or argv[0] in {command.name for command in COMMANDS}:
        return None
    if not (os.path.isdir(argv[0]) or (os.path.isfile(argv[0]) and argv[0].endswith(_PROJECT_FILES))):
        return None
    chat = "--chat" in argv
    rest = [arg for arg in argv[1:] if arg not in _EARLIER_ONLY and not (chat and not arg.startswith("-"))]
    command = " ".join(shlex.quote(arg) for arg in ["llm-do", "chat" if chat else "run", argv[0], *rest])
    gone = sorted(_EARLIER_ONLY.intersection(argv) - {"--chat"})
    note = f" ({' and '.join(gone)} {'are' if len(gone) > 1 else 'is'} gone: the live tree shows on a terminal only)"
    return (
        f"{argv[0]!r} is a project, not a command: the earlier llm-do's `llm-do PROJECT [PROMPT]` is "
        f"`llm-do run PROJECT [PROMPT]` today{note if gone else ''}; run: {command}"
    )


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit does not fail a second time."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
