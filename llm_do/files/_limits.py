"""Limits of what llm-do reads from files: the built-in `filesystem` toolsets, and files handed to agents."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class FilesystemSettings(BaseModel):
    """Limits of the built-in `filesystem` toolsets (`LLM_DO_FILESYSTEM__MAX_READ_BYTES`, ...)."""

    model_config = ConfigDict(extra="forbid")  # a misspelt limit is an error, not a limit that does not hold

    max_read_bytes: int = Field(default=262_144, gt=0)
    """Most bytes `read_text` returns; longer reads end with a note saying how to read on."""
    max_write_bytes: int = Field(default=1_048_576, gt=0)
    """Largest file `write_text` writes, and the largest file `edit` reads or writes."""
    max_entries: int = Field(default=500, gt=0)
    """Most entries `list_dir` and `glob` return."""
    max_scanned: int = Field(default=50_000, gt=0)
    """Most directory entries one `glob` looks at before it stops with a note."""
    allow_hard_links: bool = False
    """Let `write_text`, `edit` and `delete` change a file that has other hard links (other names,
    perhaps outside the root). Off: such files are only read."""


class AttachmentSettings(BaseModel):
    """Limits of the files handed to agents (`LLM_DO_ATTACHMENTS__MAX_FILE_BYTES`, ...); see docs/attachments.md."""

    model_config = ConfigDict(extra="forbid")  # a misspelt limit is an error, not a limit that does not hold

    max_file_bytes: int = Field(default=4_194_304, gt=0)
    """Largest file attached, in bytes (4 MiB: an image or a PDF of a few dozen pages)."""
    max_text_bytes: int = Field(default=262_144, gt=0)
    """Largest text file attached, in bytes (256 KiB, about 64,000 tokens): text goes into the model's context."""
    max_call_bytes: int = Field(default=8_388_608, gt=0)
    """Most bytes of attachments one call carries, all files together (8 MiB)."""
    max_files: int = Field(default=20, gt=0)
    """Most files one call carries."""
    allow_hard_links: bool = False
    """Attach a file that has other hard links (other names, perhaps outside the root). Off: refused."""
