"""The root of the hierarchy."""

from __future__ import annotations

__all__ = ["ComposeError"]


class ComposeError(Exception):
    """Base class of every failure raised by pyeino."""
