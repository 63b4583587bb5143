"""What identifies a model request across runs: a hash of the conversation without its volatile fields.

The key is a SHA-256 of canonical JSON made of:

- the entry chain (`CallScope.chain()` of the agent run's `deps`, empty outside llm-do),
- the names of the tools the agent offers, and of the native tools it sends (web search, ...), if any,
- the model settings of the request, when asked for (`request_key(..., settings=...)`: the journal of a
  job's run asks, recordings do not),
- every message so far, reduced to what the model reads: prompts, instructions, texts, tool calls
  (name and arguments) and tool returns (name and content). A file in a prompt (an attachment,
  any `BinaryContent`) counts by its media type, size and SHA-256 digest, never its bytes.
  Timestamps, run and conversation ids, usage, model names and provider details are left out, and
  each tool call id is replaced by the call's position in the conversation (tool returns are sorted
  by it), so parallel tool calls and concurrent runs get the same key whatever order they ran in.

Handles (`txn_1a2b3c4d`, random per run, see `llm_do.Handles`) are replaced by positional
placeholders (`<handle#1>`, numbered by first appearance in the conversation), so a conversation
that passes handles around has the same key on every run; `RequestKey.handles` keeps the live ones.
"""

from __future__ import annotations

import hashlib
import json
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters

from .. import AttachmentInfo
from ..errors import shortened
from ..files import METADATA_KEY
from ..run import current_scope

__all__ = ["HANDLE_PATTERN", "KeyCache", "RequestKey", "changed_tools", "current_chain", "request_key"]

HANDLE_PATTERN = re.compile(r"\b[a-z][a-z0-9_]*_[0-9a-f]{8}\b")
"""What a handle looks like: the `prefix_1a2b3c4d` that `Handles.open` mints."""

_SHOWN = 160
"""How many characters of a prompt or tool return an error message or a recording shows."""


@dataclass(frozen=True, slots=True)
class RequestKey:
    """One model request, identified: its hash, and what a person needs to recognise it."""

    key: str
    """SHA-256 (hex) of the normalised request."""
    chain: tuple[str, ...]
    """Entry names from the top-level call down to the one that asked (empty outside llm-do)."""
    request_index: int
    """How many responses the conversation already had: 0 for an agent run's first request."""
    prompt: str | None
    """The latest text prompt of the conversation, if any."""
    asked: str
    """What the request asked, shortened: its last user prompt, or the tool returns it carries."""
    handles: tuple[str, ...] = ()
    """The handles in the conversation, in order of first appearance (`<handle#1>` is the first)."""
    attachments: tuple[AttachmentInfo, ...] = ()
    """The attachments the conversation's prompts carry (name, media type, size, digest), in order."""

    @property
    def entry(self) -> str | None:
        """The entry that asked, or `None` outside llm-do."""
        return self.chain[-1] if self.chain else None

    def describe(self) -> str:
        """`entry chain a > b, request #1, asked: ...`, for error messages."""
        where = " > ".join(self.chain) if self.chain else "(no llm-do entry)"
        return f"entry chain {where}, request #{self.request_index} of its agent run, asking {self.asked}"


def current_chain() -> tuple[str, ...]:
    """The entry chain of the agent run making the current model request, or `()` outside llm-do."""
    scope = current_scope()
    return () if scope is None else scope.chain()


class KeyCache:
    """What the keys of one conversation's requests share, so each request hashes only its new messages.

    A conversation's requests repeat its earlier messages (the same objects, request after request); the hash
    of the key's text up to the last message seen is kept, and a request whose messages begin with those same
    objects, under the same chain, goes on from there. Any other request is keyed in full. Keys are the same
    with or without a cache. One cache per conversation (one agent run's call)."""

    __slots__ = ("_handles", "_hash", "_head", "_messages", "_ordinals")

    def __init__(self) -> None:
        self._head: str | None = None
        self._hash = hashlib.sha256()
        self._messages: list[ModelMessage] = []
        self._ordinals: dict[str, int] = {}
        self._handles: dict[str, str] = {}

    def extended(self, head: str, messages: list[ModelMessage]) -> tuple[Any, dict[str, str]]:
        """The hash of `head` and every message (comma-separated), and the conversation's handles."""
        seen = self._messages
        if head != self._head or len(messages) < len(seen) or not all(map(operator.is_, seen, messages)):
            self._head, self._hash, self._messages = head, hashlib.sha256(_utf8(head)), []
            self._ordinals, self._handles = {}, {}
            seen = self._messages
        for message in messages[len(seen) :]:
            normalised = _message(message, self._ordinals)
            text = _canonical(normalised)
            # A handle in a string is a handle in its JSON too (escapes only put a letter or a backslash before
            # it): with none in the text, there is nothing to number, and the text stays as it is.
            if HANDLE_PATTERN.search(text):
                text = _canonical(_without_handles(normalised, self._handles))
            self._hash.update(_utf8(text if not seen else "," + text))
            seen.append(message)
        return self._hash.copy(), self._handles


_MESSAGES = '"messages":[]'
"""Where the messages go in the key's text (the first such text: only the chain, a list of names, comes before)."""


def request_key(
    messages: list[ModelMessage],
    params: ModelRequestParameters,
    chain: tuple[str, ...] | None = None,
    *,
    settings: Mapping[str, Any] | None = None,
    cache: KeyCache | None = None,
) -> RequestKey:
    """The key of a request made with `messages` and `params` (chain: the current run's when `None`);
    `settings` (the request's model settings), when not empty, are part of the key. With `cache` (the
    conversation's), only the messages it has not seen are hashed; without, all are."""
    if chain is None:
        chain = current_chain()
    tools = sorted(tool.name for tool in (*params.function_tools, *params.output_tools))
    payload: dict[str, Any] = {"chain": list(chain), "tools": tools, "messages": []}
    if params.native_tools:  # absent otherwise, so the keys of requests without native tools stay as they were
        payload["native_tools"] = sorted(tool.unique_id for tool in params.native_tools)
    if settings:
        payload["settings"] = _jsonable(dict(settings))
    head, _, tail = _canonical(payload).partition(_MESSAGES)
    hashed, found = (cache or KeyCache()).extended(head + _MESSAGES[:-1], messages)
    hashed.update(_utf8("]" + tail))
    digest = hashed.hexdigest()
    handles = dict(found)
    return RequestKey(
        key=digest,
        chain=chain,
        request_index=sum(isinstance(message, ModelResponse) for message in messages),
        prompt=_latest_prompt(messages),
        asked=_asked(messages),
        handles=tuple(handles),
        attachments=_attachments(messages),
    )


def _without_handles(value: Any, handles: dict[str, str]) -> Any:
    """`value` with each handle in its strings replaced by its placeholder, numbered in `handles`."""
    if isinstance(value, str):
        return HANDLE_PATTERN.sub(lambda match: _placeholder(handles, match.group(0)), value)
    if isinstance(value, list):
        return [_without_handles(item, handles) for item in value]
    if isinstance(value, dict):  # in the canonical (sorted) order, so numbering never depends on insertion
        return {key: _without_handles(value[key], handles) for key in sorted(value, key=str)}
    return value


def _placeholder(handles: dict[str, str], handle: str) -> str:
    return handles.setdefault(handle, f"<handle#{len(handles) + 1}>")


def _utf8(text: str) -> bytes:
    return text.encode(errors="surrogatepass")  # a lone surrogate is text too


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)


def _ordinal(ordinals: dict[str, int], tool_call_id: str | None) -> int | None:
    if tool_call_id is None:
        return None
    return ordinals.setdefault(tool_call_id, len(ordinals))


def _jsonable(content: Any) -> Any:
    if isinstance(content, str | int | float | bool) or content is None:
        return content
    try:
        return json.loads(_canonical(content))
    except (TypeError, ValueError):  # pragma: no cover - default=repr makes everything dumpable
        return repr(content)


def _message(message: ModelMessage, ordinals: dict[str, int]) -> dict[str, Any]:
    if isinstance(message, ModelResponse):
        return _response(message, ordinals)
    return _request(message, ordinals)


def _response(message: ModelResponse, ordinals: dict[str, int]) -> dict[str, Any]:
    parts: list[Any] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            parts.append({"text": part.content})
        elif isinstance(part, ToolCallPart):
            n = _ordinal(ordinals, part.tool_call_id)
            parts.append({"call": part.tool_name, "args": part.args_as_dict(), "n": n})
        elif not isinstance(part, ThinkingPart):  # thinking is provider-specific, not what was asked
            parts.append({"kind": part.part_kind})
    return {"response": parts}


def _request(message: ModelRequest, ordinals: dict[str, int]) -> dict[str, Any]:
    plain: list[Any] = []
    returns: list[tuple[int, dict[str, Any]]] = []
    for part in message.parts:
        if isinstance(part, UserPromptPart):
            plain.append({"user": _user_content(part.content)})
        elif isinstance(part, SystemPromptPart):
            plain.append({"system": part.content})
        elif isinstance(part, ToolReturnPart):
            n = _ordinal(ordinals, part.tool_call_id)
            returns.append((n or 0, {"return": part.tool_name, "content": part.model_response_str(), "n": n}))
        elif isinstance(part, RetryPromptPart):
            n = _ordinal(ordinals, part.tool_call_id)
            returns.append((n or 0, {"retry": part.tool_name, "content": part.model_response(), "n": n}))
        else:
            plain.append({"kind": part.part_kind})
    returns.sort(key=lambda item: item[0])
    return {
        "request": [*plain, *(item for _, item in returns)],
        "instructions": getattr(message, "instructions", None),
    }


def _user_content(content: Any) -> Any:
    """A prompt as the key sees it: files by media type, size and digest, never their bytes."""
    if isinstance(content, str):
        return content
    if isinstance(content, list | tuple):
        return [_user_item(item) for item in content]
    return _jsonable(content)


def _user_item(item: Any) -> Any:
    if isinstance(item, str):
        return item
    if isinstance(item, TextContent) and isinstance(item.metadata, dict) and METADATA_KEY in item.metadata:
        return {"attachment": item.metadata[METADATA_KEY]}  # its digest stands for its text
    if isinstance(item, BinaryContent):
        return {"file": item.media_type, "size": len(item.data), "sha256": hashlib.sha256(item.data).hexdigest()}
    return _jsonable(item)


def _attachments(messages: list[ModelMessage]) -> tuple[AttachmentInfo, ...]:
    """The attachments of the conversation's prompts, from the descriptions that introduce them."""
    return tuple(
        AttachmentInfo(**item.metadata[METADATA_KEY])
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and not isinstance(part.content, str)
        for item in part.content
        if isinstance(item, TextContent) and isinstance(item.metadata, dict) and METADATA_KEY in item.metadata
    )


def _latest_prompt(messages: list[ModelMessage]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart):
                    return _prompt_text(part.content)
    return None


def _prompt_text(content: Any) -> str:
    """A prompt's text: its text items, without the attachments (which a recording knows by digest)."""
    if isinstance(content, str):
        return content
    texts = [item for item in content if isinstance(item, str)]
    return "\n\n".join(texts) if texts else _canonical([_user_item(item) for item in content])


def changed_tools(messages: list[ModelMessage], recorded_asked: str | None) -> tuple[str, ...]:
    """The tools whose results, carried by the request `messages` ends with, are not shown in what the recorded
    request asked (`RequestKey.asked`): those whose result changed since it was recorded, as far as `asked` shows."""
    if recorded_asked is None:
        return ()
    return tuple(dict.fromkeys(name for name, shown in _returns(messages) if shown not in recorded_asked))


def _returns(messages: list[ModelMessage]) -> list[tuple[str, str]]:
    """(tool name, `name -> result` as `asked` shows it) of each tool return the last request carries."""
    last = messages[-1] if messages else None
    if not isinstance(last, ModelRequest):
        return []
    return [
        (str(part.tool_name), f"{part.tool_name} -> {shortened(part.content, _SHOWN, one_line=True)}")
        for part in last.parts
        if isinstance(part, ToolReturnPart | RetryPromptPart)
    ]


def _asked(messages: list[ModelMessage]) -> str:
    last = messages[-1] if messages else None
    if isinstance(last, ModelRequest):
        returns = [shown for _, shown in _returns(messages)]
        if returns:
            return shortened("tool returns: " + "; ".join(returns), _SHOWN, one_line=True)
    prompt = _latest_prompt(messages)
    return "prompt " + repr(shortened(prompt, _SHOWN, one_line=True)) if prompt is not None else "(no prompt)"
