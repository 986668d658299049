"""Routing test fixtures: the scripted provider of the agent tests."""

from agent.conftest import provider

__all__ = ["provider"]
