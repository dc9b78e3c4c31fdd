"""The end of a stream (or of one merged source), and errors of stream misuse and concat."""

from __future__ import annotations

from compose.errors._base import ComposeError

__all__ = ["ConcatError", "EmptyStreamError", "SourceEOF", "StreamEnd", "StreamError"]


class StreamEnd(EOFError):
    """The end of a stream. ``recv()`` raises it at the end and again on every later call."""


class StreamError(ComposeError):
    """Misuse of a stream, or chunks that cannot be combined."""


class EmptyStreamError(StreamError):
    """Raised by ``concat`` when the stream had no chunk."""

    def __init__(self, message: str = "stream reader is empty, concat fail") -> None:
        super().__init__(message)


class ConcatError(StreamError, ValueError):
    """Raised when chunks cannot be concatenated (conflicting values, or no rule for their type)."""


class SourceEOF(ComposeError):
    """Error item of :func:`merge_named_streams`: the source called ``name`` has ended (the stream continues).

    ``concat`` skips these; other consumers usually ``except SourceEOF`` and go on reading.
    """

    def __init__(self, name: str) -> None:
        super().__init__(f"source stream {name!r} ended")
        self.name = name
