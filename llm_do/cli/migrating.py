"""`llm-do migrate`: rewrite a project of the earlier llm-do into today's format (docs/migrating.md).

A dry run by default: the changes as a unified diff on stdout, and on stderr what it could not translate.
`--write` applies the changes (see `llm_do.project.migrate.apply_migration`), then checks the project as
`llm-do check` does. Exit code 0 when nothing is left to do by hand (and, with `--write`, the project checks),
1 when something is (listed), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import sys

from rich.markup import escape

from ..project.migrate import apply_migration, plan_migration
from .failures import ERROR, OK
from .render import console, shown

__all__ = ["migrate"]


def migrate(args: argparse.Namespace) -> int:
    """`llm-do migrate PROJECT [--write]`."""
    migration = plan_migration(args.project)
    err = console(stderr=True)
    diff = migration.diff()
    if diff:
        print(diff, end="")
    if args.write and migration.changes:
        apply_migration(migration)
    for problem in migration.untranslated:
        err.print(shown(f"{problem}"), soft_wrap=True)
    files = len(migration.changes)
    done = "changed" if args.write else "to change (pass --write to apply)"
    left = len(migration.untranslated)
    summary = (
        f"llm-do: {files} file{'s' if files != 1 else ''} {done}"
        if files
        else "llm-do: no file to change"
        if left
        else "llm-do: nothing to migrate"
    )
    if left:
        summary += f"; {left} thing{'s' if left != 1 else ''} to do by hand (above)"
    err.print(escape(summary))
    if args.write and migration.changes:
        err.print(escape(f"llm-do: checking {args.project} as migrated"))
        sys.stdout.flush()
        checked = _check(args.project)
        return ERROR if left or checked != OK else OK
    return ERROR if left else OK


def _check(project: str) -> int:
    """`llm-do check PROJECT` on the migrated project; its exit code."""
    from .checking import check
    from .failures import report

    try:
        return check(argparse.Namespace(project=project, json=False, model=None, command="check"))
    except Exception as error:  # a project that does not load: its problems, as check prints them
        return report(error)
