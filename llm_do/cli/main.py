"""`llm-do`: argument parsing, the commands, and exit codes (0 ok, 1 error, 2 usage error, 130 interrupted)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from pydantic_ai.models import Model
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from ..approval import ApprovalUnavailable
from ..entries import AgentEntry
from ..models import RecordingModel
from ..policy import ToolPolicy
from ..project import Project, ProjectError, discover_project, load_project, resolve_model
from ..project.models import model_id
from ..run import RunResult, run_report
from ..settings import LlmDoSettings
from .approve import TerminalApprover
from .render import final_tree, json_document, live_tree, output_text, usage_table
from .servers import probe_and_close, report_failures, servers_table
from .watch import Board, watch_project

__all__ = ["UsageError", "main"]

OK, ERROR, USAGE, INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """A command line that cannot work (exit code 2)."""


def main(argv: list[str] | None = None) -> int:
    """Run the command line `argv` (default: `sys.argv[1:]`) and return the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help (0) or a bad command line (2); argparse printed why
        return exit_.code if isinstance(exit_.code, int) else USAGE
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        code: int = args.handler(args, err)
        return code
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/]: the run was cancelled and torn down")
        return INTERRUPTED
    except BrokenPipeError:  # the reader went away (`| head`): nothing more to say to it
        _quiet_stdout()
        return ERROR
    except UsageError as error:
        err.print(f"llm-do: error: {escape(str(error))}")
        return USAGE
    except ProjectError as error:
        _problems(err, error)
        return ERROR
    except Exception as error:
        if args.debug:
            traceback.print_exc()
        err.print(f"llm-do: error: {escape(_one_line(error))}")
        return ERROR


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit does not fail a second time."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


# -- the parser -------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llm-do", description="Run, chat with, check and list agent projects.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_, description=help_)
        sub.add_argument("project", metavar="PROJECT", help="a project directory, its project.toml or a .worker file")
        sub.add_argument("--model", help="the model of workers that name none (provider:name, test, replay:PATH)")
        sub.add_argument("--debug", action="store_true", help="print tracebacks")
        return sub

    for name, help_ in (
        ("run", "Run an entry once and print its output."),
        ("chat", "Talk to an entry, turn by turn."),
    ):
        sub = command(name, help_)
        if name == "run":
            sub.add_argument("prompt", nargs="?", metavar="PROMPT", help="the input (else --input-json or stdin)")
            sub.add_argument("--input-json", metavar="JSON", help="the input as JSON (for an input model)")
            sub.add_argument("--json", action="store_true", help="print one JSON document: output, usage, calls")
            sub.add_argument("--otel", action="store_true", help="export a trace (OTEL_EXPORTER_OTLP_*)")
        sub.add_argument("--entry", help="the entry to run (default: the project's default entry)")
        sub.add_argument("--max-depth", type=int, metavar="N", help="the deepest nesting of calls (LLM_DO_MAX_DEPTH)")
        approvals = sub.add_mutually_exclusive_group()
        approvals.add_argument("--approve-all", action="store_true", help="approve every call that asks")
        approvals.add_argument("--reject-all", action="store_true", help="deny every call that asks")
        sub.add_argument("--record", metavar="PATH", help="record the model's responses to PATH (for replay:PATH)")
        sub.add_argument("-v", "--verbose", action="count", default=0, help="-v: tool calls; -vv: model text too")
        sub.set_defaults(handler=_run if name == "run" else _chat)
    command("check", "Load a project and report every problem.").set_defaults(handler=_check)
    command("list", "List a project's entries, toolsets, models and policies.").set_defaults(handler=_list)
    return parser


# -- commands ---------------------------------------------------------------------


def _check(args: argparse.Namespace, err: Console) -> int:
    project = _load(args, err)
    probes = asyncio.run(probe_and_close(project))  # each MCP server is started once
    if report_failures(err, probes):
        return ERROR
    names = ", ".join(project.entries) or "none"
    servers = f"; {len(probes)} MCP servers started" if probes else ""
    print(f"ok: {len(project.entries)} entries ({names}); default entry: {project.default_entry or 'none'}{servers}")
    return OK


def _list(args: argparse.Namespace, err: Console) -> int:
    project = _load(args, err)
    probes = asyncio.run(probe_and_close(project))
    table = Table(title=f"{project.root.name}: default entry {project.default_entry or 'none'}", title_justify="left")
    for column in ("entry", "kind", "model", "toolsets", "approvals"):
        table.add_column(column)
    for name, entry in project.entries.items():
        agent = isinstance(entry, AgentEntry)
        model = entry.agent.model if isinstance(entry, AgentEntry) else None
        table.add_row(
            name,
            "worker" if name in project.workers else "agent" if agent else "function",
            model_id(model) if isinstance(model, Model | str) else "-",
            ", ".join(entry.toolsets) or "-",
            "\n".join(f"{toolset}: {_policy(project, toolset)}" for toolset in entry.toolsets) or "-",
        )
    out = Console(highlight=False, width=max(100, Console().width))
    out.print(table)
    if probes:
        out.print(servers_table(probes))
    return OK


def _run(args: argparse.Namespace, err: Console) -> int:
    _apply_flags(args)
    input_data = _input(args)
    with _exporting(args.otel), _session(args, err) as (project, board, live, recorder):
        if input_data is None:
            input_data = project.default_input
        if input_data is None:
            raise UsageError(
                "no input: give a PROMPT, --input-json JSON, pipe it on stdin, or set input = ... in project.toml"
            )
        result = asyncio.run(_run_once(project, recorder, args, input_data, live, err))
    models = board.models()
    if args.json:
        print(json.dumps(json_document(result, models), ensure_ascii=False))
        return OK
    err.print(final_tree(result.calls, models))
    err.print(usage_table(result.calls, result.usage))
    print(output_text(result.output))
    return OK


def _chat(args: argparse.Namespace, err: Console) -> int:
    from .chat import chat

    _apply_flags(args)
    with _session(args, err) as (project, _, live, recorder):
        asyncio.run(chat(project, recorder, args.entry, err, live))
    return OK


# -- a run ------------------------------------------------------------------------


async def _run_once(
    project: Project,
    recorder: RecordingModel | None,
    args: argparse.Namespace,
    input_data: Any,
    live: Live | None,
    err: Console,
) -> RunResult:
    async with recorder if recorder is not None else nullcontext(), project:
        with live if live is not None else nullcontext():
            try:
                return await project.run(args.entry, input_data)
            except Exception as error:
                unavailable = _find(error, ApprovalUnavailable)
                if unavailable is not None:
                    request = unavailable.request
                    raise UsageError(
                        f"entry {request.entry!r} wants to call {request.toolset}.{request.tool}, which needs approval "
                        f"({request.reason}), and there is no terminal to ask on; pass --approve-all or --reject-all"
                    ) from error
                report = run_report(error)
                if report is not None and report.calls and not args.json:
                    err.print(final_tree(report.calls, {}))
                raise


@contextmanager
def _session(
    args: argparse.Namespace, err: Console
) -> Iterator[tuple[Project, Board, Live | None, RecordingModel | None]]:
    """The loaded project with its models watched, and the live display (on a terminal only)."""
    board = Board(verbosity=args.verbose, echo=lambda kind, where, text: _echo(err, kind, where, text))
    live = Live(console=err, transient=True, refresh_per_second=8, get_renderable=lambda: live_tree(board))
    use_live = err.is_terminal
    approver = None
    if not (args.approve_all or args.reject_all) and sys.stdin.isatty():
        approver = TerminalApprover(err, pause=(lambda: _paused(live)) if use_live else nullcontext)
    model: Model | str | None = args.model
    if args.record:
        model = _recording_model(args)
    stream = board.stream if args.verbose >= 2 else None
    project = load_project(args.project, model=model, approver=approver, event_stream_handler=stream)
    watch_project(project, board)
    yield project, board, live if use_live else None, model if isinstance(model, RecordingModel) else None


def _recording_model(args: argparse.Namespace) -> RecordingModel:
    settings = LlmDoSettings()
    name = args.model or settings.model
    if name is None:
        raise UsageError("--record needs a model to record: pass --model provider:name (or set LLM_DO_MODEL)")
    root = discover_project(args.project).root
    values = {"openai_base_url": settings.openai_base_url, "openai_api_key": settings.openai_api_key}
    return RecordingModel(resolve_model(name, root=root, settings=values), Path(args.record))


@contextmanager
def _exporting(otel: bool) -> Iterator[None]:
    """With --otel, export the run's trace, flushed when the run is done."""
    if not otel:
        yield
        return
    from .otel import start_exporting

    try:
        stop = start_exporting()
    except ImportError as error:
        raise UsageError(str(error)) from None
    try:
        yield
    finally:
        stop()


@contextmanager
def _paused(live: Live) -> Iterator[None]:
    running = live.is_started
    if running:
        live.stop()
    try:
        yield
    finally:
        if running:
            live.start()


# -- helpers ----------------------------------------------------------------------


def _apply_flags(args: argparse.Namespace) -> None:
    """Flags that are settings become settings of this process, so the project's container reads them."""
    if args.max_depth is not None:
        if args.max_depth < 0:
            raise UsageError(f"--max-depth must be 0 or more, got {args.max_depth}")
        os.environ["LLM_DO_MAX_DEPTH"] = str(args.max_depth)
    if args.approve_all:
        os.environ["LLM_DO_APPROVAL_MODE"] = "approve_all"
    elif args.reject_all:
        os.environ["LLM_DO_APPROVAL_MODE"] = "reject_all"


def _input(args: argparse.Namespace) -> Any:
    if args.prompt is not None and args.input_json is not None:
        raise UsageError("give the input once: a PROMPT or --input-json, not both")
    if args.input_json is not None:
        try:
            return json.loads(args.input_json)
        except json.JSONDecodeError as error:
            raise UsageError(f"--input-json is not valid JSON: {error}") from None
    if args.prompt is not None:
        return args.prompt
    if not sys.stdin.isatty():
        text = sys.stdin.read().strip()
        return text or None
    return None


def _load(args: argparse.Namespace, err: Console) -> Project:
    return load_project(args.project, model=args.model)


def _policy(project: Project, toolset: str) -> str:
    policy = project.runtime.policy(toolset)
    if toolset in project.mcp_servers and policy == ToolPolicy():
        return "from its tools' MCP annotations (readOnlyHint allow, others ask)"
    parts = [f"default {policy.default}"] + [f"{tool} {decision}" for tool, decision in policy.tools.items()]
    if policy.rule is not None:
        parts.append("a rule")
    return ", ".join(parts)


def _echo(err: Console, kind: str, where: str, text: str) -> None:
    arrow = {"call": "[cyan]->[/]", "result": "[green]<-[/]", "text": "[magenta]..[/]"}[kind]
    err.print(f"{escape(where)} {arrow} {escape(text)}")


def _problems(err: Console, error: ProjectError) -> None:
    for problem in error.problems:
        err.print(escape(str(problem)), soft_wrap=True)
    count = len(error.problems)
    err.print(f"llm-do: {count} problem{'s' if count != 1 else ''} found")


def _find(error: BaseException, kind: type[ApprovalUnavailable]) -> ApprovalUnavailable | None:
    seen: set[int] = set()
    stack: list[BaseException] = [error]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, kind):
            return current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        stack.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return None


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
