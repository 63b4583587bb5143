"""Path confinement: turn a model's path into file descriptors that cannot lead outside a root.

A path is first checked as text (relative, `/` between parts, no `..`, `~`, drive letters,
backslashes, NUL bytes, percent-escapes that decode to any of these, no overlong names), then
opened one part at a time from the root with `O_NOFOLLOW`, each part relative to the directory
opened before it. No symbolic link is ever followed, not even one created while a call runs, and
there is no gap between a check and the open it guards: the open is the check. Nothing is cached;
every operation starts again from the root.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote

from pydantic_ai.exceptions import ToolFailed

from ..errors import ConfigurationError

MAX_PATH_CHARS = 1024
"""Longest path accepted, in characters."""
MAX_NAME_BYTES = 255
"""Longest single file or directory name accepted, in UTF-8 bytes."""
ALLOWED_PATHS = (
    "Give a path relative to the root, like 'src/app.py', with '/' between parts; '..', absolute paths, '~', "
    "drive letters, backslashes, NUL bytes, percent-escapes of these and symbolic links are refused."
)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC if os.name == "posix" else 0
_DRIVE = re.compile(r"^[A-Za-z]:")
_DECODE_ROUNDS = 3


class PathRefused(ToolFailed):
    """A path refused because it could lead outside the root; the model reads the message."""


class ConfinedRoot:
    """A directory that paths are confined to, resolved once (the root is trusted configuration).

    Needs a POSIX system (`O_NOFOLLOW` and `dir_fd` support).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        if not isinstance(root, str | os.PathLike):
            raise ConfigurationError(
                f"filesystem root must be a directory path, got {root!r}; "
                "set LLM_DO_PROJECT_ROOT or pass root= to the toolset's provider"
            )
        if os.name != "posix" or os.open not in os.supports_dir_fd:
            raise ConfigurationError("the filesystem toolsets need a POSIX system (O_NOFOLLOW and dir_fd support)")
        try:
            self.path = Path(root).resolve(strict=True)
        except OSError:
            self.path = Path(root)
        if not self.path.is_dir():
            raise ConfigurationError(
                f"filesystem root {os.fspath(root)!r} is not an existing directory; "
                "set LLM_DO_PROJECT_ROOT or pass root= to the toolset's provider"
            )

    def parts(self, path: str, *, tool: str) -> tuple[str, ...]:
        """The names along `path` (empty for the root itself), or `PathRefused` saying why not."""
        if not isinstance(path, str):
            raise self.refuse(tool, path, "a path must be a string")
        if len(path) > MAX_PATH_CHARS:
            raise self.refuse(tool, path[:60] + "...", f"it is longer than {MAX_PATH_CHARS} characters")
        forms = [path]
        while forms[-1] != unquote(forms[-1]):
            if len(forms) > _DECODE_ROUNDS:
                raise self.refuse(tool, path, "it is percent-encoded more than three times over")
            forms.append(unquote(forms[-1]))
        for form in forms:
            problem = _problem(form)
            if problem is not None:
                decoded = "" if form is path else f" (once its percent-escapes are decoded: {form!r})"
                raise self.refuse(tool, path, problem + decoded)
        names = tuple(name for name in path.split("/") if name not in ("", "."))
        for name in names:
            try:
                size = len(name.encode("utf-8", "surrogateescape"))
            except UnicodeEncodeError:
                raise self.refuse(tool, path, "it contains characters that cannot be part of a file name") from None
            if size > MAX_NAME_BYTES:
                raise self.refuse(tool, path, f"a name in it is longer than {MAX_NAME_BYTES} bytes")
        return names

    @contextmanager
    def directory(self, path: str, *, tool: str) -> Iterator[int]:
        """A file descriptor of the directory at `path`."""
        fd = self.walk(self.parts(path, tool=tool), path, tool=tool)
        try:
            yield fd
        finally:
            os.close(fd)

    @contextmanager
    def parent(self, path: str, *, tool: str) -> Iterator[tuple[int, str | None]]:
        """The directory holding `path` and its last name (`None` when `path` is the root itself)."""
        names = self.parts(path, tool=tool)
        fd = self.walk(names[:-1], path, tool=tool)
        try:
            yield fd, (names[-1] if names else None)
        finally:
            os.close(fd)

    def walk(
        self, names: tuple[str, ...], path: str, *, tool: str, create: bool = False, made: list[str] | None = None
    ) -> int:
        """Open the directory `names` below the root one name at a time, never following a symlink.

        With `create`, missing directories are made (their paths are appended to `made`).
        """
        try:
            fd = os.open(self.path, _DIR_FLAGS)
        except OSError:
            raise ToolFailed(f"{tool}: the root directory {os.fspath(self.path)!r} cannot be opened any more") from None
        try:
            for depth, name in enumerate(names, 1):
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError as error:
                    if not (create and error.errno == errno.ENOENT):
                        shown = "/".join(names[:depth])
                        raise self.not_opened(fd, name, error, tool=tool, path=path, shown=shown) from None
                    if self.make_directory(fd, name, tool=tool, shown="/".join(names[:depth])) and made is not None:
                        made.append("/".join(names[:depth]))
                    child = self.open_entry(fd, name, _DIR_FLAGS, tool=tool, path=path)
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_entry(self, dir_fd: int, name: str, flags: int, *, tool: str, path: str, mode: int = 0o666) -> int:
        """`os.open(name, flags | O_NOFOLLOW, dir_fd=dir_fd)`, with a refusal if `name` is a symlink."""
        try:
            return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
        except OSError as error:
            raise self.not_opened(dir_fd, name, error, tool=tool, path=path, shown=path) from None

    def not_opened(self, dir_fd: int, name: str, error: OSError, *, tool: str, path: str, shown: str) -> ToolFailed:
        """Say why `name` (shown as `shown`) could not be opened: a symlink is a refusal."""
        try:
            is_link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        except OSError:
            is_link = False
        where = "" if shown == path else f" (in {path!r})"
        if is_link:
            return self.refuse(tool, path, f"{shown!r} is a symbolic link, and symbolic links are never followed")
        if error.errno == errno.ENOENT:
            return ToolFailed(f"{tool}: {shown!r} does not exist{where}; list_dir or glob show what does")
        if error.errno == errno.ENOTDIR:
            return ToolFailed(f"{tool}: {shown!r} is not a directory{where}")
        if error.errno == errno.EISDIR:
            return ToolFailed(f"{tool}: {shown!r} is a directory; list_dir shows what is in it")
        if error.errno == errno.ENXIO:
            return ToolFailed(f"{tool}: {shown!r} is not a regular file")
        return ToolFailed(f"{tool}: cannot open {shown!r}{where}: {os.strerror(error.errno or 0)}")

    @staticmethod
    def make_directory(dir_fd: int, name: str, *, tool: str, shown: str) -> bool:
        """Make the directory `name`; False if something by that name exists (the open after it checks what)."""
        try:
            os.mkdir(name, dir_fd=dir_fd)
        except FileExistsError:
            return False
        except OSError as error:
            raise ToolFailed(f"{tool}: cannot create {shown!r}: {os.strerror(error.errno or 0)}") from None
        return True

    @staticmethod
    def refuse(tool: str, path: object, why: str) -> PathRefused:
        """A refusal naming the tool and the path, with what is allowed instead."""
        return PathRefused(f"{tool}: refused path {path!r}: {why}. {ALLOWED_PATHS}")

    def __repr__(self) -> str:
        return f"ConfinedRoot({os.fspath(self.path)!r})"


def _problem(form: str) -> str | None:
    if "\x00" in form:
        return "it contains a NUL byte"
    if "\\" in form:
        return "backslashes are not path separators here (use '/'), and Windows paths are not allowed"
    if form.startswith("/"):
        return "absolute paths are not allowed"
    if form.startswith("~"):
        return "'~' (a home directory) is not expanded"
    if _DRIVE.match(form):
        return "Windows drive letters are not allowed"
    if ".." in form.split("/"):
        return "'..' (a parent directory) is not allowed"
    return None
