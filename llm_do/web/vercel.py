"""A live run in the browser: its events as the Vercel AI data-stream protocol (AI SDK UI v6).

pydantic-ai's own encoder (`pydantic_ai.ui.vercel_ai.VercelAIEventStream`) encodes the top-level
call's events: text, reasoning, tool calls and their results. llm-do adds what that encoder has no
event for, in the same stream:

- every call of the run as a data part `data-llm-do-call` (id: the call's id; sent when the call
  starts and again, with the same id, when it ends), so a page can draw the call tree;
- a child call's tool calls as the protocol's tool parts, dynamic and `providerExecuted` (the run executed
  them, not the page, and they are not the top-level model's), tagged with their call in
  `providerMetadata.llm_do` (`call`, `entry`, `parent_tool_call_id`), each child call in a step of its own;
  and as data parts `data-llm-do-tool` (id: the tool call's id);
- a pending approval as the protocol's `tool-approval-request` (id: the `approval_id`), and a data part
  `data-llm-do-approval` (its description, and later its decision).

A data part sent again under its id carries all of its fields, the new ones merged in: the AI SDK
replaces a data part by the one that comes later under the same type and id.

The answer goes back through a plain POST (a live run keeps running while it waits);
`decision_of` reads both llm-do's shape and the AI SDK's approval response. `sse_response` wraps
an encoded stream for Starlette or FastAPI, importing Starlette only when called.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, cast

from pydantic_ai.messages import FunctionToolCallEvent, FunctionToolResultEvent, ToolReturnPart
from pydantic_ai.ui.vercel_ai import VercelAIEventStream
from pydantic_ai.ui.vercel_ai.response_types import (
    BaseChunk,
    DataChunk,
    StartStepChunk,
    ToolApprovalRequestChunk,
    ToolInputAvailableChunk,
    ToolOutputAvailableChunk,
    ToolOutputDeniedChunk,
    ToolOutputErrorChunk,
)

from .. import ApprovalRequest
from ..approvals import CHOICES, RunSuspended
from ..errors import LlmDoError
from ..events import (
    ApprovalDecided,
    ApprovalRequested,
    CallEnded,
    CallEvent,
    CallStarted,
    CallTag,
    RunFailed,
    RunFinished,
    StreamEvent,
)
from ..results import usage_json

if TYPE_CHECKING:
    from pydantic_ai.ui import NativeEvent
    from starlette.responses import StreamingResponse

    from ..results import RunResult

__all__ = [
    "SSE_HEADERS",
    "RunStopped",
    "SdkVersion",
    "ToolApprovalResponseChunk",
    "decision_of",
    "sse_response",
    "vercel_chunks",
    "vercel_sse",
]

logger = logging.getLogger("llm_do")

SDK_VERSION: Final[Literal[6]] = 6
"""The AI SDK UI version the stream is written for by default: tool approvals need 6 (7 reads the same stream)."""

SdkVersion = Literal[6, 7]
"""6: the stream every AI SDK from 6 on reads. 7 adds a `tool-approval-response` chunk for each decision, which 6
cannot read (it refuses a chunk it does not know)."""

SSE_HEADERS = {"x-vercel-ai-ui-message-stream": "v1", "cache-control": "no-cache", "x-accel-buffering": "no"}
"""Headers of the response: the protocol's marker, and no caching or proxy buffering of the stream."""


class RunStopped(LlmDoError):
    """The run was cancelled before it ended, or failed (the stream then ends with the protocol's `error` chunk,
    which names the exception's type: its message, which can hold a server's secrets, goes to the log)."""


class ToolApprovalResponseChunk(BaseChunk):
    """A question answered, whoever answered it (AI SDK 7's chunk, which pydantic-ai does not have yet): the SDK
    marks its tool part `approval-responded` with the answer, as `addToolApprovalResponse` does."""

    type: Literal["tool-approval-response"] = "tool-approval-response"
    approval_id: str
    approved: bool
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class _Chunks:
    """Protocol chunks of llm-do's own, carried to the encoder among pydantic-ai's events."""

    chunks: tuple[BaseChunk, ...]


class _Encoder(VercelAIEventStream[Any, Any]):
    async def handle_event(self, event: NativeEvent) -> AsyncIterator[BaseChunk]:
        if isinstance(event, _Chunks):
            for chunk in event.chunks:
                yield chunk
            return
        async for chunk in super().handle_event(event):
            yield chunk


class _Parts:
    """The data parts of one type still to be updated, each as last sent: an update carries every field."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.sent: dict[str, dict[str, Any]] = {}

    def part(self, part_id: str, data: dict[str, Any], *, last: bool = False) -> DataChunk:
        """The part `part_id` with `data` merged into what it had; `last`: it is not updated again."""
        earlier = self.sent.pop(part_id, None) if last else self.sent.get(part_id)
        merged = {**(earlier or {}), **data}
        if not last:
            self.sent[part_id] = merged
        return DataChunk(type=self.kind, id=part_id, data=merged)


def _call_data(tag: CallTag, state: str) -> dict[str, Any]:
    return {
        "id": tag.id,
        "parent": tag.parent,
        "entry": tag.entry,
        "depth": tag.depth,
        "tool_call_id": tag.tool_call_id,
        "state": state,
    }


def _child_tool_input(tag: CallTag, tool_call_id: str, tool: str, args: dict[str, Any]) -> ToolInputAvailableChunk:
    """A child call's tool call as the protocol's tool part: executed by the run (`providerExecuted`), tagged with
    its call, so that the AI SDK's `convertToModelMessages` does not take it for a call of the top-level model."""
    tagged: dict[str, Any] = {"call": tag.id, "entry": tag.entry, "parent_tool_call_id": tag.tool_call_id}
    return ToolInputAvailableChunk(
        tool_call_id=tool_call_id,
        tool_name=tool,
        input=args,
        dynamic=True,
        provider_executed=True,
        provider_metadata={"llm_do": tagged},
    )


def _tool_result(tools: _Parts, part: ToolReturnPart, announced: bool) -> list[BaseChunk]:
    """The result of a child call's tool call: its data part, and its protocol chunk if it was announced."""
    state = {"success": "done", "denied": "denied"}.get(part.outcome, "failed")
    data = {"tool_call_id": part.tool_call_id, "tool": part.tool_name, "state": state, "result": part.content}
    chunks: list[BaseChunk] = [tools.part(part.tool_call_id, data, last=True)]
    if announced:
        tool_call_id = part.tool_call_id
        if state == "denied":
            chunks.append(ToolOutputDeniedChunk(tool_call_id=tool_call_id))
        elif state == "failed":
            error_text = part.model_response_str()
            chunks.append(
                ToolOutputErrorChunk(
                    tool_call_id=tool_call_id, error_text=error_text, dynamic=True, provider_executed=True
                )
            )
        else:
            chunks.append(
                ToolOutputAvailableChunk(
                    tool_call_id=tool_call_id, output=part.content, dynamic=True, provider_executed=True
                )
            )
    return chunks


class _Translator:
    """What each event of the live run becomes: pydantic-ai's own event (top-level call) or our chunks."""

    def __init__(self, sdk_version: SdkVersion = SDK_VERSION) -> None:
        self.sdk_version = sdk_version
        self.asked: set[str] = set()
        """The approval ids announced with `tool-approval-request`."""
        self.top_level_tool_calls: set[str] = set()
        """Tool calls of the top-level call: pydantic-ai's encoder announced them."""
        self.announced: set[str] = set()
        """Child calls' tool calls announced in the protocol."""
        self.calls = _Parts("data-llm-do-call")
        self.tools = _Parts("data-llm-do-tool")
        self.approvals = _Parts("data-llm-do-approval")

    def translate(self, event: StreamEvent) -> NativeEvent | _Chunks | None:
        kind = type(event)
        if kind is CallEvent:
            return self._call_event(cast(CallEvent, event))
        if kind is CallStarted:
            started = cast(CallStarted, event)
            data = {**_call_data(started.call, "running"), "toolsets": list(started.toolsets)}
            if started.attachments:
                data["attachments"] = [info.to_json() for info in started.attachments]
            if started.call.parent is None:
                return _Chunks((self.calls.part(started.call.id, data),))
            # a child call's tool parts in a step of their own: the AI SDK checks that a step's tool calls are
            # all answered before it sends approvals back, and the parent's tool call runs until the child ends
            return _Chunks((StartStepChunk(), self.calls.part(started.call.id, data)))
        if kind is CallEnded:
            ended = cast(CallEnded, event)
            error = None if ended.error is None else type(ended.error).__name__  # the message is for the log
            data = {**_call_data(ended.call, str(ended.outcome)), "usage": usage_json(ended.usage), "error": error}
            return _Chunks((self.calls.part(ended.call.id, data, last=True),))
        if kind is ApprovalRequested:
            return _Chunks(tuple(self._approval(cast(ApprovalRequested, event))))
        if kind is ApprovalDecided:
            decided = cast(ApprovalDecided, event)
            approval_id = decided.request.approval_id
            if isinstance(decided.error, RunSuspended):  # left open elsewhere: the run's last part says where
                return _Chunks((self.approvals.part(approval_id, {"state": "parked"}),))
            state = "approved" if decided.approved else "denied"
            data = {"approval_id": approval_id, "approved": decided.approved, "why": decided.why, "state": state}
            chunks: tuple[BaseChunk, ...] = (self.approvals.part(approval_id, data, last=True),)
            if self.sdk_version >= 7 and approval_id in self.asked:  # a question nobody was asked has no tool part
                answer = ToolApprovalResponseChunk(
                    approval_id=approval_id, approved=decided.approved, reason=decided.why
                )
                chunks = (answer, *chunks)
            return _Chunks(chunks)
        return None  # handles, completed responses: not part of the page's protocol

    def _call_event(self, event: CallEvent) -> NativeEvent | _Chunks | None:
        native = event.event
        if event.call.parent is None:
            if isinstance(native, FunctionToolCallEvent):
                self.top_level_tool_calls.add(native.part.tool_call_id)
            return native
        if isinstance(native, FunctionToolCallEvent):
            part = native.part
            args = part.args_as_dict()
            data = {
                "tool_call_id": part.tool_call_id,
                "tool": part.tool_name,
                "call": event.call.id,
                "args": args,
                "state": "running",
            }
            self.announced.add(part.tool_call_id)
            tool_input = _child_tool_input(event.call, part.tool_call_id, part.tool_name, args)
            return _Chunks((tool_input, self.tools.part(part.tool_call_id, data)))
        if isinstance(native, FunctionToolResultEvent) and isinstance(native.part, ToolReturnPart):
            announced = native.part.tool_call_id in self.announced
            return _Chunks(tuple(_tool_result(self.tools, native.part, announced)))
        return None  # a child's text and tool-call deltas: its result reaches the parent as a tool result

    def suspended(self, error: RunSuspended) -> tuple[BaseChunk, ...]:
        """The run ended with its questions left open elsewhere (`llm_do.jobs.LiveRunParked`: a job, answered with
        the jobs' decisions): each question's data part says `parked`, and one `data-llm-do-parked` part says
        where they wait."""
        job_id = getattr(error, "job_id", None)
        questions: tuple[ApprovalRequest, ...] = tuple(getattr(error, "questions", ()))
        chunks: list[BaseChunk] = [
            self.approvals.part(question.approval_id, {"state": "parked", "job_id": job_id}, last=True)
            for question in questions
        ]
        data = {
            "job_id": job_id,
            "session_id": getattr(error, "session_id", None),
            "approval_ids": [question.approval_id for question in questions],
            "message": str(error),
        }
        chunks.append(DataChunk(type="data-llm-do-parked", id=f"parked_{job_id}", data=data))
        return tuple(chunks)

    def _approval(self, event: ApprovalRequested) -> list[BaseChunk]:
        request = event.request
        tool_call_id = request.tool_call_id or request.approval_id
        chunks: list[BaseChunk] = []
        if tool_call_id not in self.top_level_tool_calls and tool_call_id not in self.announced:
            self.announced.add(tool_call_id)  # asked without its tool call's event (an approver called directly)
            chunks.append(
                ToolInputAvailableChunk(
                    tool_call_id=tool_call_id, tool_name=request.tool, input=dict(request.args), dynamic=True
                )
            )
        chunks.append(ToolApprovalRequestChunk(approval_id=request.approval_id, tool_call_id=tool_call_id))
        self.asked.add(request.approval_id)
        data: dict[str, Any] = {
            "approval_id": request.approval_id,
            "tool_call_id": tool_call_id,
            "call": request.call_id,
            "entry": request.entry,
            "toolset": request.toolset,
            "tool": request.tool,
            "args": dict(request.args),
            "description": request.description,
            "state": "pending",
        }
        if request.attachments:  # what the call hands over: name, media type, size and digest, never the bytes
            data["attachments"] = [info.to_json() for info in request.attachments]
        chunks.append(self.approvals.part(request.approval_id, data))
        return chunks


async def _native(
    events: AsyncIterable[StreamEvent],
    on_result: Callable[[RunResult], Awaitable[None]] | None,
    sdk_version: SdkVersion = SDK_VERSION,
) -> AsyncIterator[NativeEvent]:
    translator = _Translator(sdk_version)
    async for event in events:
        if isinstance(event, RunFinished):
            if on_result is not None:
                await on_result(event.result)
            return
        if isinstance(event, RunFailed):
            error = event.error
            if isinstance(error, RunSuspended):  # its questions wait elsewhere (a parked job): a whole stream
                yield cast("NativeEvent", _Chunks(translator.suspended(error)))
                return
            if isinstance(error, Exception):
                logger.error("a run streamed to a page failed", exc_info=error)
                raise RunStopped(f"the run failed ({type(error).__name__}); the server's log has the details")
            raise RunStopped(f"the run was stopped ({type(error).__name__})")
        translated = translator.translate(event)
        if translated is not None:
            yield cast("NativeEvent", translated)


def vercel_chunks(
    events: AsyncIterable[StreamEvent],
    *,
    on_result: Callable[[RunResult], Awaitable[None]] | None = None,
    message_id: str | None = None,
    sdk_version: SdkVersion = SDK_VERSION,
) -> AsyncIterator[BaseChunk]:
    """The Vercel AI data-stream chunks of a live run's events (`async for event in run`).

    `on_result` is awaited with the run's result before the stream's closing chunks (save the
    conversation there, so the page's next message sees it). A failed run ends with an `error`
    chunk that names the exception. The `start` chunk carries `message_id`, by default the live run's
    `message_id` (the same for every consumer of a resumable run, so that a page that reconnects finds
    the message it was showing). `sdk_version=7` adds AI SDK 7's `tool-approval-response` for each question
    answered, wherever the answer came from (AI SDK 6 refuses that chunk).
    """
    encoder = _Encoder(sdk_version=sdk_version, server_message_id=message_id or getattr(events, "message_id", None))
    return encoder.transform_stream(_native(events, on_result, sdk_version))


async def vercel_sse(
    events: AsyncIterable[StreamEvent],
    *,
    on_result: Callable[[RunResult], Awaitable[None]] | None = None,
    message_id: str | None = None,
    sdk_version: SdkVersion = SDK_VERSION,
) -> AsyncIterator[str]:
    """`vercel_chunks` encoded as server-sent events (`data: {...}`), ending with `data: [DONE]`."""
    encoder = _Encoder(sdk_version=sdk_version, server_message_id=message_id or getattr(events, "message_id", None))
    async for chunk in encoder.transform_stream(_native(events, on_result, sdk_version)):
        yield encoder.encode_event(chunk)


def sse_response(body: AsyncIterable[str]) -> StreamingResponse:
    """A Starlette (FastAPI) response streaming `body` (from `vercel_sse`) with the protocol's headers."""
    from starlette.responses import StreamingResponse

    return StreamingResponse(body, media_type="text/event-stream", headers=SSE_HEADERS)


def decision_of(body: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """`(approval_id, choice, note)` from a decision's JSON body.

    Accepts llm-do's `{"approval_id", "choice", "note"}` (choice: approve, approve_for_session,
    deny) and the AI SDK's approval response `{"id", "approved", "reason"}`.
    """
    if "approval_id" in body:
        approval_id, choice, note = body.get("approval_id"), body.get("choice"), body.get("note")
    elif "id" in body and isinstance(body.get("approved"), bool):
        approval_id, note = body.get("id"), body.get("reason")
        choice = "approve" if body["approved"] else "deny"
    else:
        raise LlmDoError(
            'a decision is {"approval_id": ..., "choice": "approve" | "approve_for_session" | "deny", "note": ...}'
            ' or {"id": ..., "approved": true | false, "reason": ...}'
        )
    if not isinstance(approval_id, str) or not approval_id:
        raise LlmDoError(f"a decision needs the approval's id as a string, got {approval_id!r}")
    if choice not in CHOICES:
        raise LlmDoError(f"decision {choice!r} for {approval_id!r}: choose one of {', '.join(CHOICES)}")
    if note is not None and not isinstance(note, str):
        raise LlmDoError(f"the note of the decision on {approval_id!r} must be a string, got {type(note).__name__}")
    return approval_id, str(choice), note
