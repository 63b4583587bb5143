"""Built-in toolsets. Declare them with the providers of `containers.BuiltinToolsets`, or build your own."""

from ..settings import FilesystemSettings
from .confine import ALLOWED_PATHS, ConfinedRoot, PathRefused
from .filesystem import FilesystemToolset, ReadOnlyFilesystemToolset

__all__ = [
    "ALLOWED_PATHS",
    "ConfinedRoot",
    "FilesystemSettings",
    "FilesystemToolset",
    "PathRefused",
    "ReadOnlyFilesystemToolset",
]
