"""A session's grants: its "approve for session" answers, and the questions pending in it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from pydantic_core import to_jsonable_python

from ._requests import Approval

if TYPE_CHECKING:
    from ..files._attachments import AttachmentInfo


SessionKey: TypeAlias = tuple[str, str, str]
"""(toolset name, tool name, the arguments as canonical JSON)."""


@dataclass(slots=True)
class Grants:
    """One session's "approve for session" answers, and its questions waiting for an answer.

    A run given no session has grants of its own, which end with it.
    """

    granted: set[SessionKey] = field(default_factory=set)
    pending: dict[SessionKey, asyncio.Future[Approval | None]] = field(default_factory=dict)


def session_key(
    toolset: str, tool: str, args: Mapping[str, Any], attachments: Iterable[AttachmentInfo] = ()
) -> SessionKey:
    """The cache key of a call: its toolset and tool names, its exact arguments, and the digests of the
    files it carries (an approval for the session covers those contents, not whatever a name holds later)."""
    values = dict(args)
    digests = [f"{item.name}@sha256:{item.sha256}" for item in attachments]
    if digests:
        values["\x00attachments"] = digests  # cannot collide with an argument name
    return (toolset, tool, canonical_args(values))


def canonical_args(args: Mapping[str, Any]) -> str:
    """A call's arguments as canonical JSON: equal for equal arguments, however they were built (any mapping)."""
    return json.dumps(
        to_jsonable_python(dict(args), fallback=repr), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
