"""The root of the agent kit's hierarchy."""

from __future__ import annotations

from compose.errors import ComposeError

__all__ = ["AgentError"]


class AgentError(ComposeError):
    """Base of the agent kit's failures; ``reason`` is the run's termination reason it stands for."""

    reason = "error"
