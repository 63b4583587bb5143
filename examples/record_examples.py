"""Regenerate the examples' recordings: `python examples/record_examples.py`.

Each example project ships `recording.json`, so it runs offline with
`--model replay:examples/NAME/recording.json` (from the repository root).
The recordings are made here by running the projects for real, with `RecordingModel` around a
scripted `FunctionModel` that answers the way an LLM following the workers' instructions would
(it reads the prompts and tool results, so handles, balances and summaries are the live ones).
Re-run this script after changing a worker's instructions, a tool or a default input: replay
answers only the conversations it recorded.
"""

from __future__ import annotations

import asyncio
import csv
import io
import re
import struct
import sys
import zlib
from pathlib import Path
from typing import Any, Literal

from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextContent,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from llm_do import RuntimeConfig
from llm_do.models import RecordingModel
from llm_do.project import load_project

EXAMPLES = Path(__file__).resolve().parent
RECORDING = "recording.json"


def prompt_of(messages: list[ModelMessage]) -> str:
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                return part.content
    return ""


def returned(messages: list[ModelMessage], tool_name: str) -> list[Any]:
    """What every call to `tool_name` returned so far, in order."""
    return [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart) and part.tool_name == tool_name
    ]


def last_returns(messages: list[ModelMessage]) -> list[Any]:
    last = messages[-1]
    return [part.content for part in last.parts if isinstance(part, ToolReturnPart)]


# bank_clerk: begin, check the balance, two updates in parallel, commit (or roll back if refused)

MOVE = re.compile(r"move (\d+) from (\w+) to (\w+)", re.IGNORECASE)
DEBIT = "UPDATE accounts SET balance = balance - $1 WHERE name = $2"
CREDIT = "UPDATE accounts SET balance = balance + $1 WHERE name = $2"


def clerk(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    found = MOVE.search(prompt_of(messages))
    assert found, "the clerk's script moves money: 'move N from A to B'"
    amount, payer, payee = int(found.group(1)), found.group(2), found.group(3)
    begun = returned(messages, "begin")
    if not begun:
        return ModelResponse(parts=[ToolCallPart("begin", {})])
    txn = begun[0]
    looked_up = returned(messages, "query")
    if not looked_up:
        sql = "SELECT name, balance FROM accounts WHERE name IN ($1, $2) ORDER BY name"
        return ModelResponse(parts=[ToolCallPart("query", {"txn": txn, "sql": sql, "params": [payer, payee]})])
    before = {row["name"]: row["balance"] for row in looked_up[0]["rows"]}
    if before[payer] < amount:
        return (
            ModelResponse(parts=[ToolCallPart("rollback", {"txn": txn})])
            if not returned(messages, "rollback")
            else ModelResponse(parts=[TextPart(f"{payer} has only {before[payer]}, so I moved nothing.")])
        )
    if not returned(messages, "execute"):
        return ModelResponse(
            parts=[
                ToolCallPart("execute", {"txn": txn, "sql": DEBIT, "params": [amount, payer]}),
                ToolCallPart("execute", {"txn": txn, "sql": CREDIT, "params": [amount, payee]}),
            ]
        )
    committed = returned(messages, "commit")
    if not committed:
        return ModelResponse(parts=[ToolCallPart("commit", {"txn": txn})])
    if committed[0] == f"{txn} committed":
        after = f"{payer} now has {before[payer] - amount} and {payee} has {before[payee] + amount}"
        return ModelResponse(parts=[TextPart(f"Done: moved {amount} from {payer} to {payee} in {txn}; {after}.")])
    if not returned(messages, "rollback"):
        return ModelResponse(parts=[ToolCallPart("rollback", {"txn": txn})])
    still = f"{payer} still has {before[payer]} and {payee} has {before[payee]}"
    return ModelResponse(
        parts=[TextPart(f"The commit of {txn} was not approved, so I rolled it back and nothing moved: {still}.")]
    )


# summarizer: split a long document in two halves and summarize each with itself

LEAVES = {
    "Tidewater Harbor handled": "Container traffic rose 8% to 2.1 million and ship waits fell below a day.",
    "The new automated cranes": "New automated cranes (38 boxes an hour, against 25) drove most of the gain.",
    "Rail links lag behind": "Rail lags: a third of containers still leave by truck on congested roads.",
    "The harbor board plans": "The board plans a second rail terminal by 2027 and wants the region to share the cost.",
}


def summarizer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    paragraphs = [paragraph.strip() for paragraph in prompt_of(messages).split("\n\n") if paragraph.strip()]
    summaries = last_returns(messages) if len(messages) > 1 else []
    if summaries:
        return ModelResponse(parts=[TextPart(" ".join(str(summary) for summary in summaries))])
    if len(paragraphs) <= 1:
        text = paragraphs[0] if paragraphs else ""
        leaf = next((summary for start, summary in LEAVES.items() if text.startswith(start)), text.split(". ")[0])
        return ModelResponse(parts=[TextPart(leaf)])
    half = (len(paragraphs) + 1) // 2
    return ModelResponse(
        parts=[
            ToolCallPart("summarize", {"input": "\n\n".join(paragraphs[:half])}),
            ToolCallPart("summarize", {"input": "\n\n".join(paragraphs[half:])}),
        ]
    )


# orchestrator: a researcher and a critic, each one answer


def reviewer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    instructions = info.instructions or ""
    if "researcher" in instructions:
        text = "Thursday afternoons free Monday mornings for planning, and the week's results are in by then."
    else:
        text = "Thursday clashes with the release freeze, and decisions taken then wait over the weekend."
    return ModelResponse(parts=[TextPart(text)])


# review_desk: a coordinator hands a chart and its data to a reviewer, who compares the bars with the rows

CHART = EXAMPLES / "review_desk" / "data" / "chart.png"
BAR, GAP, SCALE, HEIGHT = 24, 8, 10, 140
BAR_COLOR, BACKGROUND = (40, 90, 200), (255, 255, 255)
PLOTTED = {"north": 1200, "south": 950, "east": 650, "west": 700}  # east is wrong: the data says 400


def bar_chart_png(values: list[int]) -> bytes:
    """A bar chart as a real PNG: one bar per value, SCALE units of data per pixel, drawn from the bottom."""
    width = GAP + len(values) * (BAR + GAP)
    rows = []
    for y in range(HEIGHT):
        row = bytearray(b"\x00")  # filter: none
        for x in range(width):
            index, offset = divmod(x - GAP, BAR + GAP)
            inside = x >= GAP and offset < BAR and index < len(values)
            row += bytes(BAR_COLOR if inside and HEIGHT - y <= values[index] // SCALE else BACKGROUND)
        rows.append(bytes(row))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, HEIGHT, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"".join(rows))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def bar_heights(data: bytes) -> list[int]:
    """Read the bars back out of a PNG made by `bar_chart_png`: the data value each bar shows."""
    width, height = struct.unpack(">II", data[16:24])
    chunks, at = [], 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        if data[at + 4 : at + 8] == b"IDAT":
            chunks.append(data[at + 8 : at + 8 + length])
        at += 12 + length
    pixels = zlib.decompress(b"".join(chunks))
    stride = 1 + 3 * width
    heights = []
    for x in range(GAP, width, BAR + GAP):
        column = [pixels[y * stride + 1 + 3 * x : y * stride + 4 + 3 * x] for y in range(height)]
        heights.append(sum(pixel == bytes(BAR_COLOR) for pixel in column) * SCALE)
    return heights


def reviewer_and_coordinator(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if "You review charts" in (info.instructions or ""):
        chart = next(
            item.data
            for message in messages
            for part in message.parts
            if isinstance(part, UserPromptPart) and not isinstance(part.content, str)
            for item in part.content
            if isinstance(item, BinaryContent) and item.media_type == "image/png"
        )
        table = next(
            item.content.split("\n", 1)[1]
            for message in messages
            for part in message.parts
            if isinstance(part, UserPromptPart) and not isinstance(part.content, str)
            for item in part.content
            if isinstance(item, TextContent) and "text/csv" in item.content.split("\n", 1)[0]
        )
        rows = [row for row in csv.DictReader(io.StringIO(table)) if row.get("sales")]
        wrong = [
            f"{row['region']} (the chart shows {shown}, the data {row['sales']})"
            for row, shown in zip(rows, bar_heights(chart), strict=True)
            if shown != int(row["sales"])
        ]
        if not wrong:
            return ModelResponse(parts=[TextPart(f"The chart is faithful: its {len(rows)} bars match the data.")])
        return ModelResponse(parts=[TextPart(f"The chart is not faithful: {'; '.join(wrong)} is wrong.")])
    verdict = returned(messages, "reviewer")
    if not verdict:
        ask = "Does this chart show this data faithfully?"
        attachments = ["data/chart.png", "data/sales.csv"]
        return ModelResponse(parts=[ToolCallPart("reviewer", {"input": ask, "attachments": attachments})])
    return ModelResponse(parts=[TextPart(f"The reviewer checked data/chart.png against data/sales.csv: {verdict[0]}")])


# bootstrapping: main makes a pitch evaluator, hands it each deck, writes the reports


def attached_texts(messages: list[ModelMessage]) -> list[str]:
    """The text attachments of the call's prompt (after their first line, which names the file)."""
    return [
        item.content.split("\n", 1)[1]
        for message in messages
        for part in message.parts
        if isinstance(part, UserPromptPart) and not isinstance(part.content, str)
        for item in part.content
        if isinstance(item, TextContent)
    ]


def evaluate(deck: str) -> str:
    """A pitch evaluator's report: paid pilots and revenue make a GO, none a PASS."""
    company = deck.splitlines()[0].lstrip("# ").strip()
    earning = "$" in deck and "no revenue" not in deck
    verdict, traction = ("GO", 4) if earning else ("PASS", 1)
    flags = "none" if earning else "no revenue; a valuation far ahead of traction"
    scores = (
        f"- problem: 4\n- solution: 3\n- team: {3 if earning else 2}\n- market: {traction}\n- financials: {traction}"
    )
    return f"# {company}\n\n**Verdict:** {verdict}\n\n{scores}\n\nRed flags: {flags}.\n"


def bootstrapper(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    instructions = info.instructions or ""
    if instructions.startswith("You evaluate pitch decks"):
        [deck] = attached_texts(messages)
        return ModelResponse(parts=[TextPart(evaluate(deck))])
    made, found = returned(messages, "agent_create"), returned(messages, "glob")
    reports, written = returned(messages, "agent_call"), returned(messages, "write_text")
    if not made:
        analyzer = instructions.split("BEGIN\n", 1)[1].split("\nEND", 1)[0]
        args = {"name": "pitch_evaluator", "instructions": analyzer, "toolsets": []}
        return ModelResponse(parts=[ToolCallPart("agent_create", args)])
    if not found:
        return ModelResponse(parts=[ToolCallPart("glob", {"pattern": "input/*.md"})])
    decks = sorted(line.strip() for line in str(found[0]).splitlines() if line.strip().endswith(".md"))
    if not reports:
        ask = "Evaluate this pitch deck."
        calls = [{"agent": "pitch_evaluator", "input": ask, "attachments": [deck]} for deck in decks]
        return ModelResponse(parts=[ToolCallPart("agent_call", args) for args in calls])
    if not returned(messages, "mkdir"):
        return ModelResponse(parts=[ToolCallPart("mkdir", {"path": "evaluations"})])
    if not written:
        paths = [deck.replace("input/", "evaluations/", 1) for deck in decks]
        writes = [{"path": path, "text": report} for path, report in zip(paths, reports, strict=True)]
        return ModelResponse(parts=[ToolCallPart("write_text", args) for args in writes])
    lines = [f"{deck}: {answer}" for deck, answer in zip(decks, written, strict=True)]
    return ModelResponse(parts=[TextPart("\n".join(lines))])


# orchestrating_tool: main calls deep_research, which runs an expander, searchers in parallel, a synthesizer

FINDINGS = {
    "solar panel efficiency 2014": "Typical commercial panels converted about 15-16% of sunlight in 2014.",
    "solar panel efficiency 2024": "Typical commercial panels converted about 21-23% of sunlight in 2024.",
}


def researcher(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    instructions, asked = info.instructions or "", prompt_of(messages)
    if instructions.startswith("You expand"):
        return ModelResponse(parts=[TextPart('["solar panel efficiency 2014", "solar panel efficiency 2024"]')])
    if instructions.startswith("You search"):
        return ModelResponse(parts=[TextPart(FINDINGS.get(asked, "Nothing found."))])
    if instructions.startswith("You synthesize"):
        return ModelResponse(
            parts=[TextPart("Commercial panels went from about 15-16% to 21-23% efficiency in ten years.")]
        )
    found = returned(messages, "deep_research")
    if not found:
        return ModelResponse(parts=[ToolCallPart("deep_research", {"question": asked})])
    return ModelResponse(parts=[TextPart(str(found[0]))])


async def record(
    name: str, model: FunctionModel, modes: tuple[Literal["approve_all", "reject_all"], ...] = ("approve_all",)
) -> None:
    project = EXAMPLES / name
    (project / RECORDING).unlink(missing_ok=True)
    async with RecordingModel(model, project / RECORDING) as recorder:
        for mode in modes:
            async with load_project(project, model=recorder, config=RuntimeConfig(approval_mode=mode)) as loaded:
                result = await loaded.run()
            print(f"{name} ({mode}): {result.output}")


async def main() -> None:
    await record("bank_clerk", FunctionModel(clerk, model_name="clerk-script"), ("approve_all", "reject_all"))
    await record("summarizer", FunctionModel(summarizer, model_name="summarizer-script"))
    await record("orchestrator", FunctionModel(reviewer, model_name="reviewer-script"))
    CHART.write_bytes(bar_chart_png(list(PLOTTED.values())))
    await record("review_desk", FunctionModel(reviewer_and_coordinator, model_name="review-script"))
    await record("bootstrapping", FunctionModel(bootstrapper, model_name="bootstrap-script"))
    await record("orchestrating_tool", FunctionModel(researcher, model_name="research-script"))


if __name__ == "__main__":
    sys.path.insert(0, str(EXAMPLES.parent))
    asyncio.run(main())
