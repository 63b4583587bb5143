"""`llm-do run` and `llm-do chat`: load the project, run it as a live run, show what happened."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pydantic_ai
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model
from pydantic_ai.usage import RunUsage
from pydantic_core import to_jsonable_python
from rich.console import Console

from .. import ApprovalRequest, ApprovalUnavailable, Approver, Attachment, Entry, LlmDoSettings, Session
from ..files import check_call
from ..models import Recording, RecordingError, RecordingModel
from ..project import (
    DeferredModel,
    ModelNameError,
    Project,
    ProjectSettings,
    discover_project,
    load_project,
    model_problem,
    resolve_model,
)
from ..project.inputs import InputMismatch, checked_input
from ..project.models import ModelServer
from ..project.native import left_out_native_tools
from ..results import CallRecord, RunResult, run_report
from . import signals
from .failures import OK, BadInput, UsageError, classify, problems_json
from .lines import Lines
from .logs import show_server_logs
from .render import console, final_tree, json_calls, live_tree, output_text, shown, usage_json, usage_table
from .watch import Board

if TYPE_CHECKING:
    from rich.live import Live

__all__ = ["chat", "command_line_model", "load_with_model", "run"]

pydantic_ai.BANNER_ENABLED = False  # the command owns its output: no first-run banner (errors are unaffected)


@dataclass
class _Session:
    project: Project
    board: Board
    live: Live | None
    recorder: RecordingModel | None
    approver: Approver
    lines: Lines
    """Stdin's lines, which the chat prompt and the approval questions share."""
    asking: Console
    """Where the questions and the chat's prompt go: stderr, or the terminal when stderr goes elsewhere."""
    model_events: bool
    """Whether the agents' events are streamed: something shows them (the live tree, -v)."""

    async def run(
        self,
        name: str | None,
        input_data: Any,
        *,
        message_history: list[ModelMessage] | None = None,
        attachments: Sequence[Attachment] = (),
        session: Session | None = None,
    ) -> RunResult:
        """Run the entry as a live run whose events the board hears; its result, or its exception."""
        project = self.project
        target = name or project.default_entry
        if target is None:
            return await project.run(name, input_data, session=session)  # the project says what is missing
        self.board.clear()  # a chat's turns share the board: each shows its own calls (their ids start again)
        stream = project.runtime.stream(
            target,
            input_data,
            message_history=message_history,
            attachments=attachments,
            session=session,
            approver=self.approver,
            model_events=self.model_events,
        )
        try:
            async with stream as run:
                async for event in run:
                    self.board.see(event)
                return await run.result()
        finally:
            self.board.flush()  # the text of a line the run ended in (an error, a timeout, Ctrl-C) is shown too


def run(args: argparse.Namespace) -> int:
    """`llm-do run`: one run; the output on stdout, the tree and usage on stderr (or one JSON document)."""
    err = console(stderr=True)
    board = _board(args, err)
    calls: tuple[CallRecord, ...] = ()
    total = RunUsage()
    try:
        _apply_flags(args)
        given = _input(args)
        with _exporting(args.otel), _session(args, err, board) as session:
            project = session.project
            name = args.entry or project.default_entry
            input_data = _checked_input(project, name, given, args)
            attachments = _attachments(project, args.attach) if args.attach else project.attachments_for(name)
            try:
                result = signals.run(_run_once(session, name, input_data, attachments))
            except BaseException as error:
                report = run_report(error)
                if report is not None:
                    calls, total = report.calls, report.usage
                raise
    except BaseException as error:
        if isinstance(error, Exception | KeyboardInterrupt):
            _failed(args, err, board, calls, total, error)
        raise
    if args.json:
        document = {"output": _jsonable(result.output), "usage": usage_json(result.usage)}
        board.read_log(result.log)  # what the live stream did not show (a run not streamed has no responses there)
        document["calls"] = json_calls(result.calls, board)
        print(json.dumps(document, ensure_ascii=False))
        return OK
    err.print(final_tree(result.calls, board), soft_wrap=False)  # wrapped, not cut, on a terminal
    err.print(usage_table(result.calls, result.usage))
    print(output_text(result.output, terminal=sys.stdout.isatty()))
    return OK


def chat(args: argparse.Namespace) -> int:
    """`llm-do chat`: a conversation with one entry, turn by turn."""
    from .chat import chat as converse

    err = console(stderr=True)
    _apply_flags(args)
    with _session(args, err, _board(args, err)) as session:
        _entry(session.project, args.entry or session.project.default_entry)  # before the first turn
        signals.run(
            converse(
                session.project, session.run, session.recorder, args.entry, session.asking, session.live, session.lines
            )
        )
    return OK


# -- a run ------------------------------------------------------------------------


async def _run_once(
    session: _Session, name: str | None, input_data: Any, attachments: tuple[Attachment, ...] = ()
) -> RunResult:
    async with session.recorder if session.recorder is not None else nullcontext(), session.project:
        with session.live if session.live is not None else nullcontext():
            return await session.run(name, input_data, attachments=attachments)


def _failed(
    args: argparse.Namespace,
    err: Console,
    board: Board,
    calls: tuple[CallRecord, ...],
    total: RunUsage,
    error: BaseException,
) -> None:
    """What a failed run leaves: the JSON document (with `--json`), else the tree and usage so far, once a
    model was asked (a run that failed before, say because its MCP servers would not start, spent nothing)."""
    if getattr(args, "json", False):
        failure = classify(error)
        document = {
            "output": None,
            "error": failure.message,
            "kind": failure.kind,
            "exit_code": failure.code,
            "problems": problems_json(error),
            "usage": usage_json(total),
            "calls": json_calls(calls, board),
        }
        print(json.dumps(document, ensure_ascii=False), flush=True)
    elif calls and total.requests:
        err.print(final_tree(calls, board), soft_wrap=False)  # wrapped, not cut, on a terminal
        err.print(usage_table(calls, total))


@contextmanager
def _session(args: argparse.Namespace, err: Console, board: Board) -> Iterator[_Session]:
    """The loaded project, the board its runs' streams tell, and the live display (on a terminal only)."""
    show_server_logs(err, args.verbose)
    live: Live | None = None
    if err.is_terminal:
        from rich.live import Live

        live = Live(console=err, transient=True, refresh_per_second=8, get_renderable=lambda: live_tree(board))
    lines = Lines()
    with _asking(err) as asking:
        approver = None
        if not (args.approve_all or args.reject_all) and sys.stdin.isatty():
            from .approve import TerminalApprover

            shown = live
            approver = TerminalApprover(
                asking, lines=lines, pause=(lambda: _paused(shown)) if shown is not None else nullcontext
            )
        name = command_line_model(args.model, args.project)
        loaded: list[Project] = []  # a model of a project module's prefix is built once the project has loaded
        model: Model | str | None = _recording_model(args, name, loaded) if args.record else name
        project = load_with_model(args.project, model, name, approver=approver)
        loaded.append(project)
        recorder = model if isinstance(model, RecordingModel) else None
        if recorder is not None and isinstance(recorder.wrapped, DeferredModel):
            _check_recorded(recorder.wrapped, project, "--model" if name is not None else "LLM_DO_MODEL")
        shows = live is not None or args.verbose >= 1
        yield _Session(project, board, live, recorder, approver or _no_approver, lines, asking, shows)
        left_out = left_out_native_tools(project.workers, project.entries, ran=True)
        if left_out is not None:  # a test model's run: what it could not run is said, not hidden
            err.print(f"note: {left_out}", markup=False, highlight=False, soft_wrap=True)


@contextmanager
def _asking(err: Console) -> Iterator[Console]:
    """Where questions go: stderr, unless stdin is a terminal and stderr is not (`2>log`): then the terminal
    itself, where the one who answers sees them (the log keeps the rest)."""
    if err.is_terminal or not sys.stdin.isatty():
        yield err
        return
    with open(os.ttyname(sys.stdin.fileno()), "w", encoding="utf-8") as terminal:
        yield Console(file=terminal, highlight=False, soft_wrap=True, emoji=False)


def _no_approver(request: ApprovalRequest) -> Any:
    """No terminal to ask (and neither --approve-all nor --reject-all): the call cannot be approved."""
    raise ApprovalUnavailable(request)


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


def _board(args: argparse.Namespace, err: Console) -> Board:
    return Board(verbosity=args.verbose, echo=lambda kind, where, text: _echo(err, kind, where, text))


def command_line_model(name: str | None, project: str | None = None) -> str | None:
    """The model named on the command line (or by LLM_DO_MODEL), with a `replay:PATH` made absolute
    against the current directory, as every path on a command line. A name pydantic-ai cannot resolve, or
    a file that is missing or is no recording, is a usage error."""
    if name is None:
        environment = os.environ.get("LLM_DO_MODEL")
        if environment is None or not environment.startswith("replay:"):
            return None
        name, where = environment, "LLM_DO_MODEL"
    else:
        where = "--model"
    if not name.startswith("replay:"):
        problem = model_problem(name, servers=_project_servers(project))
        if problem is not None and not (problem.startswith("unknown model provider") and _has_modules(project)):
            raise UsageError(f"{where} {name}: {problem}")
        return name  # a prefix a project module may declare (model_factory) is checked as the project loads
    path = os.path.abspath(name.removeprefix("replay:"))
    if not os.path.isfile(path):
        raise UsageError(f"{where} {name}: the recording {path} does not exist; give the path of a recording file")
    try:
        Recording.load(path)
    except (RecordingError, OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{where} {name}: {error}") from None
    return f"replay:{path}"


def load_with_model(project: str, model: Model | str | None, given: str | None, **options: Any) -> Project:
    """`load_project(project, model=model, **options)`, with a model name `given` on the command line that the
    project cannot build (an unknown prefix) a usage error, as when it is checked before the project loads."""
    try:
        return load_project(project, model=model, **options)
    except ModelNameError as error:
        if given is None or len(error.problems) > 1:
            raise
        raise UsageError(f"--model {given}: {error.problem}") from None


def _has_modules(project: str | None) -> bool:
    """Whether the project has Python modules, which may declare model prefixes of their own."""
    if project is None:
        return False
    try:
        return bool(discover_project(project).module_files)
    except Exception:
        return False


def _project_servers(project: str | None) -> Mapping[str, ModelServer]:
    """The OpenAI-compatible servers the project's `project.toml` names (none when it cannot be read: loading
    the project then says why)."""
    if project is None:
        return {}
    try:
        return discover_project(project).model_servers
    except Exception:
        return {}


def _recording_model(args: argparse.Namespace, given: str | None, loaded: list[Project]) -> RecordingModel:
    """The model to record, wrapped; one of a prefix only a project module can declare (`model_factory`) is built
    from the project in `loaded` when first used (`_check_recorded` checks its prefix once the project loads)."""
    settings = LlmDoSettings()
    name = given or settings.model
    if name is None:
        raise UsageError("--record needs a model to record: pass --model provider:name (or set LLM_DO_MODEL)")
    _check_writable(args.record)
    root = discover_project(args.project).root
    values = ProjectSettings().model_dump()
    servers = _project_servers(args.project)
    try:
        return RecordingModel(resolve_model(name, root=root, settings=values, servers=servers), args.record)
    except ValueError as error:
        if not _has_modules(args.project):
            raise UsageError(f"{'--model' if given else 'LLM_DO_MODEL'} {name}: {error}") from None

    def build() -> Model:
        project = loaded[0]
        return resolve_model(name, root=root, settings=values, servers=servers, factories=project.model_factories)

    return RecordingModel(_PendingModel(name, build), args.record)


class _PendingModel(DeferredModel):
    """A recorded model whose prefix a project module declares, built from the project once it has loaded."""


def _check_recorded(model: DeferredModel, project: Project, where: str) -> None:
    """A recorded model of a prefix the project did not declare after all is a usage error, before any run."""
    if not isinstance(model, _PendingModel):
        return
    name = model.name
    servers = project.layout.model_servers if project.layout is not None else {}
    prefixes = {*servers, *project.model_factories}
    problem = model_problem(name, servers=prefixes)
    if problem is not None:
        raise UsageError(f"{where} {name}: {problem}")


def _check_writable(record: str) -> None:
    """`--record PATH` is written when the run ends: a path that cannot be written is refused before the run
    spends anything on a model."""
    path = os.path.abspath(record)
    folder = os.path.dirname(path)
    if os.path.isdir(path):
        problem = f"{path} is a directory; give the path of a file"
    elif not os.path.isdir(folder):
        problem = f"the directory {folder} does not exist; create it or give another path"
    elif not os.access(folder, os.W_OK | os.X_OK):
        problem = f"the directory {folder} is not writable; give another path"
    else:
        return
    raise UsageError(f"--record {record}: {problem}")


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


# -- input ------------------------------------------------------------------------


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


def _checked_input(project: Project, name: str | None, given: Any, args: argparse.Namespace) -> Any:
    """The input for entry `name`, validated against its input model before anything runs."""
    name, entry = _entry(project, name)
    source = "--input-json" if args.input_json is not None else "the input" if given is not None else None
    input_data = given if given is not None else project.default_input
    if input_data is None:
        raise UsageError(
            "no input: give a PROMPT, --input-json JSON, pipe it on stdin, or set input = ... in project.toml"
        )
    try:
        in_file = f"the input in {project.layout.config_name if project.layout is not None else 'project.toml'}"
        return checked_input(entry, name, input_data, source or in_file)
    except InputMismatch as error:
        raise BadInput(str(error)) from None


def _entry(project: Project, name: str | None) -> tuple[str, Entry]:
    """The entry `name` of the project and its name: a usage error when there is none (`name` is None when the
    project has no default entry)."""
    if name is None:
        raise UsageError(
            f"the project has no default entry: pass --entry NAME (entries: {', '.join(project.entries) or 'none'})"
        )
    entry = project.entries.get(name)
    if entry is None:
        raise UsageError(f"no entry {name!r} in the project; entries: {', '.join(project.entries) or 'none'}")
    return name, entry


def _attachments(project: Project, paths: list[str]) -> tuple[Attachment, ...]:
    """The files given with --attach, relative to the current directory, within the limits of the project's
    settings. The person typing a path is the authority over it: any regular file they can read, also outside
    the project (named by its file name) or through a symbolic link. A file under the project root is named by
    its path there, as a model would name it."""
    config = project.runtime.config
    root = os.path.realpath(config.project_root)
    found: list[Attachment] = []
    for given in paths:
        where = os.path.abspath(given)
        real = os.path.join(os.path.realpath(os.path.dirname(where)), os.path.basename(where))
        inside = os.path.commonpath([root, real]) == root and real != root
        if inside and not os.path.islink(real):
            found.append(Attachment.read(root, os.path.relpath(real, root), settings=config.attachments))
        else:
            name = os.path.relpath(real, root) if inside else None
            found.append(Attachment.from_path(where, name=name, settings=config.attachments))
    check_call(found, config.attachments)
    return tuple(found)


def _jsonable(value: Any) -> Any:
    return to_jsonable_python(value, fallback=repr)


def _echo(err: Console, kind: str, where: str, text: str) -> None:
    arrows = {"call": "[cyan]->[/]", "result": "[green]<-[/]", "text": "[magenta]..[/]", "warning": "[yellow]!![/]"}
    arrow = arrows[kind]
    err.print(f"{shown(where)} {arrow} {shown(text)}")
