"""A run paused at an interrupt: not a failure, so not a :class:`ComposeError`."""

from __future__ import annotations

from typing import Any

__all__ = ["GraphInterrupt"]


class GraphInterrupt(Exception):
    """A run paused at an interrupt. Not a failure: never caught as an error by pyeino.

    ``info`` is the ``InterruptInfo``; ``checkpoint_id`` the id the run was checkpointed under (or None).
    """

    def __init__(self, info: Any, checkpoint_id: str | None = None) -> None:
        super().__init__("graph interrupted")
        self.info = info
        self.checkpoint_id = checkpoint_id
