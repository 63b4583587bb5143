"""`Problem` and `ProjectError`: everything wrong with a project, reported together, with file and line."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigurationError

__all__ = ["Install", "Problem", "ProjectError"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a project: where (file and 1-based line, when known) and what to do."""

    file: Path | None
    line: int | None
    message: str

    def __str__(self) -> str:
        where = "" if self.file is None else f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        return f"{where}{self.message}"


@dataclass(frozen=True, slots=True)
class Install:
    """A package to install before a model a project names can be used: not a problem of the project's files.
    `requirement` is what to give pip (`pydantic-ai-slim[anthropic]`); `model` the model's name; `file` and `line`
    where it is named."""

    requirement: str
    model: str
    file: Path | None
    line: int | None

    @property
    def command(self) -> str:
        """The command that installs it."""
        return f'pip install "{self.requirement}"'


class ProjectError(ConfigurationError):
    """A project could not be loaded. `problems` lists every problem found, in file order; `to_install`, the
    packages its models need that are not installed (found beside the problems, and no problem themselves)."""

    def __init__(self, problems: Iterable[Problem], to_install: Iterable[Install] = ()) -> None:
        self.problems = tuple(problems)
        self.to_install = tuple(to_install)
        if len(self.problems) == 1:
            text = str(self.problems[0])
        else:
            text = f"{len(self.problems)} problems:\n" + "\n".join(f"  {problem}" for problem in self.problems)
        super().__init__(text)


def raise_if_any(problems: Iterable[Problem], to_install: Iterable[Install] = ()) -> None:
    """Raise one `ProjectError` carrying all `problems`, if there are any, ordered by file and line (and the
    packages to install found beside them)."""
    found = sorted(problems, key=lambda problem: (str(problem.file or ""), problem.line or 0))
    if found:
        raise ProjectError(found, to_install)
