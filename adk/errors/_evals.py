"""Errors of evaluation datasets (``adk.evals``)."""

from __future__ import annotations

from adk.errors._base import AgentError

__all__ = ["DatasetError"]


class DatasetError(AgentError, ValueError):
    """An evaluation dataset (``adk.evals``) cannot be built or loaded: the message names the file, the case, the
    evaluator or the field at fault."""
