"""Errors of record/replay cassettes (``compose.testing.cassette``)."""

from __future__ import annotations

from typing import Any

from compose.errors._base import ComposeError

__all__ = ["CassetteError", "CassetteMismatchError", "CassetteNotFoundError"]


class CassetteError(ComposeError):
    """A record/replay cassette cannot be used: not open, unreadable, or asked for something it cannot give."""


class CassetteNotFoundError(CassetteError, FileNotFoundError):
    """A cassette in replay-only mode (``"none"``) has no file to replay."""


class CassetteMismatchError(CassetteError, LookupError):
    """A call made during replay matches no recorded call.

    Attributes:
        kind: ``"model"`` or ``"tool"``.
        field: the path of the first field where the call differs from the nearest recorded one
            (``"messages[2].content"``, ``"options.temperature"``, ``"arguments"``), or None when nothing of that
            kind was recorded.
        request: the call's request, as it would be recorded.
        nearest: the nearest recorded request (None when there is none).
        diff: a unified diff from the nearest recorded request to this one (``""`` when there is none).
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        field: str | None,
        request: Any,
        nearest: Any,
        diff: str,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.field = field
        self.request = request
        self.nearest = nearest
        self.diff = diff
