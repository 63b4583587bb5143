"""A scripted stand-in for an LLM, so the service runs offline: it reads the transfer request
(JSON, the run's prompt) and calls the tools an LLM would: begin, transfer, commit, then answers.

A request with `"forget_commit": true` makes it "forget" to commit, as a real model might; the
runtime then rolls the transaction back when the call ends.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

__all__ = ["TransferRequest", "teller_model"]


class TransferRequest(BaseModel):
    """The body of `POST /transfer`, and the prompt the teller reads."""

    reference: str = Field(min_length=1, max_length=64, description="the caller's payment reference")
    source: str
    target: str
    amount: int = Field(gt=0)
    forget_commit: bool = False
    """Make the scripted teller forget to commit (to show the rollback)."""


def _request(messages: list[ModelMessage]) -> TransferRequest:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return TransferRequest.model_validate_json(part.content)
    raise ValueError("the teller's prompt is not a transfer request")


def _returned(messages: list[ModelMessage]) -> dict[str, Any]:
    """What each tool last returned in the conversation, by tool name."""
    found: dict[str, Any] = {}
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    found[part.tool_name] = part.content
    return found


def teller(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    request = _request(messages)
    done = _returned(messages)
    if "begin" not in done:
        return ModelResponse(parts=[ToolCallPart("begin", {})])
    txn = done["begin"]
    if "transfer" not in done:
        args = {
            "txn": txn,
            "source": request.source,
            "target": request.target,
            "amount": request.amount,
            "reference": request.reference,
        }
        return ModelResponse(parts=[ToolCallPart("transfer", args)])
    if "commit" not in done and not request.forget_commit:
        return ModelResponse(parts=[ToolCallPart("commit", {"txn": txn})])
    if request.forget_commit:
        return ModelResponse(parts=[TextPart(f"{done['transfer']}; I did not commit {txn}")])
    return ModelResponse(parts=[TextPart(f"{done['transfer'].removesuffix(' (not committed yet)')}: {done['commit']}")])


teller_model = FunctionModel(teller, model_name="scripted-teller")
