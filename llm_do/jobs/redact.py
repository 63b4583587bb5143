"""Attachment bytes kept out of procrastinate's log lines.

A job deferred with attachments holds their bytes (base64) in its arguments, and procrastinate logs a job's
arguments: in its lines' text (`Starting job llm_do:x[1](input=..., attachments=[...])`) and in the `job` or
`jobs` extra of the record, which structured log handlers write out. The filter here leaves each file's name,
media type, size and digest there, and drops its bytes.
"""

from __future__ import annotations

import logging
import re
from typing import Any

__all__ = ["hide_attachment_bytes"]

_DATA = re.compile(r"'data': '[A-Za-z0-9+/=]*'")
_HIDDEN = "'data': '<not logged>'"
_MARK = "attachments=["
"""Where a call string's attachments begin (procrastinate writes `key=repr(value)` for each argument)."""


class _HideAttachmentBytes(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and _MARK in record.msg:
            record.msg = _hidden_in(record.msg)
        for key in ("job", "jobs"):
            value = record.__dict__.get(key)
            if value is not None:
                record.__dict__[key] = _context_without_bytes(value)
        return True


_FILTER = _HideAttachmentBytes()


def hide_attachment_bytes(*loggers: str) -> None:
    """Keep attachment bytes out of what the loggers named log (once each: the same filter is added once)."""
    for name in loggers:
        logging.getLogger(name).addFilter(_FILTER)


def _hidden_in(text: str) -> str:
    head, mark, tail = text.partition(_MARK)
    return head + mark + _DATA.sub(_HIDDEN, tail)


def _context_without_bytes(context: Any) -> Any:
    """A job's log context (or a list of them) whose stored attachments have no `data`: a copy, when it has some."""
    if isinstance(context, list):
        return [_context_without_bytes(item) for item in context]
    kwargs = context.get("task_kwargs") if isinstance(context, dict) else None
    if not isinstance(kwargs, dict) or not isinstance(files := kwargs.get("attachments"), list):
        return context
    kept = [{k: v for k, v in item.items() if k != "data"} if isinstance(item, dict) else item for item in files]
    hidden = {**context, "task_kwargs": {**kwargs, "attachments": kept}}
    if isinstance(context.get("call_string"), str):
        hidden["call_string"] = _hidden_in(context["call_string"])
    return hidden
