"""Declarative containers: wiring only, no logic."""

from .agent import AgentContainer

__all__ = ["AgentContainer"]
