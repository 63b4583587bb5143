"""The built-in `filesystem` and `filesystem_readonly` toolsets: text files under one root, per call.

Every path is confined to the root by `ConfinedRoot` (see `confine.py`): symbolic links are never
followed, inside the root or out. A file with more than one hard link is read, but not written,
edited or deleted unless `allow_hard_links` says so. File contents are read and written in a
worker thread.
"""

from __future__ import annotations

import asyncio
import codecs
import errno
import fnmatch
import functools
import heapq
import io
import os
import stat
from collections.abc import Callable, Iterator
from typing import Annotated, ClassVar, TypeVar

from pydantic import Field
from pydantic_ai.exceptions import ToolFailed

from .. import ToolPolicy, Toolset, tool
from ..files import ConfinedRoot, FilesystemSettings

__all__ = ["FilesystemToolset", "ReadOnlyFilesystemToolset"]

T = TypeVar("T")
_LIMITS = FilesystemSettings()
_SKIP_CHUNK = 65_536


class ReadOnlyFilesystemToolset(Toolset):
    """Read text files, list directories and find files under `root`; nothing is ever changed.

    Limits: `read_text` returns at most `max_read_bytes` (the rest is announced in a note),
    `list_dir` and `glob` at most `max_entries` entries, and `glob` looks at no more than
    `max_scanned` entries.
    """

    default_policy: ClassVar[ToolPolicy | None] = ToolPolicy()  # reads run without asking

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_read_bytes: int = _LIMITS.max_read_bytes,
        max_entries: int = _LIMITS.max_entries,
        max_scanned: int = _LIMITS.max_scanned,
    ) -> None:
        self.root = ConfinedRoot(root)
        self.max_read_bytes = _positive("max_read_bytes", max_read_bytes)
        self.max_entries = _positive("max_entries", max_entries)
        self.max_scanned = _positive("max_scanned", max_scanned)

    @tool
    async def read_text(
        self,
        path: str,
        offset: Annotated[int, Field(ge=0)] = 0,
        limit: Annotated[int, Field(ge=1)] | None = None,
    ) -> str:
        """Read a UTF-8 text file. `offset` skips that many lines first; `limit` returns at most that many lines.

        Long files are cut at a byte limit; the text then ends with a note saying how to read on.
        """
        return await _in_thread("read_text", path, self._read_text, path, offset, limit)

    @tool
    async def list_dir(self, path: str = ".") -> str:
        """List a directory: subdirectories end with '/', files show their size, symbolic links are marked."""
        return await _in_thread("list_dir", path, self._list_dir, path)

    @tool
    async def glob(self, pattern: str, path: str = ".") -> str:
        """Find files and directories under `path` whose path relative to it matches `pattern`.

        `*` and `?` match within one name, `**` matches any number of directories (e.g. `**/*.py`);
        names starting with '.' are only matched by a pattern part that starts with '.'.
        Symbolic links are listed but not followed. Results are relative to the root.
        """
        return await _in_thread("glob", pattern, self._glob, pattern, path)

    def _read_text(self, path: str, offset: int, limit: int | None) -> str:
        with self.root.parent(path, tool="read_text") as (dir_fd, name):
            if name is None:
                raise ToolFailed(f"read_text: {path!r} is the root directory; list_dir shows what is in it")
            fd = self.root.open_entry(dir_fd, name, os.O_RDONLY | os.O_NONBLOCK, tool="read_text", path=path)
        size = _regular_size(fd, "read_text", path)
        with os.fdopen(fd, "rb") as file:
            if size == 0 and offset == 0:
                return f"[{path!r} is empty]"
            skipped = _skip_lines(file, offset)
            if offset and not file.peek(1):
                return f"[{path!r} has {skipped} lines, so there is nothing at offset={offset}]"
            data, lines, cut = _take_lines(file, limit, self.max_read_bytes)
            more = bool(file.peek(1))
        text = _decode(data, final=not cut, path=path)
        if cut:
            if lines == 0:
                how = f"line {offset + 1} alone is longer than the limit, so the rest of it cannot be read"
            else:
                how = f"read on with offset={offset + lines}"
            return _noted(text, f"truncated at the {self.max_read_bytes}-byte read limit ({size} bytes in all); {how}")
        if more:
            return _noted(
                text, f"lines {offset + 1}-{offset + lines} shown; more follow: read on with offset={offset + lines}"
            )
        return text

    def _list_dir(self, path: str) -> str:
        with self.root.directory(path, tool="list_dir") as fd, os.scandir(fd) as scan:
            seen = [0]
            shown = heapq.nsmallest(self.max_entries, _counted(scan, seen), key=lambda entry: entry.name)
            lines = [_describe(entry) for entry in shown]
        where = path if path not in ("", ".") else "the root"
        if not lines:
            return f"{where} is empty"
        hidden = seen[0] - len(lines)
        more = f"\n[{hidden} more entries not shown (limit {self.max_entries}); glob narrows it down]" if hidden else ""
        return f"{where}: {seen[0]} entries\n" + "\n".join(lines) + more

    def _glob(self, pattern: str, path: str) -> str:
        wanted = self.root.parts(pattern, tool="glob")
        if not wanted:
            raise ToolFailed(f"glob: the pattern {pattern!r} matches nothing; try '*' or '**/*.txt'")
        base = self.root.parts(path, tool="glob")
        matches: list[str] = []
        scanned = 0
        stopped = False
        pending: list[tuple[str, ...]] = [()]
        while pending and not stopped:
            below = pending.pop()
            try:
                fd = self.root.walk(base + below, path, tool="glob")
            except ToolFailed:
                if not below:
                    raise
                continue  # removed or replaced (by a symlink, say) since it was listed: skip it
            try:
                with os.scandir(fd) as scan:
                    for entry in scan:
                        if scanned == self.max_scanned:
                            stopped = True
                            break
                        scanned += 1
                        found = (*below, entry.name)
                        is_dir = entry.is_dir(follow_symlinks=False)
                        if _matches(wanted, found):
                            shown = _printable("/".join(base + found))
                            matches.append(f"{shown}/" if is_dir else _marked(shown, entry))
                        if is_dir and _matches(wanted, found, prefix=True):
                            pending.append(found)
            finally:
                os.close(fd)
            stopped = stopped or (bool(pending) and scanned == self.max_scanned)
        notes = []
        if stopped:
            notes.append(f"[stopped after looking at {self.max_scanned} entries; give a narrower path or pattern]")
        if len(matches) > self.max_entries:
            notes.append(f"[{len(matches) - self.max_entries} more matches not shown (limit {self.max_entries})]")
        if not matches:
            return "\n".join([f"no matches for {pattern!r} under {path!r}", *notes])
        return "\n".join([*sorted(matches)[: self.max_entries], *notes])


class FilesystemToolset(ReadOnlyFilesystemToolset):
    """The read tools, plus `write_text`, `edit`, `mkdir` and `delete` under `root`.

    Writes and deletes ask for approval by default (see docs/approvals.md). `write_text` and
    `edit` handle files up to `max_write_bytes`. A file with more than one hard link (another name
    for it may be outside the root) is refused to `write_text`, `edit` and `delete` unless
    `allow_hard_links` is true; the check is made on the opened file, before anything is written.
    """

    default_policy: ClassVar[ToolPolicy | None] = ToolPolicy(
        tools={"write_text": "ask", "edit": "ask", "mkdir": "ask", "delete": "ask"}
    )

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_read_bytes: int = _LIMITS.max_read_bytes,
        max_write_bytes: int = _LIMITS.max_write_bytes,
        max_entries: int = _LIMITS.max_entries,
        max_scanned: int = _LIMITS.max_scanned,
        allow_hard_links: bool = _LIMITS.allow_hard_links,
    ) -> None:
        super().__init__(root, max_read_bytes=max_read_bytes, max_entries=max_entries, max_scanned=max_scanned)
        self.max_write_bytes = _positive("max_write_bytes", max_write_bytes)
        if not isinstance(allow_hard_links, bool):
            raise ValueError(f"allow_hard_links must be True or False, got {allow_hard_links!r}")
        self.allow_hard_links = allow_hard_links

    @tool
    async def write_text(self, path: str, text: str) -> str:
        """Write `text` to a file as UTF-8, creating it or replacing its contents. Its directory must exist (mkdir)."""
        return await _in_thread("write_text", path, self._write_text, path, text)

    @tool
    async def edit(self, path: str, old: str, new: str) -> str:
        """Replace the one occurrence of `old` in a text file by `new`.

        `old` must match exactly (spaces and line breaks too) and occur exactly once.
        """
        return await _in_thread("edit", path, self._edit, path, old, new)

    @tool
    async def mkdir(self, path: str) -> str:
        """Create a directory, and any missing directories above it."""
        return await _in_thread("mkdir", path, self._mkdir, path)

    @tool
    async def delete(self, path: str) -> str:
        """Delete a file, a symbolic link (never what it points to) or an empty directory."""
        return await _in_thread("delete", path, self._delete, path)

    def _write_text(self, path: str, text: str) -> str:
        data = _encode(text, "write_text")
        if len(data) > self.max_write_bytes:
            raise ToolFailed(
                f"write_text: {len(data)} bytes for {path!r} is more than the {self.max_write_bytes}-byte write limit"
            )
        with self.root.parent(path, tool="write_text") as (dir_fd, name):
            if name is None:
                raise ToolFailed(f"write_text: {path!r} is the root directory, not a file")
            created = True
            flags = os.O_WRONLY | os.O_NONBLOCK
            try:  # O_EXCL never follows a symlink, and tells a new file from an old one
                fd = os.open(name, flags | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=dir_fd)
            except FileExistsError:
                created = False
                fd = self.root.open_entry(dir_fd, name, flags, tool="write_text", path=path)
            except OSError as error:
                raise self.root.not_opened(dir_fd, name, error, tool="write_text", path=path, shown=path) from None
        self._unlinked(fd, _regular(fd, "write_text", path), "write_text", path)
        with os.fdopen(fd, "wb") as file:
            file.truncate(0)
            file.write(data)
        return f"{'created' if created else 'replaced'} {path!r} ({len(data)} bytes)"

    def _edit(self, path: str, old: str, new: str) -> str:
        if not old:
            raise ToolFailed("edit: `old` is empty; give the exact text to replace (write_text replaces a whole file)")
        with self.root.parent(path, tool="edit") as (dir_fd, name):
            if name is None:
                raise ToolFailed(f"edit: {path!r} is the root directory, not a file")
            fd = self.root.open_entry(dir_fd, name, os.O_RDWR | os.O_NONBLOCK, tool="edit", path=path)
        size = self._unlinked(fd, _regular(fd, "edit", path), "edit", path)
        with os.fdopen(fd, "r+b") as file:
            if size > self.max_write_bytes:
                raise ToolFailed(f"edit: {path!r} ({size} bytes) is larger than the {self.max_write_bytes}-byte limit")
            data = file.read(self.max_write_bytes + 1)
            if len(data) > self.max_write_bytes:  # it grew since fstat
                raise ToolFailed(f"edit: {path!r} is larger than the {self.max_write_bytes}-byte limit")
            text = _decode(data, final=True, path=path, tool="edit")
            first = text.find(old)
            if first < 0:
                raise ToolFailed(
                    f"edit: the old text was not found in {path!r}; read_text shows the exact text "
                    "(spaces, tabs and line breaks must match)"
                )
            starts = _occurrences(text, old, _SHOWN_OCCURRENCES + 1)
            if len(starts) > 1:
                lines = ", ".join(str(text.count("\n", 0, start) + 1) for start in starts[:_SHOWN_OCCURRENCES])
                times, at = f"{len(starts)} times", "at lines"
                if len(starts) > _SHOWN_OCCURRENCES:
                    times, at = f"more than {_SHOWN_OCCURRENCES} times", "first at lines"
                raise ToolFailed(
                    f"edit: the old text occurs {times} in {path!r} ({at} {lines}); "
                    "include more of the surrounding text so that it occurs once"
                )
            edited = _encode(text[:first] + new + text[first + len(old) :], "edit")
            if len(edited) > self.max_write_bytes:
                raise ToolFailed(f"edit: {path!r} would grow past the {self.max_write_bytes}-byte write limit")
            file.seek(0)
            file.truncate()
            file.write(edited)
        line = text.count("\n", 0, first) + 1
        return f"edited {path!r}: replaced 1 occurrence at line {line}"

    def _mkdir(self, path: str) -> str:
        names = self.root.parts(path, tool="mkdir")
        made: list[str] = []
        os.close(self.root.walk(names, path, tool="mkdir", create=True, made=made))
        if not made:
            return f"{path!r} already exists"
        return f"created {', '.join(repr(each) for each in made)}"

    def _delete(self, path: str) -> str:
        with self.root.parent(path, tool="delete") as (dir_fd, name):
            if name is None:
                raise ToolFailed("delete: the root directory itself cannot be deleted")
            try:
                found = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISDIR(found.st_mode):
                    os.rmdir(name, dir_fd=dir_fd)
                    return f"deleted the empty directory {path!r}"
                if found.st_nlink > 1 and not self.allow_hard_links:
                    raise ToolFailed(_hard_links_refused("delete", path, found.st_nlink))
                os.unlink(name, dir_fd=dir_fd)  # a symlink itself, never its target
            except FileNotFoundError:
                raise ToolFailed(f"delete: {path!r} does not exist") from None
            except OSError as error:
                if error.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    raise ToolFailed(
                        f"delete: the directory {path!r} is not empty; delete what is in it first (list_dir shows it)"
                    ) from None
                raise ToolFailed(f"delete: cannot delete {path!r}: {os.strerror(error.errno or 0)}") from None
        kind = "symbolic link" if stat.S_ISLNK(found.st_mode) else "file"
        return f"deleted the {kind} {path!r}"

    def _unlinked(self, fd: int, info: os.stat_result, tool: str, path: str) -> int:
        """The size of the file open as `fd`, unless it has other hard links and they are not allowed:
        then `fd` is closed and the call refused. Checked on the open file, so no rename can slip past it."""
        if info.st_nlink > 1 and not self.allow_hard_links:
            os.close(fd)
            raise ToolFailed(_hard_links_refused(tool, path, info.st_nlink))
        return info.st_size


async def _in_thread(tool: str, path: str, func: Callable[..., T], *args: object) -> T:
    """Run blocking file work in the loop's default executor (without copying the caller's context).

    An unexpected `OSError` (a disk full, a file removed meanwhile) becomes a `ToolFailed` naming the tool.
    """
    try:
        return await asyncio.get_running_loop().run_in_executor(None, functools.partial(func, *args))
    except OSError as error:
        raise ToolFailed(f"{tool}: failed on {path!r}: {error.strerror or type(error).__name__}") from None


def _positive(name: str, value: int) -> int:
    if not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a whole number > 0, got {value!r}")
    return value


def _hard_links_refused(tool: str, path: str, links: int) -> str:
    why = "" if tool == "delete" else ", so changing it here would change it there too"
    instead = "" if tool == "delete" else "write to a new file instead, or "
    return (
        f"{tool}: refused {path!r}: the file has {links} hard links (other names for the same file, which "
        f"may be outside the root){why}. Files with hard links are only read here, never changed or deleted; "
        f"{instead}ask the user to allow hard links (LLM_DO_FILESYSTEM__ALLOW_HARD_LINKS=true)"
    )


def _regular_size(fd: int, tool: str, path: str) -> int:
    """The size of the regular file open as `fd`; anything else is closed and refused."""
    return _regular(fd, tool, path).st_size


def _regular(fd: int, tool: str, path: str) -> os.stat_result:
    """The status of the regular file open as `fd`; anything else is closed and refused."""
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode):
        return info
    os.close(fd)
    if stat.S_ISDIR(info.st_mode):
        raise ToolFailed(f"{tool}: {path!r} is a directory; list_dir shows what is in it")
    raise ToolFailed(f"{tool}: {path!r} is not a regular file (a device, pipe or socket)")


def _skip_lines(file: io.BufferedReader, count: int) -> int:
    """Read past `count` lines, a bounded chunk at a time; return how many there were."""
    skipped = 0
    while skipped < count:
        piece = file.readline(_SKIP_CHUNK)
        if not piece:
            break
        if piece.endswith(b"\n") or not file.peek(1):
            skipped += 1
    return skipped


def _take_lines(file: io.BufferedReader, limit: int | None, cap: int) -> tuple[bytes, int, bool]:
    """Up to `limit` lines and at most `cap` bytes: (the bytes, whole lines taken, whether the cap cut them)."""
    taken = bytearray()
    lines = 0
    while limit is None or lines < limit:
        room = cap - len(taken)
        piece = file.readline(room + 1)  # one byte more than fits tells a cut from an exact fit
        if not piece:
            break
        if len(piece) > room:
            taken += piece[:room]
            return bytes(taken), lines, True
        taken += piece
        lines += 1  # a piece that fits ends with a line break or at the end of the file
    return bytes(taken), lines, False


def _noted(text: str, note: str) -> str:
    """`text` with a note for the model on a line of its own."""
    separator = "" if not text or text.endswith("\n") else "\n"
    return f"{text}{separator}[{note}]"


def _decode(data: bytes, *, final: bool, path: str, tool: str = "read_text") -> str:
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(data, final=final)
    except UnicodeDecodeError:
        raise ToolFailed(f"{tool}: {path!r} is not UTF-8 text (a binary file?)") from None


def _encode(text: str, tool: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolFailed(f"{tool}: the text contains characters that cannot be written as UTF-8") from None


_SHOWN_OCCURRENCES = 10
"""How many occurrences of an ambiguous `old` text `edit` looks for and names."""


def _occurrences(text: str, old: str, most: int) -> list[int]:
    """Where `old` starts in `text` (overlapping occurrences too), at most `most` of them: each search can cost
    as much as `old` is long, so counting them all would cost the text's length times that."""
    starts: list[int] = []
    at = text.find(old)
    while at >= 0 and len(starts) < most:
        starts.append(at)
        at = text.find(old, at + 1)
    return starts


def _counted(entries: Iterator[os.DirEntry[str]], seen: list[int]) -> Iterator[os.DirEntry[str]]:
    for entry in entries:
        seen[0] += 1
        yield entry


def _describe(entry: os.DirEntry[str]) -> str:
    name = _printable(entry.name)
    if entry.is_dir(follow_symlinks=False):
        return f"{name}/"
    if entry.is_file(follow_symlinks=False):
        return f"{name}  ({entry.stat(follow_symlinks=False).st_size} bytes)"
    return _marked(name, entry)


def _printable(name: str) -> str:
    """A file name as text a model can be sent: bytes that are not UTF-8 are shown as `\\xff` escapes."""
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = name.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")


def _marked(shown: str, entry: os.DirEntry[str]) -> str:
    if entry.is_symlink():
        return f"{shown}  (symbolic link, not followed)"
    if entry.is_file(follow_symlinks=False):
        return shown
    return f"{shown}  (not a regular file)"


def _matches(pattern: tuple[str, ...], names: tuple[str, ...], *, prefix: bool = False) -> bool:
    """Whether `names` matches `pattern`; with `prefix`, whether something below `names` could.

    A loop over the names, keeping the pattern parts reached so far (no recursion: a path may have 512 names)."""
    reached = _past_globstars(pattern, {0})
    for name in names:
        after: set[int] = set()
        for part in reached:
            if part == len(pattern):
                continue
            if pattern[part] == "**":
                if not name.startswith("."):
                    after.add(part)  # `**` takes this name and may take more
            elif _name_matches(pattern[part], name):
                after.add(part + 1)
        reached = _past_globstars(pattern, after)
        if not reached:
            return False
    return any(part < len(pattern) for part in reached) if prefix else len(pattern) in reached


def _past_globstars(pattern: tuple[str, ...], reached: set[int]) -> set[int]:
    """`reached`, and the parts after each `**` in it, which may take no name."""
    more = [part for part in reached if part < len(pattern) and pattern[part] == "**"]
    while more:
        after = more.pop() + 1
        if after not in reached:
            reached.add(after)
            if after < len(pattern) and pattern[after] == "**":
                more.append(after)
    return reached


def _name_matches(pattern: str, name: str) -> bool:
    if name.startswith(".") and not pattern.startswith("."):
        return False
    return fnmatch.fnmatchcase(name, pattern)
