"""Declarative containers: wiring only, no logic."""

from .agent import AgentContainer
from .builtins import BuiltinToolsets

__all__ = ["AgentContainer", "BuiltinToolsets"]
