"""The recording file: model responses keyed by request, as versioned, human-readable JSON.

```json
{"version": 1, "responses": [{"key": "...", "entry": "clerk", "chain": ["clerk"], "request_index": 0,
  "prompt": "...", "asked": "...", "response": {"parts": [...], "usage": {...}, ...}}]}
```

An entry with a `key` answers exactly that request (see `llm_do.models.keys`). An entry without one
is a script step: it answers any request whose entry, latest prompt and request index match the
fields it sets (a missing field matches anything); the most specific step wins, then the first.

An entry's `attachments` lists the files the request carried: name, media type, size and SHA-256
digest, never their bytes. A keyed entry's digests are part of its key; a script step that lists
attachments answers only a request carrying files with the same names and digests.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeAlias

from pydantic import TypeAdapter, ValidationError
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_core import PydanticSerializationError

from .. import AttachmentInfo
from .keys import RequestKey

__all__ = ["FORMAT_VERSION", "RecordedResponse", "Recording", "RecordingError", "ScriptStep"]

FORMAT_VERSION = 1

ScriptStep: TypeAlias = "str | ToolCallPart | Sequence[ToolCallPart] | ModelResponse"
"""A final text, one tool call, several parallel tool calls, or a whole response."""


class RecordingError(ValueError):
    """A recording file that cannot be read: not JSON, another format version, or a malformed entry."""


@dataclass(frozen=True, slots=True)
class RecordedResponse:
    """One answer in a recording, and the request it answers."""

    response: ModelResponse
    key: str | None = None
    """The exact request this answers; `None` for a script step matched by the fields below."""
    entry: str | None = None
    prompt: str | None = None
    request_index: int | None = None
    chain: tuple[str, ...] = ()
    """Informational: the entry chain that asked."""
    asked: str | None = None
    """Informational: what the request asked, shortened."""
    handles: tuple[str, ...] = ()
    """The handles of the request this answers, in order of first appearance; replay maps them to the live ones."""
    attachments: tuple[AttachmentInfo, ...] = ()
    """The files the request carried (digests, not bytes); a script step with some answers only those files."""

    @classmethod
    def answering(cls, request: RequestKey, response: ModelResponse) -> RecordedResponse:
        """`response` recorded as the answer to exactly `request` (keyed by its key)."""
        return cls(
            _stored(response),
            key=request.key,
            entry=request.entry,
            prompt=request.prompt,
            request_index=request.request_index,
            chain=request.chain,
            asked=request.asked,
            handles=request.handles,
            attachments=request.attachments,
        )

    def specificity(self, request: RequestKey) -> int | None:
        """How closely this answers `request` (higher is closer), or `None` when it does not."""
        if self.key is not None:
            return 5 if self.key == request.key else None
        checks = (
            (self.entry, request.entry),
            (self.prompt, request.prompt),
            (self.request_index, request.request_index),
        )
        if any(want is not None and want != have for want, have in checks):
            return None
        if self.attachments and _digests(self.attachments) != _digests(request.attachments):
            return None
        return sum(want is not None for want, _ in checks) + bool(self.attachments)

    def differs_only_in_attachments(self, request: RequestKey) -> bool:
        """Whether this answers the same place in the conversation as `request`, with other files."""
        if not self.attachments or _digests(self.attachments) == _digests(request.attachments):
            return False
        if self.key is not None:
            return (self.chain, self.request_index, self.prompt) == (
                request.chain,
                request.request_index,
                request.prompt,
            )
        return all(
            want is None or want == have for want, have in ((self.entry, request.entry), (self.prompt, request.prompt))
        ) and self.request_index in (None, request.request_index)

    def to_json(self) -> dict[str, Any]:
        data = self._described()
        data["response"] = _responses().dump_python(self.response, mode="json")
        return data

    def to_json_text(self) -> str:
        """`to_json()` as JSON text; the response is serialised by pydantic straight to JSON (the same data in
        less time), unless it holds what UTF-8 cannot encode (a lone surrogate), which JSON escapes."""
        try:
            response = _responses().dump_json(self.response).decode()
        except PydanticSerializationError:
            return json.dumps(self.to_json())
        described = json.dumps(self._described())
        return f'{described[:-1]}{", " if len(described) > 2 else ""}"response": {response}}}'

    def _described(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.key is not None:
            data["key"] = self.key
        for name in ("entry", "prompt", "request_index", "asked"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        if self.chain:
            data["chain"] = list(self.chain)
        if self.handles:
            data["handles"] = list(self.handles)
        if self.attachments:
            data["attachments"] = [info.to_json() for info in self.attachments]
        return data

    @classmethod
    def from_json(cls, data: Any, where: str) -> RecordedResponse:
        if not isinstance(data, dict) or "response" not in data:
            raise RecordingError(f"{where}: each entry of 'responses' needs a 'response' object, got {data!r:.200}")
        try:
            response = _responses().validate_python({**data["response"], "kind": "response"})
        except TypeError as error:
            raise RecordingError(f"{where}: not a model response: {error}") from None
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(map(str, ('response', *item['loc'])))}: {item['msg']}" for item in error.errors()
            )
            raise RecordingError(f"{where}: not a model response: {problems}") from None
        unknown = [name for name in data if name not in _FIELDS]
        if unknown:
            raise RecordingError(
                f"{where}: unknown field {unknown[0]!r} (an entry has: {', '.join(_FIELDS)}); a step matches "
                "any request on a field it does not set, so correct or remove it"
            )
        index = data.get("request_index")
        if index is not None and (not isinstance(index, int) or isinstance(index, bool) or index < 0):
            raise RecordingError(
                f"{where}: 'request_index' must be a whole number from 0, got {index!r:.100} "
                "(0 answers the first request of an agent run, 1 the one after the first tool results)"
            )
        return cls(
            response=response,
            key=_optional_str(data, "key", where),
            entry=_optional_str(data, "entry", where),
            prompt=_optional_str(data, "prompt", where),
            request_index=index,
            chain=tuple(str(name) for name in data.get("chain") or ()),
            asked=_optional_str(data, "asked", where),
            handles=_handles(data, where),
            attachments=_attachments(data, where),
        )


_FIELDS = ("response", "entry", "request_index", "prompt", "key", "chain", "asked", "handles", "attachments")
"""The fields of an entry of `responses`."""


def _digests(attachments: tuple[AttachmentInfo, ...]) -> list[tuple[str, str]]:
    return [(info.name, info.sha256) for info in attachments]


def _attachments(data: dict[str, Any], where: str) -> tuple[AttachmentInfo, ...]:
    value = data.get("attachments") or []
    try:
        return tuple(
            AttachmentInfo(str(item["name"]), str(item["media_type"]), int(item["size"]), str(item["sha256"]))
            for item in value
        )
    except (TypeError, KeyError, ValueError):
        raise RecordingError(
            f"{where}: 'attachments' must be a list of {{name, media_type, size, sha256}} objects, got {value!r:.100}"
        ) from None


@functools.cache
def _responses() -> TypeAdapter[ModelResponse]:
    """Reads and writes a response alone: its schema is built in a fraction of the time of all messages', and it
    dumps one in about two thirds of the time (the same JSON)."""
    return TypeAdapter(ModelResponse)


def _handles(data: dict[str, Any], where: str) -> tuple[str, ...]:
    value = data.get("handles") or []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise RecordingError(f"{where}: 'handles' must be a list of handle strings, got {value!r:.100}")
    return tuple(value)


def _optional_str(data: dict[str, Any], name: str, where: str) -> str | None:
    value = data.get(name)
    if value is not None and not isinstance(value, str):
        raise RecordingError(f"{where}: {name!r} must be a string, got {value!r:.100}")
    return value


def _response_of(step: ScriptStep) -> ModelResponse:
    if isinstance(step, ModelResponse):
        return step
    if isinstance(step, str):
        return ModelResponse(parts=[TextPart(step)])
    if isinstance(step, ToolCallPart):
        return ModelResponse(parts=[step])
    calls = list(step)
    if not calls or not all(isinstance(part, ToolCallPart) for part in calls):
        raise TypeError(f"a script step is a text, a ToolCallPart, ToolCallParts or a ModelResponse, got {step!r}")
    return ModelResponse(parts=calls)


def _stored(response: ModelResponse) -> ModelResponse:
    """The response as a recording keeps it: without what replay does not need and a shared file should not hold,
    the endpoint's address (`provider_url`: an internal gateway, a token in a URL), the provider's id of the response
    and its raw vendor data (`provider_details`)."""
    if response.provider_url is None and response.provider_response_id is None and response.provider_details is None:
        return response
    return replace(response, provider_url=None, provider_response_id=None, provider_details=None)


class Recording:
    """Model responses keyed by request; `load` and `save` read and write the JSON file."""

    def __init__(self, responses: Iterable[RecordedResponse] = ()) -> None:
        self.responses: list[RecordedResponse] = list(responses)

    def __len__(self) -> int:
        return len(self.responses)

    def __repr__(self) -> str:
        return f"Recording({len(self.responses)} responses)"

    # building

    @classmethod
    def from_script(
        cls,
        steps: Iterable[ScriptStep],
        *,
        entry: str | None = None,
        prompt: str | None = None,
        attachments: Iterable[AttachmentInfo] = (),
    ) -> Recording:
        """A recording whose step i answers request i of an agent run (of `entry`, with `prompt`, carrying
        `attachments`, when given)."""
        return cls().add_script(steps, entry=entry, prompt=prompt, attachments=attachments)

    def add_script(
        self,
        steps: Iterable[ScriptStep],
        *,
        entry: str | None = None,
        prompt: str | None = None,
        attachments: Iterable[AttachmentInfo] = (),
    ) -> Recording:
        """Add script steps (see `from_script`); returns `self`. With `attachments`, the steps answer only a
        conversation carrying those files (same names and digests)."""
        files = tuple(attachments)
        for index, step in enumerate(steps):
            self.responses.append(
                RecordedResponse(
                    _stored(_response_of(step)), entry=entry, prompt=prompt, request_index=index, attachments=files
                )
            )
        return self

    def record(self, request: RequestKey, response: ModelResponse) -> RecordedResponse | None:
        """Keep `response` as the answer to `request`, unless this recording already answers that request: the
        earlier answer stays (the one replay gives every time the request is asked) and is returned."""
        earlier = next((item for item in self.responses if item.key == request.key), None)
        if earlier is None:
            self.responses.append(RecordedResponse.answering(request, response))
        return earlier

    def merged_into(self, older: Recording) -> Recording:
        """`older` with this recording's entries added; an entry of this one wins for the same key."""
        keys = {item.key for item in self.responses if item.key is not None}
        kept = [item for item in older.responses if item.key is None or item.key not in keys]
        return Recording([*kept, *self.responses])

    # answering

    def find(self, request: RequestKey) -> RecordedResponse | None:
        """The closest answer to `request`: its exact key, else the most specific matching script step."""
        best: RecordedResponse | None = None
        best_score = -1
        for item in self.responses:
            score = item.specificity(request)
            if score is not None and score > best_score:
                best, best_score = item, score
        return best

    # the file

    def to_json(self) -> dict[str, Any]:
        """The file's content. Recorded entries are sorted (by chain, request index, key) so files diff well."""
        keyed = sorted(
            (item for item in self.responses if item.key is not None),
            key=lambda item: (item.chain, item.request_index or 0, item.key or ""),
        )
        scripted = [item for item in self.responses if item.key is None]
        return {"version": FORMAT_VERSION, "responses": [item.to_json() for item in (*scripted, *keyed)]}

    @classmethod
    def from_json(cls, data: Any, where: str = "recording") -> Recording:
        if not isinstance(data, dict) or "version" not in data:
            raise RecordingError(
                f"{where}: not an llm-do recording (expected an object with 'version' and 'responses')"
            )
        if data["version"] != FORMAT_VERSION:
            raise RecordingError(
                f"{where}: recording format version {data['version']!r} is not supported (this llm-do reads "
                f"version {FORMAT_VERSION}); re-record it with RecordingModel"
            )
        responses = data.get("responses")
        if not isinstance(responses, list):
            raise RecordingError(f"{where}: 'responses' must be a list")
        return cls(RecordedResponse.from_json(item, f"{where}: responses[{i}]") for i, item in enumerate(responses))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Recording:
        """Read a recording file; raises `RecordingError` when it is not a readable recording."""
        where = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise RecordingError(f"{where}: no such recording; record one with RecordingModel") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise RecordingError(f"{where}: not JSON ({error})") from None
        return cls.from_json(data, where)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the file atomically: a temporary file in the same directory, then a rename."""
        target = Path(path)
        try:
            content = (json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n").encode()
        except UnicodeEncodeError:  # a lone surrogate somewhere: JSON escapes it
            content = (json.dumps(self.to_json(), indent=2) + "\n").encode()
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(content)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
