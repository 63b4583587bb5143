"""Attachments: real files reach the model with their type and exact bytes, agents hand them to each other,
approvers see their names, sizes and types, policies decide calls that carry them, limits hold."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import BinaryContent, ModelRequest, TextContent, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.profiles import ModelProfile
from rich.console import Console

from llm_do import (
    AgentEntry,
    Approval,
    ApprovalRequest,
    Attachment,
    AttachmentError,
    AttachmentSettings,
    CallScope,
    Runtime,
    RuntimeConfig,
    ToolPolicy,
    entry,
)
from llm_do.cli.approve import TerminalApprover
from llm_do.models import AttachmentMismatch, Recording, RecordingModel, ReplayModel
from llm_do.testing import ScriptedModel, ToolCall, Turn, tool_call

from ..attachment_files import CSV, GIF, JPEG, MP3_FRAME, MP3_ID3, TEXT, WEBP, pdf, png, wav


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "chart.png").write_bytes(png())
    (project / "data" / "report.pdf").write_bytes(pdf())
    (project / "data" / "notes.txt").write_text(TEXT, encoding="utf-8")
    (project / "data" / "sales.csv").write_text(CSV)
    return project


def received(turn: Turn) -> list[Any]:
    """The items of the user prompts the model was sent, in order."""
    items: list[Any] = []
    for message in turn.messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart):
                    items.extend([part.content] if isinstance(part.content, str) else part.content)
    return items


def files_in(items: list[Any]) -> dict[str, tuple[str, bytes]]:
    """name -> (media type, exact bytes), from the attachments' labels and contents."""
    found: dict[str, tuple[str, bytes]] = {}
    for index, item in enumerate(items):
        if isinstance(item, TextContent) and item.metadata and "llm_do.attachment" in item.metadata:
            info = item.metadata["llm_do.attachment"]
            if info["media_type"].startswith(("text/", "application/json")):
                head, _, rest = item.content.partition("\n")
                body = rest.rsplit("[end of attachment", 1)[0]
                if len(body.encode()) == info["size"] + 1:  # a line break was added before the end line
                    body = body[:-1]
                assert head == f"[attachment {info['name']!r}: {info['media_type']}, {info['size']:,} bytes]"
                found[info["name"]] = (info["media_type"], body.encode())
            else:
                binary = items[index + 1]
                assert isinstance(binary, BinaryContent)
                assert binary.media_type == info["media_type"]
                found[info["name"]] = (binary.media_type, binary.data)
    return found


class Approver:
    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> Approval:
        self.asked.append(request)
        return Approval(self.answers.pop(0) if self.answers else "approve")  # type: ignore[arg-type]


async def test_real_files_reach_the_model_with_their_media_type_and_exact_bytes(root: Path) -> None:
    seen: dict[str, tuple[str, bytes]] = {}

    def look(turn: Turn) -> str:
        items = received(turn)
        assert items[0] == "Review these."
        seen.update(files_in(items))
        return "reviewed"

    model = ScriptedModel(look)
    reviewer = AgentEntry(Agent(model), name="reviewer")
    names = ["data/chart.png", "data/report.pdf", "data/notes.txt", "data/sales.csv"]
    attachments = [Attachment.read(root, name) for name in names]
    async with Runtime(None, entries=[reviewer]) as runtime:
        result = await runtime.run("reviewer", "Review these.", attachments=attachments)
    assert result.output == "reviewed"
    assert seen == {
        "data/chart.png": ("image/png", (root / "data/chart.png").read_bytes()),
        "data/report.pdf": ("application/pdf", (root / "data/report.pdf").read_bytes()),
        "data/notes.txt": ("text/plain", TEXT.encode("utf-8")),
        "data/sales.csv": ("text/csv", CSV.encode()),
    }
    [call] = result.calls
    assert [(info.name, info.media_type, info.size) for info in call.attachments] == [
        (name, seen[name][0], len(seen[name][1])) for name in names
    ]


@pytest.mark.parametrize(
    ("name", "data", "media_type"),
    [
        ("chart", png(), "image/png"),
        ("photo.png", JPEG, "image/jpeg"),  # the content decides, not a misleading name
        ("anim.bin", GIF, "image/gif"),
        ("image", WEBP, "image/webp"),
        ("doc", pdf(), "application/pdf"),
        ("sound", wav(), "audio/wav"),
        ("song", MP3_FRAME, "audio/mpeg"),
        ("tagged.mp3", MP3_ID3, "audio/mpeg"),
        ("readme", b"plain words\n", "text/plain"),
        ("chart.png", b"not a picture at all\n", "text/plain"),
        ("notes.md", b"# Title\n\n- item\n", "text/markdown"),
        ("table.csv", CSV.encode(), "text/csv"),
        ("data.json", b'{"a": 1}', "application/json"),
        ("payload", b' [1, 2, {"b": null}]', "application/json"),  # no suffix: JSON by its content
        ("almost", b"{not json", "text/plain"),
        ("deep", b"[" * 50_000 + b"]" * 50_000, "text/plain"),  # nested deeper than a parser goes: text
    ],
)
def test_the_media_type_comes_from_the_content(name: str, data: bytes, media_type: str) -> None:
    assert Attachment.from_bytes(name, data).media_type == media_type


@pytest.mark.parametrize(
    ("name", "data", "declared", "message"),
    [
        ("blob", b"\x00\x01\x02\xfe binary", None, "its type is unknown"),
        ("latin1.txt", "café".encode("latin-1"), None, "its type is unknown"),
        ("zip", b"PK\x03\x04rest", None, "its type is unknown"),
        ("chart", png(), "image/jpeg", "is declared image/jpeg, but its content is image/png"),
        ("notes", b"words", "image/png", "is declared image/png, but its content is text/plain"),
    ],
)
def test_unknown_or_misdeclared_types_are_refused(name: str, data: bytes, declared: str | None, message: str) -> None:
    with pytest.raises(AttachmentError, match=message):
        Attachment.from_bytes(name, data, declared)


def test_a_declared_kind_of_text_is_kept() -> None:
    assert Attachment.from_bytes("notes", b"# Title\n", "text/markdown").media_type == "text/markdown"


def test_limits_per_file_per_text_and_per_call(root: Path) -> None:
    small = AttachmentSettings(max_file_bytes=100, max_text_bytes=10, max_call_bytes=150, max_files=2)
    exact = Attachment.from_bytes("exact.png", png()[:8] + b"\x00" * 92, settings=small)
    assert exact.size == 100
    with pytest.raises(AttachmentError, match=r"'over.png' is 101 bytes, more than the 100-byte limit"):
        Attachment.from_bytes("over.png", png()[:8] + b"\x00" * 93, settings=small)
    with pytest.raises(AttachmentError, match=r"text file 'long.txt' is 11 bytes.*MAX_TEXT_BYTES"):
        Attachment.from_bytes("long.txt", b"x" * 11, settings=small)
    (root / "over.bin").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 93)
    with pytest.raises(AttachmentError, match=r"'over.bin' is 101 bytes.*LLM_DO_ATTACHMENTS__MAX_FILE_BYTES"):
        Attachment.read(root, "over.bin", settings=small)


async def test_a_run_refuses_attachments_over_the_call_limits_before_it_starts(root: Path) -> None:
    ran: list[str] = []

    @entry
    async def take(scope: CallScope, text: str) -> str:
        ran.append(text)
        return text

    pictures = [Attachment.from_bytes(f"{n}.png", png(2 + n, 2)) for n in range(3)]
    total = sum(picture.size for picture in pictures)
    config = RuntimeConfig(attachments=AttachmentSettings(max_call_bytes=total - 1, max_files=3))
    async with Runtime(None, entries=[take], config=config) as runtime:
        with pytest.raises(AttachmentError, match=f"{total:,} bytes together, more than the {total - 1:,}-byte"):
            await runtime.run("take", "go", attachments=pictures)
        with pytest.raises(AttachmentError, match="4 files is more than the 3 one call may carry"):
            await runtime.run("take", "go", attachments=[*pictures, Attachment.from_bytes("x.txt", b"x")])
        with pytest.raises(AttachmentError, match=r"'0\.png' is attached twice"):
            await runtime.run("take", "go", attachments=[pictures[0], pictures[0]])
    notes = Attachment.from_bytes("notes.txt", b"x" * 11)  # within the default limits it was made with
    async with Runtime(
        None, entries=[take], config=RuntimeConfig(attachments=AttachmentSettings(max_text_bytes=10))
    ) as runtime:
        with pytest.raises(AttachmentError, match=r"text file 'notes.txt' is 11 bytes, more than the 10-byte limit"):
            await runtime.run("take", "go", attachments=[notes])  # the runtime's own limits apply
    assert ran == []


def parent_and_child(
    root: Path,
    parent_steps: list[Any],
    *,
    child_model: Any = None,
    policies: dict[str, ToolPolicy] | None = None,
    approver: Any = None,
    mode: str = "prompt",
    tracer_provider: TracerProvider | None = None,
    schema_in: type[BaseModel] | None = None,
) -> tuple[Runtime, list[dict[str, tuple[str, bytes]]]]:
    got: list[dict[str, tuple[str, bytes]]] = []

    def look(turn: Turn) -> str:
        got.append(files_in(received(turn)))
        return f"child saw {sorted(got[-1])}"

    child = AgentEntry(Agent(child_model or ScriptedModel(look, look, look)), name="reviewer", schema_in=schema_in)
    parent = AgentEntry(Agent(ScriptedModel(*parent_steps)), name="coordinator", toolsets=["reviewer"])
    runtime = Runtime(
        None,
        entries=[parent, child],
        config=RuntimeConfig(project_root=root, approval_mode=mode),  # type: ignore[arg-type]
        policies=policies,
        approver=approver,
        tracer_provider=tracer_provider,
    )
    return runtime, got


def returns_of(turn: Turn) -> str:
    """Every tool result of the conversation so far, joined by ' | '."""
    return " | ".join(
        str(part.content)
        for message in turn.messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    )


async def test_a_parent_hands_two_files_to_a_child_and_the_approver_sees_them(root: Path) -> None:
    approver = Approver("approve")
    steps = [
        tool_call("reviewer", input="Check the chart", attachments=["data/chart.png", "data/sales.csv"]),
        returns_of,
    ]
    runtime, got = parent_and_child(
        root, steps, policies={"reviewer": ToolPolicy(attachments="ask")}, approver=approver
    )
    async with runtime:
        result = await runtime.run("coordinator", "go")
    assert result.output == "child saw ['data/chart.png', 'data/sales.csv']"
    assert got == [
        {
            "data/chart.png": ("image/png", (root / "data/chart.png").read_bytes()),
            "data/sales.csv": ("text/csv", CSV.encode()),
        }
    ]
    [request] = approver.asked
    assert [(info.name, info.media_type, info.size) for info in request.attachments] == [
        ("data/chart.png", "image/png", len(png())),
        ("data/sales.csv", "text/csv", len(CSV)),
    ]
    assert "it hands over 'data/chart.png' (image/png, " in request.description
    assert f"'data/sales.csv' (text/csv, {len(CSV)} bytes)" in request.description
    assert "calls that carry attachments are 'ask'" in request.reason
    assert not any(isinstance(value, bytes) for info in request.attachments for value in vars_of(info))
    assert [call.entry for call in result.calls if call.attachments] == ["reviewer"]


def vars_of(info: Any) -> list[Any]:
    return [getattr(info, name) for name in info.__slots__]


async def test_a_deny_policy_for_attachments_blocks_the_call_and_the_run_goes_on(root: Path) -> None:
    steps = [
        tool_call("reviewer", input="Check", attachments=["data/chart.png"]),
        tool_call("reviewer", input="Just a question"),  # carries none: allowed
        returns_of,
    ]
    runtime, got = parent_and_child(root, steps, policies={"reviewer": ToolPolicy(attachments="deny")})
    async with runtime:
        result = await runtime.run("coordinator", "go")
    denial, answer = result.output.split(" | ")
    assert denial.startswith("The call to 'reviewer' was not run: denied by policy (toolset 'reviewer' policy: ")
    assert "calls that carry attachments are 'deny'" in denial
    assert answer == "child saw []"
    assert got == [{}]  # only the call without attachments reached the child
    assert [call.outcome for call in result.calls] == ["ok", "ok"]


async def test_a_denied_approval_sends_nothing(root: Path) -> None:
    approver = Approver("deny")
    steps = [tool_call("reviewer", input="Check", attachments=["data/report.pdf"]), returns_of]
    runtime, got = parent_and_child(
        root, steps, policies={"reviewer": ToolPolicy(attachments="ask")}, approver=approver
    )
    async with runtime:
        result = await runtime.run("coordinator", "go")
    assert "the approver denied it" in result.output
    assert got == []
    assert [request.attachments[0].name for request in approver.asked] == ["data/report.pdf"]


async def test_a_call_naming_files_stops_reading_once_they_cannot_fit(root: Path) -> None:
    """Names are read one by one: once the files read are over the call's limit, or one is named twice, the call is
    refused before the next one is read (here a missing file, which would otherwise be the error)."""
    for n in range(3):
        (root / f"{n}.png").write_bytes(png(40 + n, 40))
    sizes = [(root / f"{n}.png").stat().st_size for n in range(3)]
    refusals: list[str] = []

    @entry(toolsets=["reviewer"])
    async def boss(scope: CallScope, names: list[str]) -> str:
        try:
            await scope.call_agent("reviewer", "look", attachments=names)
        except AttachmentError as error:
            refusals.append(str(error))
        return "done"

    reviewer = AgentEntry(Agent(ScriptedModel()), name="reviewer")
    config = RuntimeConfig(project_root=root, attachments=AttachmentSettings(max_call_bytes=sizes[0] + sizes[1] - 1))
    async with Runtime(None, entries=[boss, reviewer], config=config) as runtime:
        for names in (["0.png", "1.png", "2.png", "missing.png"], ["0.png", "./0.png", "missing.png"]):
            await runtime.run("boss", names)
    assert len(refusals) == 2
    assert f"{sizes[0] + sizes[1]:,} bytes together, more than the" in refusals[0]
    assert "'0.png' is attached twice" in refusals[1]


class Review(BaseModel):
    question: str


async def test_an_entry_with_an_input_model_is_gated_for_the_files_it_is_handed(root: Path) -> None:
    """Its tool takes one model (the input's fields beside `attachments`): the policy and the approver still see
    the files, and what the approver was shown is what is sent."""
    call = tool_call("reviewer", question="Check", attachments=["data/chart.png"])
    denying, denied_got = parent_and_child(
        root, [call, returns_of], policies={"reviewer": ToolPolicy(attachments="deny")}, schema_in=Review
    )
    async with denying:
        denied = await denying.run("coordinator", "go")
    assert "calls that carry attachments are 'deny'" in denied.output
    assert denied_got == []

    chart = root / "data" / "chart.png"
    shown = chart.read_bytes()
    approver = Approver("approve")

    def swap_then_approve(request: ApprovalRequest) -> Approval:
        chart.write_bytes(png(9, 9, (0, 0, 255)))  # the file changes while the approver looks
        return approver(request)

    asking, got = parent_and_child(
        root,
        [call, returns_of],
        policies={"reviewer": ToolPolicy(attachments="ask")},
        approver=swap_then_approve,
        schema_in=Review,
    )
    async with asking:
        await asking.run("coordinator", "go")
    assert [[(info.name, info.size) for info in request.attachments] for request in approver.asked] == [
        [("data/chart.png", len(shown))]
    ]
    assert got == [{"data/chart.png": ("image/png", shown)}]


async def test_what_the_approver_was_shown_is_what_is_sent_even_if_the_file_changes_meanwhile(root: Path) -> None:
    chart = root / "data" / "chart.png"
    shown = chart.read_bytes()

    def approve_then_swap(request: ApprovalRequest) -> Approval:
        chart.write_bytes(png(9, 9, (0, 0, 255)))  # the file changes while the approver looks
        return Approval.approve()

    steps = [tool_call("reviewer", input="Check", attachments=["data/chart.png"]), returns_of]
    child_files: list[dict[str, tuple[str, bytes]]] = []

    def look(turn: Turn) -> str:
        child_files.append(files_in(received(turn)))
        return "ok"

    runtime, _ = parent_and_child(
        root,
        steps,
        child_model=ScriptedModel(look),
        policies={"reviewer": ToolPolicy(attachments="ask")},
        approver=approve_then_swap,
    )
    async with runtime:
        await runtime.run("coordinator", "go")
    assert child_files == [{"data/chart.png": ("image/png", shown)}]


async def test_approval_for_the_session_covers_the_contents_it_saw(root: Path) -> None:
    approver = Approver("approve_for_session", "approve")
    policies = {"reviewer": ToolPolicy(attachments="ask")}
    call = tool_call("reviewer", input="Check", attachments=["data/sales.csv"])

    def change_then_call(turn: Turn) -> ToolCall:
        (root / "data" / "sales.csv").write_text(CSV + "west,Q3,10\n")
        return call

    # first call: asked; the same file again: not asked; the file changed: asked again
    runtime, got = parent_and_child(
        root, [call, call, change_then_call, returns_of], policies=policies, approver=approver
    )
    async with runtime:
        await runtime.run("coordinator", "go")
    assert len(approver.asked) == 2
    assert approver.asked[0].attachments[0].sha256 != approver.asked[1].attachments[0].sha256
    assert len(got) == 3


async def test_a_parent_passes_on_by_name_an_attachment_it_received(root: Path) -> None:
    memo = Attachment.from_bytes("memo.md", b"# Memo\nShip on Friday.\n")  # held in memory, not on disk
    steps = [tool_call("reviewer", input="Read the memo", attachments=["memo.md", "data/notes.txt"]), returns_of]
    runtime, got = parent_and_child(root, steps, mode="approve_all")
    async with runtime:
        result = await runtime.run("coordinator", "go", attachments=[memo])
    assert got == [
        {"memo.md": ("text/markdown", b"# Memo\nShip on Friday.\n"), "data/notes.txt": ("text/plain", TEXT.encode())}
    ]
    assert [(call.entry, [info.name for info in call.attachments]) for call in result.calls] == [
        ("coordinator", ["memo.md"]),
        ("reviewer", ["memo.md", "data/notes.txt"]),
    ]


async def test_an_attachment_received_is_passed_on_under_any_spelling_of_its_path(root: Path) -> None:
    """The model writes `./data/notes.txt` for the `data/notes.txt` it was handed: it passes on what it received,
    not the file of that name on disk, which differs."""
    handed = Attachment.from_bytes("data/notes.txt", b"what the coordinator was handed\n")
    steps = [tool_call("reviewer", input="Read", attachments=["./data//notes.txt"]), returns_of]
    runtime, got = parent_and_child(root, steps, mode="approve_all")
    async with runtime:
        await runtime.run("coordinator", "go", attachments=[handed])
    assert got == [{"data/notes.txt": ("text/plain", handed.data)}]


async def test_a_missing_file_is_a_tool_failure_the_model_reads(root: Path) -> None:
    steps = [tool_call("reviewer", input="Check", attachments=["data/missing.png"]), returns_of]
    runtime, got = parent_and_child(root, steps, mode="approve_all")
    async with runtime:
        result = await runtime.run("coordinator", "go")
    assert result.output == "attach: 'data/missing.png' does not exist; list_dir or glob show what does"
    assert got == []
    failed = [
        part
        for message in result.messages
        for part in message.parts
        if isinstance(part, ToolReturnPart) and part.tool_name == "reviewer"
    ]
    assert [part.outcome for part in failed] == ["failed"]


async def test_a_type_the_child_model_cannot_take_is_refused_naming_both(root: Path) -> None:
    blind = FunctionModel(
        lambda messages, info: None, model_name="text-only", profile=ModelProfile(supports_image_input=False)
    )  # type: ignore[arg-type,return-value]
    steps = [tool_call("reviewer", input="Check", attachments=["data/chart.png"]), returns_of]
    runtime, _ = parent_and_child(root, steps, child_model=blind, mode="approve_all")
    async with runtime:
        result = await runtime.run("coordinator", "go")
    assert result.output == (
        "attachment 'data/chart.png' is image/png, which model function:text-only cannot take (its profile says "
        "it reads no images); attach another type, or use a model that reads it"
    )


async def test_a_pdf_is_refused_to_a_model_that_reads_no_pdf() -> None:
    model = FunctionModel(
        lambda messages, info: None,  # type: ignore[arg-type,return-value]
        model_name="no-pdf",
        profile=ModelProfile(supported_document_media_types=frozenset({"text/plain"})),
    )
    reader = AgentEntry(Agent(model), name="reader")
    async with Runtime(None, entries=[reader]) as runtime:
        with pytest.raises(AttachmentError, match=r"which model function:no-pdf cannot take .* no PDF documents"):
            await runtime.run("reader", "read", attachments=[Attachment.from_bytes("r.pdf", pdf())])


async def test_a_function_entry_passes_attachments_to_an_agent(root: Path) -> None:
    approver = Approver("approve")
    got: list[dict[str, tuple[str, bytes]]] = []

    def look(turn: Turn) -> str:
        got.append(files_in(received(turn)))
        return "seen"

    @entry(toolsets=["reviewer"])
    async def desk(scope: CallScope, text: str) -> Any:
        return await scope.call_agent("reviewer", text, attachments=["data/chart.png", scope.attachments[0]])

    reviewer = AgentEntry(Agent(ScriptedModel(look)), name="reviewer")
    extra = Attachment.from_bytes("extra.json", b'{"k": 1}')
    async with Runtime(
        None,
        entries=[desk, reviewer],
        config=RuntimeConfig(project_root=root),
        policies={"reviewer": ToolPolicy(attachments="ask")},
        approver=approver,
    ) as runtime:
        result = await runtime.run("desk", "look", attachments=[extra])
    assert result.output == "seen"
    assert got == [{"data/chart.png": ("image/png", png()), "extra.json": ("application/json", b'{"k": 1}')}]
    assert dict(approver.asked[0].args) == {"input": "look", "attachments": ["data/chart.png", "extra.json"]}


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    yield InMemorySpanExporter()


async def test_call_spans_carry_the_attachments_names_sizes_and_types(
    root: Path, exporter: InMemorySpanExporter
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    steps = [tool_call("reviewer", input="Check", attachments=["data/chart.png", "data/sales.csv"]), returns_of]
    runtime, _ = parent_and_child(root, steps, mode="approve_all", tracer_provider=provider)
    async with runtime:
        await runtime.run("coordinator", "go")
    spans = {span.name: span for span in exporter.get_finished_spans()}
    attributes = spans["llm_do.call reviewer"].attributes or {}
    assert tuple(attributes["llm_do.attachments.names"]) == ("data/chart.png", "data/sales.csv")  # type: ignore[arg-type]
    assert tuple(attributes["llm_do.attachments.media_types"]) == ("image/png", "text/csv")  # type: ignore[arg-type]
    assert tuple(attributes["llm_do.attachments.sizes"]) == (len(png()), len(CSV))  # type: ignore[arg-type]
    assert "llm_do.attachments.names" not in (spans["llm_do.call coordinator"].attributes or {})


async def test_a_recording_keeps_digests_not_bytes_and_replay_refuses_a_changed_file(
    root: Path, tmp_path: Path
) -> None:
    path = tmp_path / "recording.json"
    steps = [tool_call("reviewer", input="Check", attachments=["data/chart.png", "data/sales.csv"]), returns_of]
    recorder = RecordingModel(ScriptedModel(*steps), path)
    child_recorder = RecordingModel(ScriptedModel(lambda turn: f"saw {len(files_in(received(turn)))} files"), path)
    reviewer = AgentEntry(Agent(child_recorder), name="reviewer")
    coordinator = AgentEntry(Agent(recorder), name="coordinator", toolsets=["reviewer"])
    config = RuntimeConfig(project_root=root, approval_mode="approve_all")
    async with child_recorder, recorder, Runtime(None, entries=[coordinator, reviewer], config=config) as runtime:
        recorded = await runtime.run("coordinator", "go")
    assert recorded.output == "saw 2 files"
    text = path.read_text()
    chart = (root / "data/chart.png").read_bytes()
    assert base64.b64encode(chart).decode() not in text and "north,Q3" not in text  # no bytes, no text
    saved = [item for item in json.loads(text)["responses"] if item.get("attachments")]
    assert [info["name"] for info in saved[0]["attachments"]] == ["data/chart.png", "data/sales.csv"]
    assert saved[0]["attachments"][0] == {
        "name": "data/chart.png",
        "media_type": "image/png",
        "size": len(chart),
        "sha256": hashlib.sha256(chart).hexdigest(),
    }

    def replayed() -> Runtime:
        replay = ReplayModel.from_file(path)
        entries = [
            AgentEntry(Agent(replay), name="coordinator", toolsets=["reviewer"]),
            AgentEntry(Agent(replay), name="reviewer"),
        ]
        return Runtime(None, entries=entries, config=config)

    async with replayed() as runtime:
        assert (await runtime.run("coordinator", "go")).output == "saw 2 files"
    (root / "data/chart.png").write_bytes(png(5, 5))
    async with replayed() as runtime:
        with pytest.raises(AttachmentMismatch) as mismatch:
            await runtime.run("coordinator", "go")
    message = str(mismatch.value)
    assert "the attachments of entry chain coordinator > reviewer, request #0" in message
    assert f"'data/chart.png' was {len(chart):,} bytes with sha256 {hashlib.sha256(chart).hexdigest()[:12]}" in message
    assert f"now {len(png(5, 5)):,} bytes" in message


async def test_a_script_step_with_attachments_answers_only_those_files(root: Path) -> None:
    memo = Attachment.from_bytes("memo.md", b"# Memo\n")
    recording = Recording.from_script(["read the memo"], entry="reader", attachments=[memo.info])
    reader = AgentEntry(Agent(ReplayModel(recording)), name="reader")
    async with Runtime(None, entries=[reader]) as runtime:
        assert (await runtime.run("reader", "go", attachments=[memo])).output == "read the memo"
        with pytest.raises(AttachmentMismatch, match=r"'memo\.md' was 7 bytes with sha256 .*, now 11 bytes"):
            await runtime.run("reader", "go", attachments=[Attachment.from_bytes("memo.md", b"# Changed\n\n")])


def test_a_file_is_named_by_its_path_in_normal_form(root: Path) -> None:
    assert Attachment.read(root, "./data//chart.png").name == "data/chart.png"


async def test_a_scripted_turn_reads_the_prompt_of_a_call_with_attachments() -> None:
    model = ScriptedModel(lambda turn: f"prompt: {turn.prompt}")
    reader = AgentEntry(Agent(model), name="reader")
    async with Runtime(None, entries=[reader]) as runtime:
        result = await runtime.run("reader", "Read this.", attachments=[Attachment.from_bytes("a.txt", b"words")])
    assert result.output == "prompt: Read this."


async def test_a_settings_override_denies_calls_carrying_attachments(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLM_DO_APPROVAL_POLICIES__REVIEWER__ATTACHMENTS", "deny")
    monkeypatch.setenv("LLM_DO_PROJECT_ROOT", str(root))
    steps = [tool_call("reviewer", input="Check", attachments=["data/sales.csv"]), returns_of]
    got: list[Any] = []
    child = AgentEntry(Agent(ScriptedModel(lambda turn: got.append(turn) or "seen")), name="reviewer")
    parent = AgentEntry(Agent(ScriptedModel(*steps)), name="coordinator", toolsets=["reviewer"])
    async with Runtime(None, entries=[parent, child], config=RuntimeConfig.from_settings()) as runtime:
        assert runtime.policy("reviewer").attachments == "deny"
        result = await runtime.run("coordinator", "go")
    assert "calls that carry attachments are 'deny'" in result.output
    assert got == []


async def test_the_terminal_prompt_lists_the_files_a_call_hands_over(root: Path) -> None:
    console = Console(file=io.StringIO(), width=200, highlight=False)
    approver = TerminalApprover(console, stdin=io.StringIO("a\n"))
    steps = [tool_call("reviewer", input="Check", attachments=["data/chart.png", "data/sales.csv"]), returns_of]
    runtime, got = parent_and_child(
        root, steps, policies={"reviewer": ToolPolicy(attachments="ask")}, approver=approver
    )
    async with runtime:
        await runtime.run("coordinator", "go")
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "files it hands over (name, type, size):" in shown
    assert f"'data/chart.png' (image/png, {len(png())} bytes)" in shown
    assert f"'data/sales.csv' (text/csv, {len(CSV)} bytes)" in shown
    assert "north,Q3" not in shown  # never the contents
    assert len(got) == 1
