"""`Problem` and `ProjectError`: everything wrong with a project, reported together, with file and line."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigurationError

__all__ = ["Problem", "ProjectError"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a project: where (file and 1-based line, when known) and what to do."""

    file: Path | None
    line: int | None
    message: str

    def __str__(self) -> str:
        where = "" if self.file is None else f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        return f"{where}{self.message}"


class ProjectError(ConfigurationError):
    """A project could not be loaded. `problems` lists every problem found, in file order."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = tuple(problems)
        if len(self.problems) == 1:
            text = str(self.problems[0])
        else:
            text = f"{len(self.problems)} problems:\n" + "\n".join(f"  {problem}" for problem in self.problems)
        super().__init__(text)


def raise_if_any(problems: Iterable[Problem]) -> None:
    """Raise one `ProjectError` carrying all `problems`, if there are any, ordered by file and line."""
    found = sorted(problems, key=lambda problem: (str(problem.file or ""), problem.line or 0))
    if found:
        raise ProjectError(found)
