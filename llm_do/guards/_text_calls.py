"""Replies that are not what they seem: a tool call written as text or told in prose, an echoed prompt.

Small local models often write a tool call into their reply's text instead of calling the tool, tell the person
how to make the call, write a tool's result themselves, or give back a prompt or a message they were sent
(pydantic-ai's `Please return text or call a tool.`, llm-do's denial, retry or unknown-handle text) as their
answer. `suspicion` says why a final reply looks like that; `written_call` reads the one form that can safely be
run instead:

- the reply is one JSON object and nothing else, optionally in a Markdown code fence (```` ```json ````) or
  between `<tool_call>` and `</tool_call>` (Qwen's and Hermes' own format);
- its keys are `name` (or `function`) and, optionally, `arguments` (or `parameters`): a JSON object, or a
  string holding one; no other key;
- the name is one of the call's tools (or its output tool, `final_result`, when it has an output type);
- the reply is not something the model was sent: not a tool's result, not a prompt of the conversation.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, UserPromptPart

_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\n(?P<body>.*)\n```\Z", re.DOTALL)
_TAGGED = re.compile(r"\A<tool_call>\s*(?P<body>.*?)\s*</tool_call>\Z", re.DOTALL)
_MARKUP = re.compile(r"</?tool_call>|</?tools>|<function[=>]|<\|python_tag\|>|\[TOOL_CALLS\]")
_RESULT_MARKUP = re.compile(r"</?tool_response>|</?tool_result>")
_OWN = re.compile(
    r"The call to '[^'\n]{1,80}' was not run[^.\n]{0,120}"
    r"|Unknown handle '[^'\n]{1,80}': it is not open here"
    r"|Your reply was not used: [^.\n]{0,120}"
)
"""The heads of what llm-do itself tells a model: a denied or refused call (run/_gate.py, guards/_guard.py), an
unknown handle (toolkit/_handles.py), a reply sent back (guards/_guard.py `_steer`)."""
_TOLD_VERB = r"(?:call|calling|use|using|run|running|invoke|invoking|execute|executing)"
_NAME_KEYS = ("name", "function")
_ARGUMENT_KEYS = ("arguments", "parameters")


def _retry_prompts() -> frozenset[str]:
    """What pydantic-ai asks a model whose reply held nothing usable: `Please return text or call a tool.` and the
    other combinations of the same alternatives."""
    slots = (("return text",), ("include your response in a tool call", "call a tool"), ("return an image",))
    found = set()
    for chosen in itertools.product(*((None, *slot) for slot in slots)):
        picked = [item for item in chosen if item is not None]
        if picked:
            found.add(f"Please {' or '.join(picked)}.")
    return frozenset(found)


RETRY_PROMPTS = _retry_prompts()


def written_call(text: str, tools: Collection[str], sent: Collection[str] = ()) -> tuple[str, dict[str, Any]] | None:
    """The tool call `text` is, in the one form described above, as (name, arguments); else None. `sent` holds the
    texts the model was sent (`sent_texts`): a reply that repeats one of them is never a call."""
    body = text.strip()
    for form in (_FENCE, _TAGGED):
        found = form.match(body)
        if found is not None:
            body = found.group("body").strip()
            break
    if not body.startswith("{") or _repeats(text, body, sent):
        return None
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    names = [key for key in _NAME_KEYS if key in data]
    given = [key for key in _ARGUMENT_KEYS if key in data]
    if len(names) != 1 or len(given) > 1 or len(data) != len(names) + len(given):
        return None
    name = data[names[0]]
    if not isinstance(name, str) or name not in tools:
        return None
    arguments = data[given[0]] if given else {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    if not isinstance(arguments, dict):
        return None
    return name, arguments


def _repeats(text: str, body: str, sent: Collection[str]) -> bool:
    """Whether the reply gives back something the model was sent (in full, or as part of it)."""
    if not sent:
        return False
    canonical = _canonical(body)
    for item in sent:
        if text.strip() in item or body in item:
            return True
        if canonical is not None and canonical in _json_objects(item):
            return True
    return False


def _canonical(text: str) -> str | None:
    try:
        return json.dumps(json.loads(text), sort_keys=True)
    except json.JSONDecodeError:
        return None


def _json_objects(text: str) -> set[str]:
    """The JSON values in `text` (the whole of it, or each `{...}` that parses), canonical."""
    found = set()
    whole = _canonical(text)
    if whole is not None:
        found.add(whole)
    decoder = json.JSONDecoder()
    for start in (match.start() for match in re.finditer(r"\{", text)):
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        found.add(json.dumps(value, sort_keys=True))
    return found


def sent_texts(messages: Sequence[ModelMessage]) -> list[str]:
    """The texts the model was sent: prompts, tool results and retry prompts, as it read them."""
    found: list[str] = []
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                if isinstance(part.content, str):
                    found.append(part.content)
                else:
                    found.extend(item for item in part.content if isinstance(item, str))
            elif hasattr(part, "model_response_str"):
                found.append(part.model_response_str())
            elif hasattr(part, "model_response"):
                found.append(part.model_response())
    return found


def latest_prompt(messages: Sequence[ModelMessage]) -> str | None:
    """The last user prompt of the conversation, when it is text."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return None


def suspicion(text: str, tools: Collection[str], messages: Sequence[ModelMessage]) -> str | None:
    """Why the final reply `text` looks like an unexecuted tool call or an echoed prompt; None when it does not."""
    body = text.strip()
    if not body:
        return None
    call = written_call(body, tools)
    if call is not None:
        return f"the reply is a call to tool {call[0]!r} written as text (JSON): the tool was not run"
    if body in RETRY_PROMPTS or body in _retry_texts(messages):
        return f"the reply gives back the retry prompt {body!r} instead of an answer"
    own = _own_text(body, messages)
    if own is not None:
        return f"the reply gives back what llm-do told the model ({own!r}) instead of an answer"
    if body == (latest_prompt(messages) or "").strip():
        return "the reply gives back the user's prompt word for word instead of an answer"
    result = _RESULT_MARKUP.search(body)
    if result is not None:
        return f"the reply holds a tool result it wrote itself ({result.group(0)}): no tool was run"
    markup = _MARKUP.search(body)
    if markup is not None:
        return f"the reply holds tool-call markup ({markup.group(0)}) as text: no tool was run"
    named = next(_named_tools(body, tools), None)
    if named is not None:
        return f"the reply holds a call to tool {named!r} written as text: the tool was not run"
    told = _told_call(body, tools, messages)
    if told is not None:
        return f"the reply tells how to call tool {told!r} instead of calling it: the tool was not run"
    if body.strip("`'\" .") in tools:
        return f"the reply names the tool {body.strip('`' + chr(39) + chr(34) + ' .')!r} instead of calling it"
    return None


_CALL_NAME = re.compile(
    r"[\"'](?:name|function|tool)[\"']\s*:\s*[\"']([A-Za-z_][\w.-]*)[\"']|<name>\s*([A-Za-z_][\w.-]*)\s*</name>"
)


def _named_tools(text: str, tools: Collection[str]) -> Iterator[str]:
    """Tools named as a call's name in text: `"name": "query"`, `'function': 'begin'`, `<name>begin</name>`."""
    for found in _CALL_NAME.finditer(text):
        name = found.group(1) or found.group(2)
        if name in tools:
            yield name


def named_calls(text: str, tools: Collection[str]) -> list[str]:
    """The calls of the call's tools a reply writes out as text (JSON-like or XML-like), in order."""
    return list(_named_tools(text, tools))


def _own_text(text: str, messages: Sequence[ModelMessage]) -> str | None:
    """The head of a message llm-do sent the model (a tool's result or a retry prompt of the conversation) that the
    reply `text` gives back, if any."""
    heads = [found.group(0) for found in _OWN.finditer(text)]
    if not heads:
        return None
    sent = [item for item in sent_texts(messages) if _OWN.search(item)]
    return next((head for head in heads if any(head in item for item in sent)), None)


def _told_call(text: str, tools: Collection[str], messages: Sequence[ModelMessage]) -> str | None:
    """A tool the reply tells someone to call ("you can call the read_text function with ...", "use
    read_text('a.md')", the name in backticks or quotes, or followed by `(`, "function" or "tool"), which the
    agent's run never called since the user's last prompt."""
    called = _called_tools(messages)
    for tool in sorted(tools):
        if tool in called or tool not in text:
            continue
        named = re.escape(tool)
        marked = rf"(?:[`'\"]{named}\b|\b{named}\s*\(|\b{named}[`'\"]?\s+(?:function|tool|command)\b)"
        if re.search(rf"\b{_TOLD_VERB}\b[^.!?\n]{{0,40}}?{marked}", text, re.IGNORECASE):
            return tool
    return None


def _called_tools(messages: Sequence[ModelMessage]) -> set[str]:
    """The tools the model called since the user's last prompt."""
    called: set[str] = set()
    for message in reversed(messages):
        if isinstance(message, ModelRequest) and any(isinstance(part, UserPromptPart) for part in message.parts):
            break
        if isinstance(message, ModelResponse):
            called.update(part.tool_name for part in message.parts if isinstance(part, ToolCallPart))
    return called


def _retry_texts(messages: Sequence[ModelMessage]) -> list[str]:
    """The retry prompts the conversation holds, as the model read them."""
    found: list[str] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if "retry" in part.part_kind and hasattr(part, "model_response"):
                    found.append(part.model_response().strip())
    return found
