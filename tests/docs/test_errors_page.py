"""docs/errors.md names every error class a caller can import from llm-do, at a path it imports from, and names
nothing else: what a caller can catch is on one page."""

from __future__ import annotations

import importlib
import pkgutil
import re
import warnings
from pathlib import Path

import llm_do
from llm_do._moved import MOVED

PAGE = Path(__file__).parents[2] / "docs" / "errors.md"


def public_modules() -> list[str]:
    """`llm_do` and each module of it whose path has no private part, but the command's and the old paths."""
    found = ["llm_do"]
    for module in pkgutil.walk_packages(llm_do.__path__, "llm_do."):
        parts = module.name.split(".")
        if any(part.startswith("_") for part in parts) or parts[1] == "cli" or module.name in MOVED:
            continue
        found.append(module.name)
    return found


def error_classes() -> dict[type[BaseException], set[str]]:
    """Each exception or warning class a public module gives (its `__all__`), and the paths it imports from."""
    found: dict[type[BaseException], set[str]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in public_modules():
            module = importlib.import_module(name)
            for each in getattr(module, "__all__", ()):
                value = getattr(module, each)
                if isinstance(value, type) and issubclass(value, BaseException):
                    found.setdefault(value, set()).add(f"{name}.{each}")
    return found


def named_on_the_page() -> set[str]:
    """The classes in the first column of the page's tables."""
    return set(re.findall(r"^\| `(llm_do[\w.]*)` \|", PAGE.read_text(), re.M))


def test_the_page_names_every_error_class_a_caller_can_import() -> None:
    named = named_on_the_page()
    missing = sorted(min(paths) for paths in error_classes().values() if not paths & named)
    assert missing == [], f"add these to docs/errors.md: {missing}"


def test_the_page_names_only_error_classes_at_paths_they_import_from() -> None:
    importable = set().union(*error_classes().values())
    assert sorted(named_on_the_page() - importable) == []
