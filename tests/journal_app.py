"""Entries and JobQueues for tests/jobs/test_jobs_journal.py and tests/jobs/test_jobs_parking.py; worker processes
import it (`tests.journal_app:queue`, `tests.journal_app:parking`).

Every model here counts: each request it receives appends `sent <who> <index> <attempt>` to the notes
file named in the run's prompt (a JSON object), so the test, in another process, sees which requests
were paid for on which attempt. A prompt's `latency` makes every request take that many seconds. On a job's first
attempt, the request whose index is the prompt's `hold`
notes `holding <who>` and never answers: the test kills the worker then (`hold_live`: the same in a live run, outside
any job: the test kills its web process); the request whose index is the prompt's
`answer_once_asked` answers only once another call of the job has asked a question (a slower sibling, without a
clock). The reviewer, handed files, notes the
text of each (`reviewed <text>`) instead.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, ClassVar

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextContent,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.settings import ModelSettings

from llm_do import AgentEntry, CallScope, Runtime, ToolPolicy, Toolset, tool
from llm_do.jobs import JobEntry, JobQueue, current_job
from llm_do.toolsets import DynamicAgents

Script = Callable[[dict[str, Any], int, list[Any]], ModelResponse]
"""(the prompt's fields, the request's index in its agent run, the tool returns so far) -> the response."""


def note(path: str, line: str) -> None:
    with Path(path).open("a") as file:
        file.write(f"{line}\n")


def sent(notes: Path) -> Counter[tuple[str, int]]:
    """How many times each (model, request index) was sent to a model, over every attempt (`sent WHO INDEX ...`)."""
    lines = notes.read_text().splitlines() if notes.exists() else []
    return Counter(
        (who, int(index)) for _, who, index, _ in (line.split() for line in lines if line.startswith("sent "))
    )


def _prompt(messages: list[ModelMessage]) -> dict[str, Any]:
    first = messages[0]
    assert isinstance(first, ModelRequest)
    text = next(part.content for part in first.parts if isinstance(part, UserPromptPart))
    assert isinstance(text, str)
    return dict(json.loads(text))


def counting(who: Callable[[dict[str, Any]], str], script: Script) -> FunctionModel:
    """A model that notes each request it receives, then answers it with `script`."""

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        fields = _prompt(messages)
        index = sum(isinstance(message, ModelResponse) for message in messages)
        job = current_job()
        attempt = job.attempt if job is not None else 0
        name = who(fields)
        note(fields["notes"], f"sent {name} {index} {attempt}")
        if fields.get("latency"):
            await asyncio.sleep(fields["latency"])
        if index == fields.get("hold") and attempt == 1:
            note(fields["notes"], f"holding {name}")
            await asyncio.sleep(3600)
        if index == fields.get("hold_live") and job is None:  # a live run's process, killed then
            note(fields["notes"], f"holding {name}")
            await asyncio.sleep(3600)
        if index == fields.get("answer_once_asked") and attempt == 1:
            await _until_asked()
        returns = [
            part.content
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        ]
        return script(fields, index, returns)

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        response = await respond(messages, info)
        for index, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                yield part.content
            elif isinstance(part, ToolCallPart):
                yield {index: DeltaToolCall(part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id)}

    return FunctionModel(respond, stream_function=stream)


async def _until_asked() -> None:
    """Wait until the current job has a question pending (another of its calls asked)."""
    job = current_job()
    assert job is not None
    while not await parking.pending(job.id):  # noqa: ASYNC110  (polling the database)
        await asyncio.sleep(0.02)


class Steps(Toolset):
    """Deterministic steps, one tool whose result changes on every attempt, and one that fails on the first."""

    default_policy: ClassVar[ToolPolicy | None] = (
        ToolPolicy()
    )  # declared: steps, reads and a failure: the journal's tests, not about approvals

    @tool
    def step(self, n: str) -> str:
        """Do step `n`."""
        return f"step {n} ok"

    @tool
    def drift(self) -> str:
        """Read something that changed since the last attempt."""
        job = current_job()
        return f"attempt {job.attempt if job is not None else 0}"

    @tool
    def fragile(self) -> str:
        """Fail on the job's first attempt."""
        job = current_job()
        if job is not None and job.attempt == 1:
            raise RuntimeError("the first attempt fails here")
        return "held this time"


class Till(Toolset):
    """Payments: `quote` runs freely, every `pay` needs approval and notes `paid <amount>`. At the end of its call
    the till notes `till exit <how the call ended>` (a parked run tears it down too)."""

    def __init__(self) -> None:
        self.notes: str | None = None

    @tool
    def quote(self, notes: str) -> str:
        """Open the till."""
        self.notes = notes
        return "quote ok"

    @tool
    def pay(self, notes: str, amount: int) -> str:
        """Pay `amount`."""
        note(notes, f"paid {amount}")
        return f"paid {amount}"

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        if self.notes is not None:
            note(self.notes, f"till exit {exc_type.__name__ if exc_type else 'ok'}")


class Careful(Toolset):
    """One tool that has the payer pay, catching whatever goes wrong (`RunParked` too) and reporting it."""

    default_policy: ClassVar[ToolPolicy | None] = ToolPolicy()  # declared: it only runs the payer, whose own pay asks

    @tool
    async def pay_carefully(self, ctx: RunContext[CallScope], notes: str, amount: int) -> str:
        """Have the payer pay `amount`."""
        try:
            return str(await ctx.deps.call_agent("payer", json.dumps({"notes": notes, "amount": amount})))
        except Exception as error:
            return f"the payer failed: {error}"


class Quitting(Toolset):
    """One tool that cancels its own job (`parking`'s) and goes on."""

    default_policy: ClassVar[ToolPolicy | None] = (
        ToolPolicy()
    )  # declared: cancelling its own job is what the test is about

    @tool
    async def quit(self) -> str:
        """Cancel this job."""
        job = current_job()
        assert job is not None
        return f"cancel requested: {await parking.cancel(job.id)}"


def _quitting(fields: dict[str, Any], index: int, returns: list[Any]) -> ModelResponse:
    """Opens the till, cancels its own job, then wants to pay (which needs approval)."""
    if index == 0:
        return ModelResponse(parts=[ToolCallPart("quote", {"notes": fields["notes"]})])
    if index == 1:
        return ModelResponse(parts=[ToolCallPart("quit", {})])
    if index == 2:
        return ModelResponse(parts=[ToolCallPart("pay", {"notes": fields["notes"], "amount": 10})])
    return ModelResponse(parts=[TextPart("done: " + ", ".join(map(str, returns)))])


def _careful(fields: dict[str, Any], index: int, returns: list[Any]) -> ModelResponse:
    """Pays through `pay_carefully`, then reports what it returned."""
    if index == 0:
        return ModelResponse(
            parts=[ToolCallPart("pay_carefully", {"notes": fields["notes"], "amount": fields.get("amount", 10)})]
        )
    return ModelResponse(parts=[TextPart(f"careful: {returns[-1]}")])


def _paying(fields: dict[str, Any], index: int, returns: list[Any]) -> ModelResponse:
    """Opens the till, a step, a payment (needs approval), then a text naming every result."""
    if index == 0:
        return ModelResponse(parts=[ToolCallPart("quote", {"notes": fields["notes"]})])
    if index == 1:
        return ModelResponse(parts=[ToolCallPart("step", {"n": "1"})])
    if index == 2:
        return ModelResponse(
            parts=[ToolCallPart("pay", {"notes": fields["notes"], "amount": fields.get("amount", 10)})]
        )
    return ModelResponse(parts=[TextPart("done: " + ", ".join(map(str, returns)))])


def _relay(child: str) -> Script:
    """Hands its prompt to `child` (an entry), then reports what it said."""

    def script(fields: dict[str, Any], index: int, returns: list[Any]) -> ModelResponse:
        if index == 0:
            return ModelResponse(parts=[ToolCallPart(child, {"input": json.dumps(fields)})])
        return ModelResponse(parts=[TextPart(f"{child} said: {returns[-1]}")])

    return script


def _drifting_payment(fields: dict[str, Any], index: int, returns: list[Any]) -> ModelResponse:
    """Reads something that drifts (the attempt), then pays that much under a fixed tool call id: a run made
    again asks the same question id with other arguments."""
    if index == 0:
        return ModelResponse(parts=[ToolCallPart("drift", {})])
    if index == 1:
        amount = int(str(returns[0]).split()[-1])
        args = {"notes": fields["notes"], "amount": amount}
        return ModelResponse(parts=[ToolCallPart("pay", args, tool_call_id="pay-once")])
    return ModelResponse(parts=[TextPart("done: " + ", ".join(map(str, returns)))])


def _pair(fields: dict[str, Any], index: int, returns: list[Any]) -> ModelResponse:
    """Asks two payers at once (their notes in `notes_a`, `notes_b`), then reports what they said. With `slow_b`,
    payer b's model answers the request that asks to pay only once payer a has asked (on the first attempt)."""
    if index == 0:
        asks: list[dict[str, Any]] = [
            {"notes": fields[f"notes_{tag}"], "amount": amount} for tag, amount in (("a", 1), ("b", 2))
        ]
        if fields.get("slow_b"):
            asks[1]["answer_once_asked"] = 2
        return ModelResponse(parts=[ToolCallPart("payer", {"input": json.dumps(ask)}) for ask in asks])
    return ModelResponse(parts=[TextPart("pair: " + " | ".join(sorted(map(str, returns))))])


def _double(fields: dict[str, Any], index: int, returns: list[Any]) -> ModelResponse:
    """Pays 1 and 2 in one response (two questions of the same call), then names what the till said."""
    if index == 0:
        return ModelResponse(
            parts=[ToolCallPart("pay", {"notes": fields["notes"], "amount": amount}) for amount in (1, 2)]
        )
    return ModelResponse(parts=[TextPart("double: " + ", ".join(map(str, returns)))])


ODD = "an odd response"
"""What the response to request `odd` says (a test's CHECK constraint refuses it)."""


def _steps(fields: dict[str, Any], index: int, returns: list[Any]) -> ModelResponse:
    """Four steps, then a text naming every result. The response to request `odd` (a prompt field), if given,
    says `ODD` before its step, the response to request `nul` says something with a NUL character, and the one to
    request `surrogate` something with a lone surrogate (what UTF-8 cannot encode)."""
    if index < 4:
        said = [TextPart(ODD)] if index == fields.get("odd") else []
        said += [TextPart("a NUL: \x00")] if index == fields.get("nul") else []
        said += [TextPart("a lone surrogate: \udcff")] if index == fields.get("surrogate") else []
        return ModelResponse(parts=[*said, ToolCallPart("step", {"n": str(index)})])
    return ModelResponse(parts=[TextPart("done: " + ", ".join(map(str, returns)))])


def _drifting(*calls: str) -> Script:
    """Calls `calls` in order (`step` with the request's index), then a text naming every result."""

    def script(fields: dict[str, Any], index: int, returns: list[Any]) -> ModelResponse:
        if index < len(calls):
            args = {"n": str(index)} if calls[index] == "step" else {}
            return ModelResponse(parts=[ToolCallPart(calls[index], args)])
        return ModelResponse(parts=[TextPart("done: " + ", ".join(map(str, returns)))])

    return script


def _boss(fields: dict[str, Any], index: int, returns: list[Any]) -> ModelResponse:
    """Asks two helpers at once (parallel tool calls), then reports what they said."""
    if index == 0:
        asks = [{"notes": fields["notes"], "tag": tag} for tag in ("a", "b")]
        return ModelResponse(parts=[ToolCallPart("helper", {"input": json.dumps(ask)}) for ask in asks])
    return ModelResponse(parts=[TextPart("boss: " + " | ".join(sorted(map(str, returns))))])


def _helper(fields: dict[str, Any], index: int, returns: list[Any]) -> ModelResponse:
    if index == 0:
        return ModelResponse(parts=[ToolCallPart("step", {"n": fields["tag"]})])
    return ModelResponse(parts=[TextPart(f"helper {fields['tag']}: {returns[-1]}")])


def _handing(fields: dict[str, Any], index: int, returns: list[Any]) -> ModelResponse:
    """Hands the file `file` (under the project root) to the reviewer, then reports what it said."""
    if index == 0:
        ask = {"input": json.dumps({"notes": fields["notes"]}), "attachments": [fields["file"]]}
        return ModelResponse(parts=[ToolCallPart("reviewer", ask)])
    return ModelResponse(parts=[TextPart(f"reviewer said: {returns[-1]}")])


def _reviewing(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Notes `reviewed <the text of each attachment it was sent>` in the notes its input names."""
    first = messages[0]
    assert isinstance(first, ModelRequest)
    prompt = next(part.content for part in first.parts if isinstance(part, UserPromptPart))
    assert not isinstance(prompt, str)
    texts = [item.content.splitlines()[1] for item in prompt[1:] if isinstance(item, TextContent)]
    note(json.loads(str(prompt[0]))["notes"], f"reviewed {' '.join(texts)}")
    return ModelResponse(parts=[TextPart(f"read {', '.join(texts)}")])


def _making(fields: dict[str, Any], index: int, returns: list[Any]) -> ModelResponse:
    """The maker makes a scribe (with the steps; `keep`, if given, says how long it lives), asks it, then reports;
    the scribe (the same model, asked with `who: scribe`) runs a step, then answers. `scribe_hold` holds the
    scribe's request of that index."""
    if fields.get("who") == "scribe":
        if index == 0:
            return ModelResponse(parts=[ToolCallPart("step", {"n": "s"})])
        return ModelResponse(parts=[TextPart(f"scribe: {returns[-1]}")])
    if index == 0:
        made = {"name": "scribe", "instructions": "Do the step you are asked.", "toolsets": ["steps"]}
        if "keep" in fields:  # kept by the run's session (a job's run is a session of its own)
            made["keep"] = fields["keep"]
        return ModelResponse(parts=[ToolCallPart("agent_create", made)])
    if index == 1:
        ask = {"notes": fields["notes"], "who": "scribe", "hold": fields.get("scribe_hold", -1)}
        return ModelResponse(parts=[ToolCallPart("agent_call", {"agent": "scribe", "input": json.dumps(ask)})])
    return ModelResponse(parts=[TextPart(f"maker: {returns[-1]}")])


def _named(name: str) -> Callable[[dict[str, Any]], str]:
    return lambda fields: name


def _agent(name: str, script: Script, toolsets: list[str], who: Callable[[dict[str, Any]], str] | None = None) -> Any:
    return AgentEntry(Agent(counting(who or _named(name), script)), name=name, toolsets=toolsets)


async def _late_on_the_first_attempt(ctx: RunContext[Any]) -> str:
    """Helper `a` asks after helper `b` on a job's first attempt, before it on the next ones: the order in
    which parallel calls reach the model is no way to tell them apart."""
    job = current_job()
    if job is not None and job.attempt == 1 and '"tag": "a"' in str(ctx.prompt):
        await asyncio.sleep(0.5)
    return "Help the boss."


def _attempt_temperature(ctx: RunContext[Any]) -> ModelSettings:
    job = current_job()
    return {"temperature": 0.1 * (job.attempt if job is not None else 0)}


counter = _agent("counter", _steps, ["steps"])
plain = _agent("plain", _steps, ["steps"])
drifter = _agent("drifter", _drifting("step", "step", "drift", "step"), ["steps"])
fragile = _agent("fragile", _drifting("step", "drift", "step", "fragile"), ["steps"])
tuned = AgentEntry(
    Agent(counting(_named("tuned"), _drifting("step", "fragile")), model_settings=_attempt_temperature),
    name="tuned",
    toolsets=["steps"],
)
boss = _agent("boss", _boss, ["helper"])
helper = _agent("helper", _helper, ["steps"], who=lambda fields: f"helper/{fields['tag']}")
helper.agent.instructions(_late_on_the_first_attempt)


payer = _agent("payer", _paying, ["steps", "till"])
middle = _agent("middle", _relay("payer"), ["payer"])
chief = _agent("chief", _relay("middle"), ["middle"])
pair = _agent("pair", _pair, ["payer"])
double = _agent("double", _double, ["till"])
drifty = _agent("drifty", _drifting_payment, ["steps", "till"])
careful = _agent("careful", _careful, ["careful", "payer"])
quitter = _agent("quitter", _quitting, ["till", "quitting"])
hander = _agent("hander", _handing, ["reviewer"])
reviewer = AgentEntry(Agent(FunctionModel(_reviewing)), name="reviewer")
maker = _agent("maker", _making, ["agents", "steps"], who=lambda fields: str(fields.get("who", "maker")))


def make_runtime(**options: Any) -> Runtime:
    return Runtime(
        None,
        entries=[
            counter,
            plain,
            drifter,
            fragile,
            tuned,
            boss,
            helper,
            payer,
            middle,
            chief,
            pair,
            double,
            drifty,
            careful,
            quitter,
            hander,
            reviewer,
            maker,
        ],
        toolsets={"steps": Steps, "till": Till, "careful": Careful, "quitting": Quitting, "agents": DynamicAgents},
        policies={
            "till": ToolPolicy(tools={"pay": "ask"}),
            "reviewer": ToolPolicy(attachments="ask"),
            "agents": ToolPolicy(),  # agents are made without asking: the journal's tests, not about approvals
        },
        **options,
    )


queue = JobQueue(
    entries=[
        "counter",
        JobEntry("plain", journal=False),
        "drifter",
        JobEntry("fragile", retry=1),
        JobEntry("tuned", retry=1),
        "boss",
        "maker",
    ],
    runtime=make_runtime,
)

parking = JobQueue(
    entries=["payer", "chief", "pair", "double", "drifty", "counter", "careful", "quitter", "hander"],
    runtime=make_runtime,
    queue="parking",
    approvals="park",
)
"""Jobs that need a person's decision park until `parking.decide(...)`."""
