"""Lending a call's toolsets to pydantic-ai: gated, never entered twice, and let go of at call end.

A call scope owns its toolsets; pydantic-ai only borrows them for the agent runs of the call. The
toolsets pydantic-ai cannot tell apart from plain tool collections (`llm_do.Toolset` classes and
`FunctionToolset`s without their own instructions or per-run copies) are lent together as one
`LentGroup`, which lists and calls their tools in turn: pydantic-ai starts a task per toolset for
every model request, so one toolset instead of several is measurably cheaper. Any other toolset
is lent alone in a `LentToolset`.
"""

from __future__ import annotations

from collections.abc import Collection, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.messages import InstructionPart
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, ToolsetTool, WrapperToolset

from .._compat import current_run_context, explicit_toolset_id, forget_driving_task
from ..approvals._approvals import Approvals
from ..approvals._facts import CallFacts, NameRules, ToolTraits
from ..approvals._requests import RunSuspended
from ..files._attachments import TAKES_ATTACHMENTS, names_in
from ..guards._guard import refuse_repeat
from ..toolkit._toolset import ReadableArguments, Toolset
from ._entry import ToolsetUse
from ._gate import CallGate, GatedCall
from ._holding import SiblingHold

if TYPE_CHECKING:
    from ..files._attachments import Attachment

_REQUIRES_APPROVAL = "llm_do.requires_approval"
_PLAIN: dict[type, bool] = {}


_NO_INSTRUCTIONS = AbstractToolset.get_instructions
"""pydantic-ai's `get_instructions`, which returns None: a toolset that keeps it gives no instructions."""

_NO_ID = Toolset.id
"""`Toolset`'s own `id` property (None): a class that keeps it chose no id for its tools."""


class LendingCall(Protocol):
    """What a lending needs of the call whose toolsets it lends."""

    def _gated(self) -> GatedCall:
        """What the call's gate knows of it, made when the gate is."""
        ...

    def _check_depth(self, name: str) -> None: ...

    async def attachments_named(self, names: Sequence[str]) -> tuple[Attachment, ...]: ...


class Lending:
    """One call's loans to pydantic-ai: the wrappers, the approval gate (made on first use), and the
    run contexts pydantic-ai made for them, which a callback scheduled by a tool may keep."""

    __slots__ = ("_approvals", "_call", "_defers", "_entry_tools", "_gate", "_lent", "_seen", "hold")

    def __init__(self, approvals: Approvals, call: LendingCall, entry_tools: Collection[str]) -> None:
        self._approvals = approvals
        self._call = call
        self._entry_tools = entry_tools
        self._gate: CallGate | None = None
        self._defers = False
        """Whether the call's agent runs get the gate's capability, to which a model's gated calls are deferred."""
        self._lent: list[LentToolset | LentGroup] = []
        self._seen: list[RunContext[Any]] = []
        self.hold = SiblingHold()
        """The call's tool calls in flight: one that ends the run suspended waits for the others to settle."""

    def gate(self) -> CallGate:
        gate = self._gate
        if gate is None:
            call = self._call
            gate = self._gate = CallGate(self._approvals, call._gated(), call.attachments_named, deferring=self._defers)
        return gate

    @property
    def lent(self) -> Sequence[LentToolset | LentGroup]:
        """The wrappers lent for this call's toolsets, in their order."""
        return self._lent

    def attached(self, call_id: str) -> tuple[Attachment, ...] | None:
        """The attachments an approver was shown for this call (taken once), or None if none was asked."""
        return None if self._gate is None else self._gate.attached(call_id)

    def capabilities(self) -> list[AbstractCapability[Any]]:
        return [] if self._gate is None else self._gate.capabilities()

    def saw(self, ctx: RunContext[Any]) -> None:
        """Remember an agent run's context, to let go of what it holds when the call ends."""
        if not self._seen or self._seen[-1].messages is not ctx.messages:
            self._seen.append(ctx)

    def saw_current(self) -> None:
        """Remember the run context pydantic-ai made current around a tool call of this call's agent
        run: the one a callback the tool schedules (a pool's timer) captures with its context."""
        ctx = current_run_context()
        if ctx is not None and ctx.deps is self._call and all(seen is not ctx for seen in self._seen):
            self._seen.append(ctx)

    def direct_hold(self) -> SiblingHold | None:
        """The hold a call made from Python counts in: this call's (calls made side by side from an entry's function
        are siblings), or None inside this call's agent run (a tool's body), whose tool call it is part of (a
        suspension the tool does not catch is held as that tool call's)."""
        ctx = current_run_context()
        return None if ctx is not None and ctx.deps is self._call else self.hold

    def lend(
        self, toolsets: Sequence[tuple[ToolsetUse, AbstractToolset[Any]]], *, defers: bool
    ) -> list[AbstractToolset[Any]]:
        """The wrappers to hand pydantic-ai for these (use, toolset) pairs, each with its name's rules; `defers`:
        whether one of them can ask or deny, so that the call's agent runs resolve its deferred calls (the gate's
        capability)."""
        self._defers = defers
        if defers:
            self.gate()  # made now: its capability goes with every agent run of the call
        plain: list[tuple[NameRules, AbstractToolset[Any]]] = []
        lent: list[LentToolset | LentGroup] = []
        for use, toolset in toolsets:
            rules = use.rules or self._approvals.rules(use.name)  # worked out at load, carried with its use
            if _is_plain(toolset):
                plain.append((rules, toolset))
            else:
                lent.append(LentToolset(toolset, rules=rules, lending=self))
        if plain:
            lent.insert(0, LentGroup(tuple(plain), self))
        self._lent = lent
        return list(lent)

    def release(self) -> None:
        """The call has ended: pydantic-ai's run contexts (in any context a tool's callback captured)
        keep the wrappers, the agent run's message list, its tool manager (its toolsets and
        capabilities), its prompt and its cancellation controller, which keeps the task that drove
        the run. Empty all of them."""
        for ctx in self._seen:
            ctx.messages.clear()
            forget_driving_task(ctx)
            ctx.tool_manager = None  # the run's tools, toolsets and capabilities
            ctx.prompt = None
        self._seen = []
        for lent in self._lent:
            lent.let_go()
        self._lent = []
        if self._gate is not None:
            self._gate.clear()
            self._gate = None

    async def call(
        self,
        rules: NameRules,
        inner: AbstractToolset[Any],
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[Any],
        tool: ToolsetTool[Any],
        *,
        direct: bool = False,
    ) -> Any:
        """Call `inner`'s tool `name` (lent under the name whose approval rules are `rules`) through the gate when
        anything can ask for it; `direct` for a call made from Python (`CallScope.call_tool`). A call that ends the
        run suspended (`RunSuspended`) raises once the call's other tool calls have ended or been suspended too."""
        hold = self.hold if not direct else self.direct_hold()
        if hold is not None:
            hold.running += 1
        try:
            self.saw_current()
            if rules.name in self._entry_tools:
                self._call._check_depth(name)  # the entry's tool: before anyone is asked about a call that cannot run

            metadata = tool.tool_def.metadata
            facts = None
            if metadata or rules.may_gate:
                facts = self._facts(rules, name, tool_args, ctx, metadata or {}, direct)
            if not direct:
                refuse_repeat(ctx, name, weighed=facts is not None)  # a refused call made again is not run
            if facts is None:  # nothing can ask for the call, unless the tool does
                try:
                    return await inner.call_tool(name, tool_args, ctx, tool)
                except ApprovalRequired:
                    if ctx.tool_call_approved:
                        raise
                facts = CallFacts(rules, name, tool_args, ctx.tool_call_id or "", direct=direct, asked=True)

            async def run(approved: bool) -> Any:
                called = replace(ctx, tool_call_approved=True) if approved and not ctx.tool_call_approved else ctx
                return await inner.call_tool(name, tool_args, called, tool)

            return await self.gate().call(facts, run)
        except RunSuspended:
            if hold is None:
                raise  # part of the tool call whose body made it
            if self._gate is not None:
                await self._gate.ask_deferred()  # the step's other questions, which its end would never ask
            await hold.settled()
            raise
        finally:
            if hold is not None:
                hold.ended()

    def _facts(
        self,
        rules: NameRules,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[Any],
        metadata: dict[str, Any],
        direct: bool,
    ) -> CallFacts | None:
        """The facts of a call the gate must see, or None when nothing but the tool itself can ask for it."""
        requires_approval = bool(metadata.get(_REQUIRES_APPROVAL))
        annotations: dict[str, Any] | None = None
        if "annotations" in metadata and not rules.declared:
            annotations = metadata["annotations"] or {}  # an MCP tool's: without a declared policy, they decide
        if not requires_approval and annotations is None and not rules.may_gate:
            return None  # its policy allows every call and the tool does not ask
        traits = ToolTraits.of(metadata, requires_approval=requires_approval)
        names = names_in(tool_args, metadata.get(TAKES_ATTACHMENTS))
        if (traits.read_only or traits.agent) and not requires_approval and not names and rules.safe_runs:
            return None  # declared safe, and nothing is declared for its toolset that could say otherwise
        if names is not None and not names:  # an empty list of attachments is left out of what policies see
            tool_args = {key: value for key, value in tool_args.items() if key != "attachments"}
        return CallFacts(
            rules,
            name,
            tool_args,
            ctx.tool_call_id or "",
            traits=traits,
            annotations=annotations,
            attachments=names or (),
            approved=ctx.tool_call_approved,
            direct=direct,
        )


def _claimed(lender: AbstractToolset[Any], tools: dict[str, ToolsetTool[Any]]) -> dict[str, ToolsetTool[Any]]:
    """The tools as the lender offers them: its own (as pydantic-ai's wrappers make theirs), so that
    what pydantic-ai keeps of a step (its tool manager, in every copy of its run context) reaches the
    lender, emptied at call end, and never the lent toolsets. Tools declared `requires_approval` are
    offered as ordinary tools: the gate asks for them."""
    for tool_name, item in tools.items():
        tool_def = item.tool_def
        if tool_def.kind == "unapproved":
            tool_def = replace(
                tool_def, kind="function", metadata={**(tool_def.metadata or {}), _REQUIRES_APPROVAL: True}
            )
        if (
            tool_def.toolset_id is None
            and type(item.toolset).id is not _NO_ID  # a Toolset's is None, unless its class chose one
            and (chosen := explicit_toolset_id(item.toolset)) is not None
        ):
            tool_def = replace(tool_def, toolset_id=chosen)  # as pydantic-ai stamps a toolset's own tools
        validator = item.args_validator
        if validator.__class__ is not ReadableArguments:  # (a Toolset's tools have theirs already)
            validator = object.__new__(ReadableArguments)  # (no Python-level call: a tool costs no more per step)
            validator.inner = item.args_validator
        tools[tool_name] = replace(item, toolset=lender, tool_def=tool_def, args_validator=validator)
    return tools


@dataclass
class GatedToolset(WrapperToolset[Any]):
    """Passes each call to a tool of the wrapped toolset through the call's approval gate."""

    rules: NameRules = field(kw_only=True, repr=False)
    """The approval rules of the name it is lent under."""
    lending: Lending = field(kw_only=True, repr=False)

    @property
    def name(self) -> str:
        """The toolset's name in its entry."""
        return self.rules.name

    @property
    def label(self) -> str:
        return f"toolset {self.name!r} ({self.wrapped.label})"

    @property
    def tool_name_conflict_hint(self) -> str:
        return self.wrapped.tool_name_conflict_hint

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        self.lending.saw(ctx)
        return _claimed(self, await super().get_tools(ctx))

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        return await self.lending.call(self.rules, self.wrapped, name, tool_args, ctx, tool)

    async def call_direct(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """`call_tool` for a call made from Python (`CallScope.call_tool`)."""
        return await self.lending.call(self.rules, self.wrapped, name, tool_args, ctx, tool, direct=True)


@dataclass
class LentToolset(GatedToolset):
    """Lends one scope-owned toolset to an agent run: the scope, not pydantic-ai, enters and exits it."""

    async def __aenter__(self) -> LentToolset:
        return self

    async def __aexit__(self, *args: Any) -> bool | None:
        return None

    async def for_run(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        fresh = await self.wrapped.for_run(ctx)
        if fresh is self.wrapped:
            return self
        return GatedToolset(fresh, rules=self.rules, lending=self.lending)  # pydantic-ai owns a per-run copy

    def let_go(self) -> None:
        self.wrapped = _SPENT


class LentGroup(AbstractToolset[Any]):
    """Lends several plain scope-owned toolsets to an agent run as one toolset, each still gated by its name."""

    def __init__(self, members: tuple[tuple[NameRules, AbstractToolset[Any]], ...], lending: Lending) -> None:
        self.members = members
        """Each toolset with the approval rules of the name it is lent under."""
        self.lending = lending
        self._owners: dict[str, tuple[NameRules, AbstractToolset[Any]]] = {}

    id: str | None = None  # a class attribute, not a property: pydantic-ai reads it at every step

    @property
    def label(self) -> str:
        return "toolsets " + ", ".join(repr(rules.name) for rules, _ in self.members)

    async def __aenter__(self) -> LentGroup:
        return self

    async def __aexit__(self, *args: Any) -> bool | None:
        return None

    async def get_instructions(self, ctx: RunContext[Any]) -> list[str | InstructionPart] | None:
        found: list[str | InstructionPart] = []
        for _, member in self.members:
            if type(member).get_instructions is _NO_INSTRUCTIONS:
                continue  # pydantic-ai's own, which gives none: no coroutine to await before every request
            instructions = await member.get_instructions(ctx)
            if isinstance(instructions, str | InstructionPart):
                found.append(instructions)
            elif instructions:
                found.extend(instructions)
        return found or None

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        self.lending.saw(ctx)
        tools: dict[str, ToolsetTool[Any]] = {}
        owners = self._owners
        for rules, member in self.members:
            for tool_name, item in (await member.get_tools(ctx)).items():
                tools[tool_name] = item
                owners[tool_name] = (rules, member)
        return _claimed(self, tools)

    def call_tool(  # the lending's coroutine itself: one frame less, resumed at every step of the call
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Coroutine[Any, Any, Any]:
        rules, member = self._owners[name]
        return self.lending.call(rules, member, name, tool_args, ctx, tool)

    async def call_direct(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """`call_tool` for a call made from Python (`CallScope.call_tool`)."""
        rules, member = self._owners[name]
        return await self.lending.call(rules, member, name, tool_args, ctx, tool, direct=True)

    def let_go(self) -> None:
        self.members = ()
        self._owners = {}


_SPENT: AbstractToolset[Any] = FunctionToolset([], id="llm_do.spent")
"""What a lent toolset wraps once its call has ended."""


def _is_plain(toolset: AbstractToolset[Any]) -> bool:
    """Whether pydantic-ai would treat `toolset` as a plain collection of tools: an `llm_do.Toolset`
    or a `FunctionToolset` that makes no per-run copies and, for a `Toolset`, writes no instructions."""
    cls = type(toolset)
    plain = _PLAIN.get(cls)
    if plain is None:
        plain = _PLAIN[cls] = (
            issubclass(cls, Toolset | FunctionToolset)
            and cls.for_run is AbstractToolset.for_run
            and cls.for_run_step is AbstractToolset.for_run_step
            and (issubclass(cls, FunctionToolset) or cls.get_instructions is AbstractToolset.get_instructions)
        )
    return plain
