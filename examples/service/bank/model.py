"""A scripted stand-in for an LLM, so the service runs offline: it reads the transfer request
(JSON, the run's prompt) and calls the tools an LLM would: begin, transfer, commit, then answers.

When a tool fails because the database went away (a failed tool result), the teller begins again
once if the message says to, then gives up and says why.

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


MAX_ATTEMPTS = 2
"""Transactions the teller opens for one request: after a database fault it begins once more."""


def _attempts(messages: list[ModelMessage]) -> tuple[dict[str, Any], list[str]]:
    """What each tool returned in the current attempt (by tool name), and the failures so far.

    A failed tool result (`outcome='failed'`: the database went away under the tool) ends an attempt.
    """
    done: dict[str, Any] = {}
    failures: list[str] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    if part.outcome == "success":
                        done[part.tool_name] = part.content
                    else:
                        failures.append(part.model_response_str())
                        done = {}
    return done, failures


async def teller(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    request = _request(messages)
    done, failures = _attempts(messages)
    if failures and not done and (len(failures) >= MAX_ATTEMPTS or "call begin" not in failures[-1]):
        return ModelResponse(parts=[TextPart(f"I could not make the transfer: {failures[-1]}")])
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
