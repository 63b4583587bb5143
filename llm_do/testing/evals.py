"""`EntryTask`: an llm-do entry as a pydantic-evals task, each case in a run of its own.

Cases run at once and stay apart: each gets its own run, with its own overrides (`Runtime.run(overrides=...)`),
model and approver, so one case never reads another's database. Needs pydantic-evals (`llm-do[evals]`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic_ai import Agent
from pydantic_ai.models import Model

from llm_do import AgentEntry, Approver, Entry, LlmDoError, RunResult, Runtime, run_report

from .leaks import track_leaks
from .tree import call_tree

if TYPE_CHECKING:
    from pydantic_evals import Case, Dataset
    from pydantic_evals.lifecycle import CaseLifecycle
    from pydantic_evals.reporting import EvaluationReport

__all__ = ["EntryTask"]

InputsT = TypeVar("InputsT")
CaseOf = Callable[[Any], Any]
"""A function of a pydantic-evals `Case` (its `inputs`, `metadata`, `name`) that gives a value for that case."""

_CASE: ContextVar[Case[Any, Any, Any] | None] = ContextVar("llm_do.evals.case", default=None)


class EntryTask(Generic[InputsT]):
    """Run `entry` of `runtime` for each case of a pydantic-evals dataset.

    ```python
    task = EntryTask(runtime, "clerk", overrides=lambda case: {App.db: seeded(case.metadata["accounts"])})
    report = await task.evaluate(dataset, max_concurrency=10)
    ```

    `input` (default: the case's `inputs`), `overrides` (providers swapped for the case's run alone) and `model`
    (given to every agent of the runtime for the case's run, a script or a recording; pydantic-ai's
    `agent.override` holds per task) are each a value for every case or a function of the `Case`; `approver`
    answers every case's questions, `case_approver(case)` gives each case its own. Each case's output is the run's;
    the run's usage and call tree become the case's metrics (`requests`, `tool_calls`, `input_tokens`,
    `output_tokens`) and attributes (`calls`), also when the run fails. `evaluate` runs the dataset and then
    checks that nothing any case made outlives it (`LeakError`).
    """

    def __init__(
        self,
        runtime: Runtime,
        entry: Entry | str,
        *,
        input: Any = None,
        overrides: Mapping[Any, Any] | CaseOf | None = None,
        model: Model | str | CaseOf | None = None,
        approver: Approver | None = None,
        case_approver: CaseOf | None = None,
    ) -> None:
        self.runtime = runtime
        self.entry = entry if isinstance(entry, str) else entry.name
        runtime.entry(self.entry)  # (ConfigurationError for an entry the runtime did not load)
        self._input = input
        self._overrides = overrides
        self._model = model
        self._approver = approver
        self._case_approver = case_approver
        self.__name__ = f"llm-do entry {self.entry!r}"  # (pydantic-evals names a task by its function's name)

    async def __call__(self, inputs: InputsT) -> Any:
        case = _CASE.get()
        per_case = (self._input, self._overrides, self._model, self._case_approver)
        if case is None and any(callable(given) and not isinstance(given, Model) for given in per_case):
            raise LlmDoError(
                f"{self.__name__}: a per-case argument needs the case: run the dataset with task.evaluate(dataset), "
                "or dataset.evaluate(task, lifecycle=task.lifecycle)"
            )
        input_data = inputs if self._input is None else _for(case, self._input)
        overrides = _for(case, self._overrides)
        model = _for(case, self._model)
        approver = self._approver if self._case_approver is None else self._case_approver(case)
        with contextlib.ExitStack() as models:
            if model is not None:
                for agent in _agents(self.runtime):
                    models.enter_context(agent.override(model=model))
            try:
                result = await self.runtime.run(self.entry, input_data, overrides=overrides, approver=approver)
            except Exception as error:
                report = run_report(error)
                if report is not None:
                    _record(report.usage, None)
                raise
        _record(result.usage, result)
        return result.output

    @property
    def lifecycle(self) -> type[CaseLifecycle[Any, Any, Any]]:
        """The pydantic-evals lifecycle that hands each case to this task (`dataset.evaluate(task, lifecycle=...)`)."""
        from pydantic_evals.lifecycle import CaseLifecycle

        base: Any = CaseLifecycle

        class _HandsTheCase(base):  # type: ignore[misc]
            async def setup(self) -> None:
                _CASE.set(self.case)  # the case's own task: the task runs in this context next

        handing: type[CaseLifecycle[Any, Any, Any]] = _HandsTheCase
        return handing

    async def evaluate(self, dataset: Dataset[Any, Any, Any], **options: Any) -> EvaluationReport[Any, Any, Any]:
        """Evaluate `dataset` with this task (its cases at once, up to `max_concurrency`; the keywords are
        `Dataset.evaluate`'s), then check that nothing a case's run made is still alive."""
        options.setdefault("progress", False)
        with track_leaks() as leaks:
            report = await dataset.evaluate(self, lifecycle=self.lifecycle, **options)
            leaks.assert_no_leaks()
        return report


def _for(case: Case[Any, Any, Any] | None, given: Any) -> Any:
    return given(case) if callable(given) and not isinstance(given, Model) else given


def _agents(runtime: Runtime) -> list[Agent[Any, Any]]:
    return [entry.agent for entry in runtime.entries.values() if isinstance(entry, AgentEntry)]


def _record(usage: Any, result: RunResult | None) -> None:
    from pydantic_evals import increment_eval_metric, set_eval_attribute

    if usage is not None:
        increment_eval_metric("requests", usage.requests)
        increment_eval_metric("tool_calls", usage.tool_calls)
        increment_eval_metric("input_tokens", usage.input_tokens)
        increment_eval_metric("output_tokens", usage.output_tokens)
    if result is not None:
        set_eval_attribute("calls", call_tree(result))
