"""Attachments: files handed to an agent as content, confined to a root, limited in size, typed by content.

An `Attachment` is a file's name, bytes, media type and SHA-256 digest, read once: what an approver
was shown is what the model is sent. Files are read through the `filesystem` toolset's confinement
(`ConfinedRoot`: no `..`, no absolute path, no symbolic link, opened one name at a time), and only
regular files with a single link are read, up to the limits of `AttachmentSettings`. The media type
comes from the content (magic numbers for PNG, JPEG, GIF, WebP, PDF, WAV and MP3; UTF-8 text
otherwise), the name only telling Markdown, CSV and JSON text from plain text. Text is sent to the
model as text, everything else as pydantic-ai `BinaryContent`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import BinaryContent, TextContent, UserContent
from pydantic_ai.models import Model

from ..errors import LlmDoError
from ._limits import AttachmentSettings

TAKES_ATTACHMENTS = "llm_do.takes_attachments"
"""Set in a tool's metadata when it takes names of files to hand over (an entry's tool): True for its `attachments`
argument, or the name of the one argument (a model) whose `attachments` field holds them (see `names_in`)."""
METADATA_KEY = "llm_do.attachment"
"""The key of an attachment's description in the metadata of the `TextContent` that introduces it."""

TEXT_TYPES = ("text/plain", "text/markdown", "text/csv", "application/json")

_BY_SUFFIX = {".md": "text/markdown", ".markdown": "text/markdown", ".csv": "text/csv", ".json": "application/json"}
_KNOWN = "PNG, JPEG, GIF, WebP, PDF, WAV, MP3 and UTF-8 text (plain, Markdown, CSV, JSON)"
_SETTINGS = "LLM_DO_ATTACHMENTS__"


class AttachmentError(LlmDoError, ToolFailed):
    """A file that cannot be attached: outside the root, not a regular file, too big, of an unknown type,
    unreadable, or of a type the model cannot take. A model that passed it reads the message as the
    tool's failure; the `llm-do` command exits with code 2."""


@dataclass(frozen=True, slots=True)
class AttachmentInfo:
    """What approvers, call records, spans and recordings see of an attachment: never its bytes."""

    name: str
    media_type: str
    size: int
    sha256: str

    def describe(self) -> str:
        """`'chart.png' (image/png, 12,345 bytes)`."""
        return f"{self.name!r} ({self.media_type}, {self.size:,} bytes)"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "media_type": self.media_type, "size": self.size, "sha256": self.sha256}


@dataclass(frozen=True, slots=True, repr=False)
class Attachment:
    """A file handed to an agent: its name, bytes and media type. Build it with `read` or `from_bytes`."""

    name: str
    """The path under the root it was read from, or the name it was given."""
    data: bytes
    media_type: str
    sha256: str
    """The hex SHA-256 digest of `data`."""

    @classmethod
    def read(cls, root: str | os.PathLike[str], path: str, *, settings: AttachmentSettings | None = None) -> Attachment:
        """Read the file `path` (relative to `root`, confined to it like the `filesystem` toolset's paths): a
        regular file with one link, within the limits (blocking: run it in a thread). The attachment is named
        by its path in normal form (`./a//b.txt` is `a/b.txt`)."""
        from ._confine import ConfinedRoot

        limits = settings or AttachmentSettings()
        confined = ConfinedRoot(root)
        _check_name(path)
        try:
            canonical = "/".join(confined.parts(path, tool="attach"))
            with confined.parent(path, tool="attach") as (dir_fd, name):
                if name is None:
                    raise AttachmentError(f"attach: {path!r} is the root directory, not a file")
                fd = confined.open_entry(dir_fd, name, os.O_RDONLY | os.O_NONBLOCK, tool="attach", path=path)
        except AttachmentError:
            raise
        except ToolFailed as refused:  # the confinement's refusals, as one error type
            raise AttachmentError(refused.message) from None
        data = _read_open(fd, path, path, limits, confined=True)
        return cls._made(canonical, data, detect_media_type(canonical, data), limits)

    @classmethod
    def from_path(
        cls, path: str | os.PathLike[str], *, name: str | None = None, settings: AttachmentSettings | None = None
    ) -> Attachment:
        """Read a file a person names (a path typed on the command line), wherever it is: any regular file they
        can read, symbolic links followed, within the limits and typed by its content like any attachment. It is
        named `name`, by default the file's own name. Never use it for a name a model gives: those are read with
        `read`, confined to a root (blocking: run it in a thread)."""
        limits = settings or AttachmentSettings()
        shown = os.fspath(path)
        name = name if name is not None else os.path.basename(shown.rstrip("/"))
        _check_name(name)
        try:
            fd = os.open(shown, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as error:
            reason = "does not exist" if isinstance(error, FileNotFoundError) else error.strerror or "cannot be read"
            raise AttachmentError(f"attach: {shown!r} {reason}; give the path of a file you can read") from None
        data = _read_open(fd, shown, name, limits, confined=False)
        return cls._made(name, data, detect_media_type(name, data), limits)

    @classmethod
    def from_bytes(
        cls, name: str, data: bytes, media_type: str | None = None, *, settings: AttachmentSettings | None = None
    ) -> Attachment:
        """An attachment of bytes held in memory. Its media type is detected from the content; a declared
        `media_type` must agree with it."""
        limits = settings or AttachmentSettings()
        _check_name(name)
        if not isinstance(data, bytes | bytearray | memoryview):
            raise AttachmentError(f"attachment {name!r}: its data must be bytes, got {type(data).__name__}")
        data = bytes(data)
        _check_size(name, len(data), limits.max_file_bytes, "max_file_bytes")
        detected = detect_media_type(name, data)
        if media_type is not None and media_type != detected:
            if not (media_type in TEXT_TYPES and detected in TEXT_TYPES):
                raise AttachmentError(
                    f"attachment {name!r} is declared {media_type}, but its content is {detected}; "
                    "declare the type it has, or leave media_type out to have it detected"
                )
            detected = media_type  # text is text: the declared kind of text wins
        return cls._made(name, data, detected, limits)

    @classmethod
    def _made(cls, name: str, data: bytes, media_type: str, limits: AttachmentSettings) -> Attachment:
        if media_type in TEXT_TYPES:
            _check_size(name, len(data), limits.max_text_bytes, "max_text_bytes", "text file ")
        return cls(name, data, media_type, hashlib.sha256(data).hexdigest())

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def is_text(self) -> bool:
        """Whether it goes to the model as text (else as `BinaryContent`)."""
        return self.media_type in TEXT_TYPES

    @property
    def info(self) -> AttachmentInfo:
        return AttachmentInfo(self.name, self.media_type, len(self.data), self.sha256)

    def content(self) -> list[UserContent]:
        """What the model is sent: a line naming the file, then its text or its bytes."""
        info = self.info
        head = f"[attachment {self.name!r}: {self.media_type}, {self.size:,} bytes]"
        metadata = {METADATA_KEY: info.to_json()}
        if self.is_text:
            text = self.data.decode("utf-8")
            body = f"{head}\n{text}{'' if text.endswith(chr(10)) else chr(10)}[end of attachment {self.name!r}]"
            return [TextContent(body, metadata=metadata)]
        return [TextContent(head, metadata=metadata), BinaryContent(self.data, media_type=self.media_type)]

    def __repr__(self) -> str:
        return f"Attachment({self.name!r}, {self.media_type}, {self.size} bytes, sha256={self.sha256[:12]})"


def detect_media_type(name: str, data: bytes) -> str:
    """The media type of `data`: its magic number for binary files; for UTF-8 text, the name's suffix
    (`.md`, `.csv`, `.json`) or, without one, JSON when it parses as an object or array."""
    head = data[:16]
    for magic, media_type in _MAGIC:
        if head.startswith(magic):
            return media_type
    if head[:4] == b"RIFF" and head[8:12] in _RIFF:
        return _RIFF[head[8:12]]
    if _is_mp3(head):
        return "audio/mpeg"
    if not _BINARY_CONTROL.search(data):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            suffix = os.path.splitext(name)[1].lower()
            if suffix in _BY_SUFFIX:
                return _BY_SUFFIX[suffix]
            return "application/json" if _is_json_document(text) else "text/plain"
    raise AttachmentError(f"attachment {name!r}: its type is unknown (not {_KNOWN}); convert it to one of these types")


_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"ID3", "audio/mpeg"),
)
_RIFF = {b"WEBP": "image/webp", b"WAVE": "audio/wav"}
_BINARY_CONTROL = re.compile(rb"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")
"""Control bytes text does not hold (tabs, line breaks, form feeds and escapes are text)."""


def _is_mp3(head: bytes) -> bool:
    """An MPEG audio layer III frame header: 11 sync bits, a known version, layer III."""
    return (
        len(head) >= 2
        and head[0] == 0xFF
        and head[1] & 0xE0 == 0xE0
        and head[1] & 0x18 != 0x08
        and head[1] & 0x06 == 0x02
    )


def _is_json_document(text: str) -> bool:
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return False
    try:
        json.loads(text)
    except (ValueError, RecursionError):  # nested deeper than the parser goes: not a document we can read as JSON
        return False
    return True


def _check_name(name: str) -> None:
    """Refuse names an approver or a model could be misled by: empty, control characters, not UTF-8."""
    if not isinstance(name, str) or not name:
        raise AttachmentError(f"attach: an attachment needs a file name, got {name!r}")
    if any(unicodedata.category(char) in ("Cc", "Cs", "Cf", "Zl", "Zp") for char in name):
        shown = name.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
        raise AttachmentError(
            f"attach: refused the name {shown!r}: it holds control characters, line breaks or bytes that are "
            "not UTF-8; rename the file"
        )


def _check_size(name: str, size: int, limit: int, setting: str, kind: str = "") -> None:
    if size > limit:
        raise AttachmentError(
            f"attach: {kind}{name!r} is {size:,} bytes, more than the {limit:,}-byte limit "
            f"({_SETTINGS}{setting.upper()}); attach a smaller file"
        )


def check_count(count: int, settings: AttachmentSettings) -> None:
    """Refuse more files than one call may carry."""
    if count > settings.max_files:
        raise AttachmentError(
            f"attach: {count} files is more than the {settings.max_files} one call may carry ({_SETTINGS}MAX_FILES)"
        )


def check_call(attachments: Sequence[Attachment], settings: AttachmentSettings) -> None:
    """Refuse a call's attachments that are too many, named twice, too big together, or one by one (each file
    against these limits, whatever limits it was made under)."""
    check_count(len(attachments), settings)
    seen: set[str] = set()
    total = 0
    for attachment in attachments:
        if attachment.name in seen:
            raise AttachmentError(f"attach: {attachment.name!r} is attached twice; attach each file once")
        seen.add(attachment.name)
        _check_size(attachment.name, attachment.size, settings.max_file_bytes, "max_file_bytes")
        if attachment.is_text:
            _check_size(attachment.name, attachment.size, settings.max_text_bytes, "max_text_bytes", "text file ")
        total += attachment.size
    if total > settings.max_call_bytes:
        raise AttachmentError(
            f"attach: the files of one call are {total:,} bytes together, more than the {settings.max_call_bytes:,}-"
            f"byte limit ({_SETTINGS}MAX_CALL_BYTES); attach fewer or smaller files"
        )


def normal_name(name: str) -> str:
    """`name` as a path in normal form, as `Attachment.read` names the file it reads (`./a//b.txt` is `a/b.txt`)."""
    return "/".join(part for part in name.split("/") if part not in ("", "."))


def names_in(tool_args: Mapping[str, Any], takes: object) -> Any:
    """The names of the files a tool call hands over, where its `TAKES_ATTACHMENTS` metadata (`takes`) says they
    are: its `attachments` argument, or that field of its one model argument. None when the tool takes none."""
    if takes is True:
        return tool_args.get("attachments")
    if isinstance(takes, str):
        return getattr(tool_args.get(takes), "attachments", None)
    return None


def prompt_with(prompt: Any, attachments: Iterable[Attachment]) -> list[UserContent]:
    """The user prompt with the attachments' content after it."""
    items: list[UserContent] = [prompt] if isinstance(prompt, str) else list(prompt)
    for attachment in attachments:
        items.extend(attachment.content())
    return items


_CAN_TAKE = {
    "image/": ("supports_image_input", "images"),
    "audio/": ("supports_audio_file_input", "audio files"),
    "application/pdf": ("supports_document_input", "documents"),
}


def check_model(attachments: Iterable[Attachment], model: Model | str | None) -> None:
    """Refuse an attachment whose type the model cannot take, as its pydantic-ai profile says."""
    binary = [attachment for attachment in attachments if not attachment.is_text]
    if not binary or model is None:
        return
    if isinstance(model, str):
        try:
            from pydantic_ai.models import infer_model

            model = infer_model(model)
        except Exception:  # pydantic-ai reports an unusable model name itself
            return
    profile: Mapping[str, Any] = model.profile
    for attachment in binary:
        flag, what = next(value for prefix, value in _CAN_TAKE.items() if attachment.media_type.startswith(prefix))
        refused = not profile.get(flag, True)
        if attachment.media_type == "application/pdf" and not refused:
            refused = "application/pdf" not in profile.get("supported_document_media_types", {"application/pdf"})
            what = "PDF documents" if refused else what
        if refused:
            raise AttachmentError(
                f"attachment {attachment.name!r} is {attachment.media_type}, which model "
                f"{model.system}:{model.model_name} cannot take (its profile says it reads no {what}); "
                "attach another type, or use a model that reads it"
            )


def _read_open(fd: int, shown: str, name: str, limits: AttachmentSettings, *, confined: bool) -> bytes:
    """The bytes of the open file `fd` (closed here), `shown` in errors and `name` in the size's: a regular file
    within `max_file_bytes` and, read `confined` to a root, with no other hard links unless they are allowed."""
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise AttachmentError(f"attach: {shown!r} is a directory; attach the files in it one by one")
        if not stat.S_ISREG(info.st_mode):
            raise AttachmentError(f"attach: {shown!r} is not a regular file (a device, pipe or socket)")
        if confined and info.st_nlink > 1 and not limits.allow_hard_links:
            raise AttachmentError(
                f"attach: refused {shown!r}: the file has {info.st_nlink} hard links (other names for the same "
                "file, which may be outside the root); copy it, or allow hard links "
                f"({_SETTINGS}ALLOW_HARD_LINKS=true)"
            )
        _check_size(name, info.st_size, limits.max_file_bytes, "max_file_bytes")
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(limits.max_file_bytes + 1)  # one byte more tells a file that grew since fstat
    except OSError as error:
        raise AttachmentError(f"attach: cannot read {shown!r}: {error.strerror or type(error).__name__}") from None
    finally:
        os.close(fd)
    _check_size(name, len(data), limits.max_file_bytes, "max_file_bytes")
    return data
