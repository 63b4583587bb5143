"""`rewrite_module`: a project module written against the earlier llm-do's Python API, rewritten to today's.

The module is read as a concrete syntax tree (LibCST), so that what is not rewritten keeps its comments and
formatting. What has a rewrite that keeps its meaning is rewritten (docs/migrating.md lists each name); what has
none is left as it is, with a `# llm-do migrate:` comment above the statement saying what to check, and reported.
Only `llm-do migrate` imports this module (LibCST is imported with it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from ..errors import extra_missing

try:
    import libcst as cst
    import libcst.matchers as m
except ModuleNotFoundError as error:  # LibCST comes with the cli extra
    raise extra_missing("cli", "llm-do migrate (it rewrites Python with LibCST)", error.name or "libcst") from None

from .earlier import EARLIER_TOOLSETS
from .earlier_api import EARLIER_API
from .problems import Problem

__all__ = ["MARK", "ModuleContext", "Rewritten", "rewrite_module"]

MARK = "# llm-do migrate:"
"""How a comment the rewrite leaves for a person starts."""

_RUNTIME_TYPES = frozenset({"CallContext", "WorkerRuntime", "CallScope"})
"""The earlier llm-do's types of a tool's `ctx.deps` and of an entry function's runtime: today's `CallScope`."""
_INPUT_BASES = frozenset({"AgentArgs", "WorkerArgs"})
"""The earlier base classes of input models: a plain pydantic model today."""
_PROMPT_TYPES = {"PromptContent": "str | Attachment", "PromptMessages": "list[str | Attachment]"}
_FACTORY_DECORATORS = frozenset({"tool", "tool_plain"})
_INPUT_METHODS = ("prompt_messages", "input_parts")
_COMPAT = {"OpenAICompatibleProvider": "llm_do.project.compat"}
"""Earlier names kept, with today's behaviour, in a small compatibility module (a rewrite would change meaning)."""


@dataclass(frozen=True)
class ModuleContext:
    """What the rest of the project tells the rewrite of one module."""

    text_agents: frozenset[str] = frozenset()
    """Workers whose input is a text (no input model): a call with `{"input": TEXT}` passes the text today."""
    entry_functions: Mapping[str, str] = field(default_factory=dict)
    """Functions of this module that `project.json` named as the entry (`entry.function`), with their entry name."""


@dataclass
class Rewritten:
    """A module's new text (`None` when nothing changed) and what a person must check, each marked in the text."""

    text: str | None
    notes: list[Problem]
    toolsets: dict[str, str] = field(default_factory=dict)
    """Earlier toolset factories made `Toolset` classes: the toolset name and the class's name."""


def rewrite_module(path: Path, text: str, context: ModuleContext) -> Rewritten:
    """`path`'s source `text` with its uses of the earlier llm-do's API rewritten. A file that does not parse is
    left as it is (loading it says why)."""
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return Rewritten(None, [])
    earlier = _earlier_imports(module)
    registry = _registry(module)
    if not earlier and not registry.assignments:
        return Rewritten(None, [])
    used_before = _names_used(module)
    rewriter = _Rewriter(earlier, registry, context)
    new = module.visit(rewriter)
    new = _with_imports(new, rewriter.needed, earlier, used_before)
    code = new.code
    notes = [Problem(path, line, note) for line, note in _marked(code)]
    return Rewritten(code if code != text else None, notes, rewriter.converted)


# -- what the module imports of the earlier llm-do -----------------------------------------------------------------


def _earlier_imports(module: cst.Module) -> dict[str, str]:
    """Each name the module imports from an `llm_do` module of the earlier API (local name -> earlier name)."""
    found: dict[str, str] = {}
    for node in _walk(module):
        if isinstance(node, cst.ImportFrom) and node.relative == () and not isinstance(node.names, cst.ImportStar):
            module_name = _dotted(node.module)
            if module_name is None or not (module_name == "llm_do" or module_name.startswith("llm_do.")):
                continue
            for alias in node.names:
                name = _dotted(alias.name)
                if name is None or not _is_earlier(module_name, name):
                    continue
                local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
                found[local] = name
            for alias in node.names:  # the design era's @entry((args, runtime)) beside its other names
                name = _dotted(alias.name)
                if name == "entry" and module_name == "llm_do.runtime" and found:
                    found["entry"] = "entry"
    return found


def _is_earlier(module: str, name: str) -> bool:
    """Whether `from module import name` is the earlier llm-do's API (today's llm-do has no such name there)."""
    from .earlier_api import names_today  # the import check, shared with what check reports

    return not names_today(module, name)


def _dotted(node: cst.BaseExpression | cst.Attribute | cst.Name | None) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def _walk(node: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    stack = [node]
    while stack:
        item = stack.pop()
        found.append(item)
        stack.extend(item.children)
    return found


def _names_used(node: cst.CSTNode) -> set[str]:
    """Every name read in `node`, outside import statements."""
    used: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, cst.Import | cst.ImportFrom):
            continue
        if isinstance(item, cst.Name):
            used.add(item.value)
        stack.extend(item.children)
    return used


# -- the toolset registry: TOOLSETS = {...} and NAME = ToolsetSpec(factory=F) ---------------------------------


@dataclass
class _Registry:
    factories: dict[str, str] = field(default_factory=dict)
    """Factory function -> the toolset name it was registered under."""
    assignments: list[cst.SimpleStatementLine] = field(default_factory=list)
    """The statements that registered them."""
    others: list[str] = field(default_factory=list)
    """Names registered with something other than a module-level function (left as they are)."""


def _registry(module: cst.Module) -> _Registry:
    registry = _Registry()
    functions = {s.name.value for s in module.body if isinstance(s, cst.FunctionDef)}
    for statement in module.body:
        if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
            continue
        small = statement.body[0]
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
            continue
        target = small.targets[0].target
        if not isinstance(target, cst.Name):
            continue
        if target.value == "TOOLSETS" and isinstance(small.value, cst.Dict):
            registry.assignments.append(statement)
            for element in small.value.elements:
                key = element.key if isinstance(element, cst.DictElement) else None
                value = element.value if isinstance(element, cst.DictElement) else None
                name = _string(key)
                if name is not None and isinstance(value, cst.Name) and value.value in functions:
                    registry.factories[value.value] = name
                else:
                    registry.others.append(name or "?")
        elif m.matches(small.value, m.Call(func=m.Name("ToolsetSpec"))):
            call = small.value
            assert isinstance(call, cst.Call)
            factory = next(
                (arg.value for arg in call.args if arg.keyword is None or arg.keyword.value == "factory"), None
            )
            if isinstance(factory, cst.Name) and factory.value in functions and len(call.args) == 1:
                registry.assignments.append(statement)
                registry.factories[factory.value] = target.value
    return registry


def _string(node: cst.BaseExpression | None) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _class_name(toolset: str) -> str:
    """The class of toolset `toolset`: its name in CamelCase (`calc_tools` -> `CalcTools`), whose snake_case name
    without a `Toolset` suffix is the toolset's name again (docs/projects.md)."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[_\W]+", toolset) if part) or "Tools"


# -- the rewrite ----------------------------------------------------------------------------------------------


class _Rewriter(cst.CSTTransformer):
    def __init__(self, earlier: Mapping[str, str], registry: _Registry, context: ModuleContext) -> None:
        super().__init__()
        self.earlier = earlier
        self.registry = registry
        self.context = context
        self.needed: dict[str, set[str]] = {}
        """Imports to add: module -> names."""
        self.converted: dict[str, str] = {}
        self.functions: dict[str, cst.FunctionDef] = {}
        self._entry_params: list[tuple[str, str] | None] = []
        """For each function being rewritten: (input parameter, runtime parameter) of an entry function."""
        self._receivers: list[set[str]] = [set()]
        self._dict_inputs: list[dict[str, cst.BaseExpression]] = [{}]

    def need(self, module: str, name: str) -> None:
        self.needed.setdefault(module, set()).add(name)

    # module level: factories become Toolset classes, registries go, register_model_factory becomes an attribute

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        self.functions = {s.name.value: s for s in updated.body if isinstance(s, cst.FunctionDef)}
        body: list[cst.BaseStatement] = []
        failed: dict[str, str] = {}
        for statement in updated.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value in self.registry.factories:
                name = self.registry.factories[statement.name.value]
                made, why = self._toolset_class(statement, name, updated)
                if made is None:
                    failed[statement.name.value] = why
                    body.append(_noted(statement, f"{statement.name.value} is not rewritten ({why}): " + _BY_HAND))
                else:
                    self.converted[name] = made.name.value
                    body.append(made)
                continue
            if isinstance(statement, cst.SimpleStatementLine) and _same_as_any(statement, self.registry.assignments):
                left = self._registry_left(statement, failed)
                if left is not None:
                    body.append(left)
                continue
            body.append(self._module_statement(statement))
        return updated.with_changes(body=body)

    def _registry_left(self, statement: cst.SimpleStatementLine, failed: Mapping[str, str]) -> cst.BaseStatement | None:
        """A registry statement once its factories are classes: gone, or kept with a note for what is left."""
        small = statement.body[0]
        assert isinstance(small, cst.Assign)
        if isinstance(small.value, cst.Dict):
            kept = [
                element
                for element in small.value.elements
                if not (
                    isinstance(element, cst.DictElement)
                    and isinstance(element.value, cst.Name)
                    and element.value.value in self.registry.factories
                    and element.value.value not in failed
                )
            ]
            if not kept:
                return None
            names = ", ".join(_string(e.key) or "?" for e in kept if isinstance(e, cst.DictElement))
            new = statement.with_changes(body=[small.with_changes(value=small.value.with_changes(elements=kept))])
            return _noted(new, f"TOOLSETS is not read today; {names} left to rewrite by hand: " + _BY_HAND)
        call = small.value
        assert isinstance(call, cst.Call)
        factory = call.args[0].value
        if isinstance(factory, cst.Name) and factory.value in failed:
            return _noted(statement, "ToolsetSpec(factory=...) is not read today: " + _BY_HAND)
        return None

    def _module_statement(self, statement: cst.BaseStatement) -> cst.BaseStatement:
        """`register_model_factory(PREFIX, build)` as the module attribute `model_factory` declares."""
        if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
            return statement
        small = statement.body[0]
        if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
            return statement
        call = small.value
        if not (isinstance(call.func, cst.Name) and self.earlier.get(call.func.value) == "register_model_factory"):
            return statement
        prefix = _string(call.args[0].value) if call.args else None
        if prefix is None or len(call.args) != 2 or any(arg.keyword is not None for arg in call.args):
            return _noted(statement, "register_model_factory: write NAME = model_factory(PREFIX, build) by hand")
        self.need("llm_do.project", "model_factory")
        attribute = re.sub(r"\W", "_", prefix)
        attribute = attribute if attribute.isidentifier() else f"prefix_{attribute}"
        assign = cst.Assign(
            targets=[cst.AssignTarget(cst.Name(attribute))],
            value=call.with_changes(func=cst.Name("model_factory")),
        )
        return statement.with_changes(body=[assign])

    # toolset factories

    def _toolset_class(
        self, factory: cst.FunctionDef, name: str, module: cst.Module
    ) -> tuple[cst.ClassDef | None, str]:
        """The `Toolset` class a factory `def build(ctx): ts = FunctionToolset(); ...; return ts` stands for: its
        tools as methods, and the approval config it set as the class's `default_policy`. None (and why) for a
        factory of another shape."""
        statements = list(factory.body.body) if isinstance(factory.body, cst.IndentedBlock) else []
        docstring = factory.get_docstring(clean=False)
        if docstring is not None:
            statements = statements[1:]
        if not statements:
            return None, "it builds nothing"
        first = statements[0]
        variable = _made_function_toolset(first)
        if variable is None:
            return None, "it does not start by making a FunctionToolset()"
        locals_ = {variable, *(p.name.value for p in factory.params.params)}
        methods: list[cst.FunctionDef] = []
        config: dict[str, str] | None = None
        returned = False
        for statement in statements[1:]:
            if returned:
                return None, "it does more after its return"
            if isinstance(statement, cst.FunctionDef):
                decorators = [_decorator_of(d, variable) for d in statement.decorators]
                if decorators != ["tool"] and decorators != ["tool_plain"]:
                    return None, f"{statement.name.value} is not a plain @{variable}.tool function"
                locals_.add(statement.name.value)
                methods.append(statement)
                continue
            registered = _registered_function(statement, variable)
            if registered is not None:
                function = self.functions.get(registered)
                if function is None:
                    return None, f"{registered} is not a function of this module"
                methods.append(_delegating(function))
                continue
            given = _approval_config(statement, variable, self.earlier)
            if given is not None:
                if not given:
                    return None, "its approval config is not a literal of pre_approved flags"
                config = given
                continue
            if m.matches(statement, m.SimpleStatementLine(body=[m.Return(value=m.Name(variable))])):
                returned = True
                continue
            return None, "it does more than make a FunctionToolset and register tools"
        if not returned:
            return None, f"it does not return {variable}"
        for method in methods:
            clash = _names_used(method.body) & (locals_ - {method.name.value})
            if clash:
                return None, f"{method.name.value} uses {', '.join(sorted(clash))} of the factory"
        self.need("llm_do", "Toolset")
        self.need("llm_do", "tool")
        self.need("llm_do", "ToolPolicy")
        class_name = _class_name(name)
        body: list[cst.BaseStatement] = []
        if docstring is not None:
            assert isinstance(factory.body, cst.IndentedBlock)
            body.append(factory.body.body[0])
        if _snake(class_name) != name:
            body.append(cst.parse_statement(f"name = {name!r}"))
        body.append(cst.parse_statement(f"default_policy = {_policy(config, methods)}"))
        body.extend(_method(method) for method in methods)
        made = cst.ClassDef(
            name=cst.Name(class_name),
            bases=[cst.Arg(cst.Name("Toolset"))],
            body=cst.IndentedBlock(body=body),
            leading_lines=factory.leading_lines,
        )
        return made, ""

    # functions: entry functions, tools whose ctx.deps runs agents

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        entry_name = self.context.entry_functions.get(node.name.value)
        decorated = any(self._earlier_entry_decorator(d) for d in node.decorators)
        params = [p.name.value for p in node.params.params]
        receivers = {
            p.name.value
            for p in node.params.params
            if p.annotation is not None and _annotation_names(p.annotation.annotation) & self._runtime_names()
        }
        if (entry_name is not None or decorated) and len(params) >= 2:
            self._entry_params.append((params[0], params[1]))
            receivers.add(params[1])
        else:
            self._entry_params.append(None)
        receivers |= {
            target for target, value in _assignments(node.body) if m.matches(value, m.Attribute(attr=m.Name("deps")))
        }
        self._receivers.append(receivers | self._receivers[-1])
        self._dict_inputs.append(self._dicts_passed(node, receivers | self._receivers[-2]))

    def _runtime_names(self) -> set[str]:
        return {local for local, name in self.earlier.items() if name in _RUNTIME_TYPES}

    def _earlier_entry_decorator(self, decorator: cst.Decorator) -> bool:
        target = decorator.decorator
        func = target.func if isinstance(target, cst.Call) else target
        return isinstance(func, cst.Name) and self.earlier.get(func.value) == "entry"

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        entry = self._entry_params.pop()
        self._receivers.pop()
        self._dict_inputs.pop()
        entry_name = self.context.entry_functions.get(original.name.value)
        decorated = any(self._earlier_entry_decorator(d) for d in original.decorators)
        if entry is None or not (entry_name is not None or decorated):
            return updated
        params = list(updated.params.params)
        first, second = params[0], params[1]
        annotation = original.params.params[0].annotation
        if (
            annotation is not None
            and not self._typed_entry(original)
            and {self.earlier.get(n) for n in _annotation_names(annotation.annotation)}
            & {*_INPUT_BASES, *_PROMPT_TYPES}
        ):
            first = first.with_changes(annotation=annotation.with_changes(annotation=cst.Name("str")))  # its text
        params[0] = second.with_changes(comma=first.comma)
        params[1] = first.with_changes(comma=second.comma)
        self.need("llm_do", "entry")
        decorators = [self._entry_decorator(d) for d in updated.decorators]
        if entry_name is not None and not decorated:
            call = cst.parse_expression(f'entry(name="{entry_name}")')
            decorators.insert(0, cst.Decorator(decorator=call))
        new = updated.with_changes(params=updated.params.with_changes(params=params), decorators=decorators)
        input_param = entry[0]
        if not self._typed_entry(original):
            body = new.body.visit(_InputText(input_param, self.earlier))
            assert isinstance(body, cst.BaseSuite)
            new = new.with_changes(body=_without_dead_parts(body, input_param))
            if _read_as_parts(new.body, input_param):
                new = _noted(
                    new,
                    f"{input_param} is the entry's input itself today (its text), not a list of prompt parts or an "
                    "input model: check how the function reads it",
                )
        return new

    def _typed_entry(self, function: cst.FunctionDef) -> bool:
        """Whether an earlier `@entry` gave the function an input model (`schema_in=`): it still gets one."""
        return any(
            self._earlier_entry_decorator(decorator)
            and isinstance(decorator.decorator, cst.Call)
            and any(arg.keyword is not None and arg.keyword.value == "schema_in" for arg in decorator.decorator.args)
            for decorator in function.decorators
        )

    def _entry_decorator(self, decorator: cst.Decorator) -> cst.Decorator:
        """The earlier `@entry(NAME, toolsets=[...])` as today's `@entry(name=NAME, toolsets=[...])`, with the
        earlier built-in toolset names that have an equivalent written as today's."""
        if not self._earlier_entry_decorator(decorator) or not isinstance(decorator.decorator, cst.Call):
            return decorator
        call = decorator.decorator
        args = []
        for index, arg in enumerate(call.args):
            if index == 0 and arg.keyword is None:
                arg = arg.with_changes(
                    keyword=cst.Name("name"),
                    equal=cst.AssignEqual(
                        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
                    ),
                )
            if arg.keyword is not None and arg.keyword.value == "toolsets" and isinstance(arg.value, cst.List):
                arg = arg.with_changes(
                    value=arg.value.with_changes(elements=[_renamed_toolset(element) for element in arg.value.elements])
                )
            args.append(arg)
        return decorator.with_changes(decorator=call.with_changes(func=cst.Name("entry"), args=args))

    def _dicts_passed(self, function: cst.FunctionDef, receivers: set[str]) -> dict[str, cst.BaseExpression]:
        """The variables this function passes to `call_agent` of a text agent that it assigned once, from a dict
        with only an `input` key: name -> that input."""
        passed = {
            arg.value
            for call in _calls(function.body)
            if self._agent_call(call, receivers) is not None
            for arg in call.args[1:2]
            if isinstance(arg.value, cst.Name)
        }
        assigned: dict[str, list[cst.BaseExpression]] = {}
        for target, value in _assignments(function.body):
            assigned.setdefault(target, []).append(value)
        found: dict[str, cst.BaseExpression] = {}
        for name in passed:
            values = assigned.get(name.value, [])
            if len(values) == 1 and isinstance(values[0], cst.Dict):
                keys = _dict_keys(values[0])
                if keys is not None and set(keys) == {"input"}:
                    found[name.value] = keys["input"]
        return found

    def _agent_call(self, call: cst.Call, receivers: set[str]) -> str | None:
        """The agent a `runtime.call_agent("name", ...)` call names, when its receiver is a runtime."""
        func = call.func
        if not (
            isinstance(func, cst.Attribute) and func.attr.value == "call_agent" and _is_runtime(func.value, receivers)
        ):
            return None
        return _string(call.args[0].value) if call.args else None

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        target = updated.targets[0].target if len(updated.targets) == 1 else None
        inputs = self._dict_inputs[-1]
        if isinstance(target, cst.Name) and target.value in inputs and isinstance(original.value, cst.Dict):
            keys = _dict_keys(updated.value) if isinstance(updated.value, cst.Dict) else None
            if keys is not None and set(keys) == {"input"}:
                return updated.with_changes(value=_grouped(keys["input"]))
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        receivers = self._receivers[-1]
        func = updated.func
        if isinstance(func, cst.Attribute) and _is_runtime(func.value, receivers):
            if func.attr.value == "call" and self._entry_params and self._design_era():
                return updated.with_changes(func=func.with_changes(attr=cst.Name("call_tool")))
            if func.attr.value == "call_agent":
                return self._agent_call_today(updated)
        return updated

    def _design_era(self) -> bool:
        """Whether the earlier API in use is the design era's (`WorkerRuntime.call` called a tool by name)."""
        return "WorkerRuntime" in self.earlier.values()

    def _agent_call_today(self, call: cst.Call) -> cst.Call:
        """`call_agent("name", {"input": TEXT, "attachments": FILES})` to a text agent is
        `call_agent("name", TEXT, attachments=FILES)` today."""
        if len(call.args) != 2 or any(arg.keyword is not None for arg in call.args):
            return call
        agent = _string(call.args[0].value)
        given = call.args[1].value
        if agent is None or agent not in self.context.text_agents:
            return call
        if isinstance(given, cst.Name) and given.value in self._dict_inputs[-1]:
            return call  # its assignment is rewritten to the text
        keys = _dict_keys(given) if isinstance(given, cst.Dict) else None
        if keys is None or "input" not in keys or not set(keys) <= {"input", "attachments"}:
            return call
        args = [call.args[0], call.args[1].with_changes(value=keys["input"])]
        if "attachments" in keys:
            args[1] = args[1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.append(cst.Arg(keys["attachments"], keyword=cst.Name("attachments"), equal=_EQUAL))
        return call.with_changes(args=args)

    # names

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)  # an attribute named like an earlier name is not one

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        bases = [arg.value for arg in original.bases]
        if not any(isinstance(b, cst.Name) and self.earlier.get(b.value) in _INPUT_BASES for b in bases):
            return updated
        self.need("pydantic", "BaseModel")
        methods = [
            s.name.value
            for s in (updated.body.body if isinstance(updated.body, cst.IndentedBlock) else ())
            if isinstance(s, cst.FunctionDef) and s.name.value in _INPUT_METHODS
        ]
        if methods:
            return _noted(
                updated,
                f"{' and '.join(methods)} {'is' if len(methods) == 1 else 'are'} not called today: the model reads "
                "this input as JSON of its fields; say in the worker's instructions what they told the model",
            )
        return updated

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        earlier = self.earlier.get(original.value)
        if earlier is None:
            return updated
        if earlier in _RUNTIME_TYPES:
            self.need("llm_do", "CallScope")
            return updated.with_changes(value="CallScope")
        if earlier in _INPUT_BASES:
            self.need("pydantic", "BaseModel")
            return updated.with_changes(value="BaseModel")
        if earlier in _PROMPT_TYPES:
            self.need("llm_do", "Attachment")
            return cst.parse_expression(_PROMPT_TYPES[earlier])
        if earlier == "entry":
            return updated.with_changes(value="entry")
        if earlier in _COMPAT:
            self.need(_COMPAT[earlier], earlier)
        return updated


class _InputText(cst.CSTTransformer):
    """In an entry function: `get_display_text(input.prompt_messages())` (directly or through a variable) is the
    input itself today, which is the text given."""

    def __init__(self, param: str, earlier: Mapping[str, str]) -> None:
        super().__init__()
        self.param = param
        self.earlier = earlier

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = updated.func
        if isinstance(func, cst.Name) and self.earlier.get(func.value) == "get_display_text" and len(updated.args) == 1:
            given = updated.args[0].value
            if _parts_of(given, self.param) or isinstance(given, cst.Name):
                return (
                    cst.Name(self.param)
                    if _parts_of(given, self.param)
                    else updated.with_changes(
                        args=[updated.args[0].with_changes(value=cst.Name(f"{_PARTS}{given.value}"))]  # type: ignore[attr-defined]
                    )
                )
        return updated


_PARTS = "__llm_do_parts__"


def _parts_of(node: cst.BaseExpression, param: str) -> bool:
    """`param.prompt_messages()`."""
    return (
        isinstance(node, cst.Call)
        and not node.args
        and m.matches(node.func, m.Attribute(value=m.Name(param), attr=m.Name("prompt_messages")))
    )


def _without_dead_parts(body: cst.BaseSuite, param: str) -> cst.BaseSuite:
    """`parts = input.prompt_messages()` then `get_display_text(parts)`: the call is the input, the assignment goes
    (when `parts` is read nowhere else)."""
    marked = {item.value for item in _walk(body) if isinstance(item, cst.Name) and item.value.startswith(_PARTS)}
    variables = {name.removeprefix(_PARTS) for name in marked}
    assignments = _assignments(body)
    assigned = {target for target, value in assignments if _parts_of(value, param)}
    names = [item.value for item in _walk(body) if isinstance(item, cst.Name)]
    dead = {name for name in variables & assigned if names.count(name) == [t for t, _ in assignments].count(name)}
    return body.visit(_DeadParts(param, dead))  # type: ignore[return-value]


class _DeadParts(cst.CSTTransformer):
    def __init__(self, param: str, dead: set[str]) -> None:
        super().__init__()
        self.param = param
        self.dead = dead

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        if updated.value.startswith(_PARTS):
            name = updated.value.removeprefix(_PARTS)
            return cst.Name(self.param) if name in self.dead else cst.Name(name)
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if len(updated.args) == 1 and m.matches(updated.args[0].value, m.Name(self.param)) and self.dead:
            func = updated.func
            if isinstance(func, cst.Name) and func.value == "get_display_text":
                return cst.Name(self.param)
        return updated

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.RemovalSentinel:
        small = updated.body[0] if len(updated.body) == 1 else None
        if (
            isinstance(small, cst.Assign)
            and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)
            and small.targets[0].target.value in self.dead
            and _parts_of(small.value, self.param)
        ):
            return cst.RemoveFromParent()
        return updated


def _read_as_parts(body: cst.BaseSuite, param: str) -> bool:
    """Whether an entry function reads its input as the earlier parts or model: `input.x`, `input[i]`, or
    iterating over it."""
    for item in _walk(body):
        if isinstance(item, cst.Attribute | cst.Subscript) and m.matches(item.value, m.Name(param)):
            return True
        if isinstance(item, cst.For | cst.CompFor) and m.matches(item.iter, m.Name(param)):
            return True
    return False


_BY_HAND = (
    "make it an llm_do.Toolset subclass whose @tool methods are its tools, with the approvals it set as the "
    "class's default_policy (docs/migrating.md)"
)
_EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def _grouped(node: cst.BaseExpression) -> cst.BaseExpression:
    """`node` in parentheses when it spans lines outside a string (it came out of a dict's braces)."""
    if node.lpar or isinstance(node, cst.SimpleString | cst.FormattedString | cst.ConcatenatedString):
        return node
    if "\n" not in cst.Module([]).code_for_node(node):
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _same_as_any(statement: cst.BaseStatement, statements: Sequence[cst.BaseStatement]) -> bool:
    return any(statement.deep_equals(other) for other in statements)


def _snake(class_name: str) -> str:
    base = class_name.removesuffix("Toolset") or class_name
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", base).lower()


def _made_function_toolset(statement: cst.BaseStatement) -> str | None:
    """`ts = FunctionToolset()`: the variable's name."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return None
    small = statement.body[0]
    if (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
        and m.matches(small.value, m.Call(func=m.Name("FunctionToolset"), args=[]))
    ):
        return small.targets[0].target.value
    return None


def _decorator_of(decorator: cst.Decorator, variable: str) -> str | None:
    """`@ts.tool` -> "tool", `@ts.tool_plain` -> "tool_plain"; None for another decorator."""
    target = decorator.decorator
    if isinstance(target, cst.Attribute) and m.matches(target.value, m.Name(variable)):
        name = target.attr.value
        return name if name in _FACTORY_DECORATORS else None
    return None


def _registered_function(statement: cst.BaseStatement, variable: str) -> str | None:
    """`ts.tool(function)`: the function's name."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return None
    small = statement.body[0]
    if not isinstance(small, cst.Expr) or not isinstance(small.value, cst.Call):
        return None
    call = small.value
    if (
        isinstance(call.func, cst.Attribute)
        and m.matches(call.func.value, m.Name(variable))
        and call.func.attr.value in _FACTORY_DECORATORS
        and len(call.args) == 1
        and call.args[0].keyword is None
        and isinstance(call.args[0].value, cst.Name)
    ):
        return call.args[0].value.value
    return None


def _approval_config(statement: cst.BaseStatement, variable: str, earlier: Mapping[str, str]) -> dict[str, str] | None:
    """`set_toolset_approval_config(ts, {"tool": {"pre_approved": True}, ...})`: each tool's decision ("allow"
    for pre-approved, else "ask"); an empty mapping for a config that is no such literal; None for another
    statement."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return None
    small = statement.body[0]
    if not isinstance(small, cst.Expr) or not isinstance(small.value, cst.Call):
        return None
    call = small.value
    if not (isinstance(call.func, cst.Name) and earlier.get(call.func.value) == "set_toolset_approval_config"):
        return None
    if len(call.args) != 2 or not m.matches(call.args[0].value, m.Name(variable)):
        return {}
    given = call.args[1].value
    tools = _dict_keys(given) if isinstance(given, cst.Dict) else None
    if tools is None:
        return {}
    decisions: dict[str, str] = {}
    for tool, options in tools.items():
        flags = _dict_keys(options) if isinstance(options, cst.Dict) else None
        if flags is None or set(flags) - {"pre_approved"}:
            return {}
        flag = flags.get("pre_approved")
        if flag is not None and not m.matches(flag, m.Name("True") | m.Name("False")):
            return {}
        decisions[tool] = "allow" if flag is not None and m.matches(flag, m.Name("True")) else "ask"
    return decisions


def _dict_keys(node: cst.Dict) -> dict[str, cst.BaseExpression] | None:
    """A dict literal's string keys and values; None when a key is not a string literal (or `**`)."""
    found: dict[str, cst.BaseExpression] = {}
    for element in node.elements:
        if not isinstance(element, cst.DictElement):
            return None
        key = _string(element.key)
        if key is None:
            return None
        found[key] = element.value
    return found


def _policy(config: Mapping[str, str] | None, methods: Sequence[cst.FunctionDef]) -> str:
    """The `ToolPolicy` of an earlier approval config: what was pre-approved runs, every other tool asks, as the
    earlier llm-do asked before every tool it did not pre-approve."""
    allowed = {tool: decision for tool, decision in (config or {}).items() if decision == "allow"}
    if not allowed:
        return 'ToolPolicy(default="ask")'
    items = [f'"{tool}": "{decision}"' for tool, decision in allowed.items()]
    line = f'ToolPolicy(default="ask", tools={{{", ".join(items)}}})'
    if len(line) <= 90:
        return line
    listed = "".join(f"        {item},\n" for item in items)  # indented from the statement's own indentation
    return f'ToolPolicy(\n    default="ask",\n    tools={{\n{listed}    }},\n)'


def _method(function: cst.FunctionDef) -> cst.FunctionDef:
    """A tool function of a factory as a method of its `Toolset` class: `self` first, `@tool` its decorator."""
    params = function.params
    after = function.whitespace_before_params
    spacing = after if isinstance(after, cst.ParenthesizedWhitespace) else cst.SimpleWhitespace(" ")
    self_param = cst.Param(cst.Name("self"), comma=cst.Comma(whitespace_after=spacing))
    if not params.params:
        self_param = cst.Param(cst.Name("self"))
    new_params = params.with_changes(params=[self_param, *params.params])
    return function.with_changes(
        params=new_params,
        decorators=[cst.Decorator(decorator=cst.Name("tool"))],
        leading_lines=function.leading_lines or [cst.EmptyLine(indent=False)],
    )


def _delegating(function: cst.FunctionDef) -> cst.FunctionDef:
    """A tool registered from a module function (`ts.tool(fetch)`): a method of the same signature and docstring
    that calls it."""
    names = [p.name.value for p in function.params.params]
    takes_ctx = (
        bool(function.params.params)
        and function.params.params[0].annotation is not None
        and ("RunContext" in _annotation_names(function.params.params[0].annotation.annotation))
    )
    arguments = ", ".join(
        [*(["ctx"] if takes_ctx else []), *(f"{name}={name}" for name in names[1 if takes_ctx else 0 :])]
    )
    call = f"{'await ' if function.asynchronous else ''}{function.name.value}({arguments})"
    body: list[cst.BaseStatement] = []
    docstring = function.get_docstring(clean=False)
    if docstring is not None and isinstance(function.body, cst.IndentedBlock):
        body.append(_indented_docstring(function.body.body[0]))
    body.append(cst.parse_statement(f"return {call}"))
    params = function.params
    if takes_ctx:
        first = params.params[0].with_changes(name=cst.Name("ctx"))
        params = params.with_changes(params=[first, *params.params[1:]])
    return function.with_changes(
        params=params, body=cst.IndentedBlock(body=body), decorators=[], leading_lines=[cst.EmptyLine(indent=False)]
    )


def _indented_docstring(statement: cst.BaseStatement) -> cst.BaseStatement:
    """A module function's docstring statement, its lines indented one level more (it becomes a method's)."""
    small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) else None
    string = small.value if isinstance(small, cst.Expr) else None
    if not isinstance(string, cst.SimpleString) or "\n" not in string.value:
        return statement
    first, *rest = string.value.split("\n")
    lines = [first, *(f"    {line}" if line.strip() else line for line in rest)]
    assert isinstance(statement, cst.SimpleStatementLine) and isinstance(small, cst.Expr)
    return statement.with_changes(body=[small.with_changes(value=string.with_changes(value="\n".join(lines)))])


def _annotation_names(node: cst.BaseExpression) -> set[str]:
    return {item.value for item in _walk(node) if isinstance(item, cst.Name)} | {
        part
        for item in _walk(node)
        if isinstance(item, cst.SimpleString)
        for part in re.findall(r"\w+", str(item.evaluated_value))
    }


def _is_runtime(node: cst.BaseExpression, receivers: set[str]) -> bool:
    """`ctx.deps`, or a name of a runtime (a parameter typed as one, or assigned from `ctx.deps`)."""
    if isinstance(node, cst.Name):
        return node.value in receivers
    return m.matches(node, m.Attribute(attr=m.Name("deps")))


def _assignments(node: cst.CSTNode) -> list[tuple[str, cst.BaseExpression]]:
    """`name = value` statements anywhere in `node` (not in nested functions)."""
    found: list[tuple[str, cst.BaseExpression]] = []
    stack = list(node.children)
    while stack:
        item = stack.pop()
        if isinstance(item, cst.FunctionDef | cst.ClassDef | cst.Lambda):
            continue
        if isinstance(item, cst.Assign) and len(item.targets) == 1 and isinstance(item.targets[0].target, cst.Name):
            found.append((item.targets[0].target.value, item.value))
        stack.extend(item.children)
    return found


def _calls(node: cst.CSTNode) -> list[cst.Call]:
    return [item for item in _walk(node) if isinstance(item, cst.Call)]


def _renamed_toolset(element: cst.BaseElement) -> cst.BaseElement:
    name = _string(element.value)
    today = EARLIER_TOOLSETS.get(name) if name is not None else None
    return element.with_changes(value=cst.SimpleString(f'"{today}"')) if today is not None else element


_Noted = TypeVar("_Noted", bound=cst.CSTNode)


def _noted(node: _Noted, note: str) -> _Noted:
    """`node` (a statement) with a `# llm-do migrate:` comment above it (once)."""
    comment = f"{MARK} {note}"
    lines = list(getattr(node, "leading_lines", ()))
    if any(line.comment is not None and line.comment.value == comment for line in lines):
        return node
    return node.with_changes(leading_lines=[*lines, cst.EmptyLine(comment=cst.Comment(comment))])


def _marked(code: str) -> list[tuple[int, str]]:
    """Each `# llm-do migrate:` comment of `code`: the line of the statement under it, and what it says."""
    lines = code.splitlines()
    found: list[tuple[int, str]] = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith(MARK):
            below = next((i for i in range(index + 1, len(lines)) if not lines[i].strip().startswith("#")), index)
            found.append((below + 1, stripped.removeprefix(MARK).strip()))
    return found


# -- imports ---------------------------------------------------------------------------------------------------


def _with_imports(
    module: cst.Module, needed: Mapping[str, set[str]], earlier: Mapping[str, str], used_before: set[str]
) -> cst.Module:
    """The module with the imports it needs now in place of its first import of the earlier API (else after its
    imports), and the names it no longer uses removed from their imports; an earlier name it still uses stays
    imported, with a note."""
    used = _names_used(module)
    stale = (used_before - used) | {local for local in earlier if local not in used}
    kept_earlier = {local: name for local, name in earlier.items() if local in used and name not in _REPLACED}
    wanted = {source: {name for name in names if name in used} for source, names in needed.items()}
    added = [
        cst.parse_statement(f"from {source} import {', '.join(sorted(names, key=_import_order))}")
        for source, names in sorted(wanted.items(), key=lambda item: _source_order(item[0]))
        if names
    ]
    imports = _Imports(stale, earlier, kept_earlier, added)
    module = module.visit(imports)
    if not added or imports.placed:
        return module
    body = list(module.body)
    at = _after_imports(body)
    return module.with_changes(body=[*body[:at], *added, *body[at:]])


_REPLACED = frozenset(
    {
        *_RUNTIME_TYPES,
        *_INPUT_BASES,
        *_PROMPT_TYPES,
        "entry",
        "set_toolset_approval_config",
        "ToolsetSpec",
        "register_model_factory",
        "get_display_text",
        *_COMPAT,
    }
)


def _import_order(name: str) -> tuple[int, str]:
    return (0 if name[:1].isupper() else 1, name)


def _source_order(source: str) -> tuple[int, str]:
    return (0 if source == "pydantic" else 1, source)


def _after_imports(body: Sequence[cst.BaseStatement]) -> int:
    index = 0
    for position, statement in enumerate(body):
        if isinstance(statement, cst.SimpleStatementLine) and all(
            isinstance(small, cst.Import | cst.ImportFrom) for small in statement.body
        ):
            index = position + 1
        elif position == 0 and m.matches(statement, m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString())])):
            index = 1
    return index


class _Imports(cst.CSTTransformer):
    """Removes the names the module no longer uses from its imports, and the earlier API's names it rewrote; puts
    today's imports (`added`) where the first module-level import of the earlier API was."""

    def __init__(
        self, stale: set[str], earlier: Mapping[str, str], kept: Mapping[str, str], added: Sequence[cst.BaseStatement]
    ) -> None:
        super().__init__()
        self.stale = stale
        self.earlier = earlier
        self.kept = kept
        self.added = added
        self.placed = False
        self._depth = 0

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._depth += 1

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        self._depth -= 1
        return updated

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement] | cst.RemovalSentinel:
        small = updated.body[0] if len(updated.body) == 1 else None
        if not isinstance(small, cst.ImportFrom | cst.Import):
            return updated
        if isinstance(small, cst.Import) or isinstance(small.names, cst.ImportStar):
            return updated
        module_name = _dotted(small.module)
        ours = module_name is not None and (module_name == "llm_do" or module_name.startswith("llm_do."))
        names = list(small.names)
        kept: list[cst.ImportAlias] = []
        notes = []
        for alias in names:
            asname = alias.asname.name if alias.asname is not None else None
            local = asname.value if isinstance(asname, cst.Name) else _dotted(alias.name) or ""
            if ours and local in self.earlier:
                if local in self.kept:
                    kept.append(alias)
                    earlier = self.earlier[local]
                    notes.append(f"{earlier}: the earlier llm-do's API; today: {EARLIER_API.get(earlier, _NONE)}")
                continue
            if local in self.stale:
                continue
            kept.append(alias)
        new: cst.SimpleStatementLine | None = updated
        if not kept:
            new = None
        elif len(kept) != len(names):
            last = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            new = updated.with_changes(body=[small.with_changes(names=[*kept[:-1], last])])
        for note in notes:
            new = _noted(new, note) if new is not None else None
        place = ours and len(kept) != len(names) and self._depth == 0 and not self.placed
        if place:
            self.placed = True
            statements: list[cst.BaseStatement] = [*([new] if new is not None else []), *self.added]
            if new is None and statements:
                statements[0] = statements[0].with_changes(leading_lines=updated.leading_lines)
            return cst.FlattenSentinel(statements) if statements else cst.RemoveFromParent()
        return new if new is not None else cst.RemoveFromParent()


_NONE = "none in today's llm-do (docs/migrating.md)"
