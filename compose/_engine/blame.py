"""A failure inside a stream is blamed on the node that produced it (issue 28).

In a streaming run every node's output stream is read later, elsewhere: by its successors, their handlers, a
branch condition, the caller. An error item of that stream (the model's connection broke, a tool raised
mid-stream, a chunk of the wrong type) becomes, once, at the producer, a :class:`NodeRunError` naming the
producer's path (``phase="stream"``), so every reader raises the same typed error, and a node that fails
because it read such an item passes it on instead of taking the blame (a ``NodeRunError`` of its own, "pre
handler failed", was the symptom). The error keeps the producer's own error as ``__cause__``.

Errors are recognised as already named by their ``origin``: the root run of a graph and every sub-graph run
inside it share one object; a ``NodeRunError`` of another origin (a separate graph a lambda ran) is named
again, as any other error of the node's stream.

Eino wraps only the errors a node returns (``wrapGraphNodeError``); an error inside a stream is attributed
to whoever reads it there. This is ours.
"""

from __future__ import annotations

from typing import Any

from compose._types import ClassInfo
from compose.errors import (
    FieldMappingError,
    GraphInterrupt,
    ModelResponseError,
    NodeOutputTypeError,
    NodeRunError,
    StreamEnd,
)
from compose.schema import Message
from compose.stream import StreamReader
from compose.stream._convert import WrapErrorsReader
from compose.stream._core import MapReader
from compose.stream._merge import SourceEOF

__all__ = ["OutputStream", "named_upstream"]


def named_upstream(exc: BaseException, origin: object) -> bool:
    """Whether ``exc`` is an error item of a node's output stream in this run (or one of its sub-graphs),
    which names its node already: a reader failing with it passes it on."""
    return isinstance(exc, NodeRunError) and exc._origin is origin


class OutputStream:
    """How one node's output stream is checked and blamed in one run: ``wrap(out)`` returns the stream the
    run routes, each chunk checked against the node's declared type (and put under its output key), each
    error item named after the node."""

    __slots__ = ("cls", "declared", "key", "model", "origin", "path")

    def __init__(
        self,
        path: tuple[str, ...],
        origin: object,
        cls: ClassInfo | None,
        declared: Any,
        key: str | None,
        model: str = "",
    ) -> None:
        self.path = path
        self.origin = origin
        self.cls = cls
        self.declared = declared
        self.key = key
        self.model = model  # a chat model node's model type: its chunks must be Messages

    def wrap(self, out: StreamReader[Any]) -> StreamReader[Any]:
        if self.model:
            return MapReader(out, self._check_message, self.blame, is_async=False)
        if self.cls is not None:
            return MapReader(out, self._check, self.blame, is_async=False)
        if self.key is not None:
            return MapReader(out, self._keyed, self.blame, is_async=False)
        return WrapErrorsReader(out, self.blame)

    def blame(self, exc: BaseException) -> BaseException:
        """The error item ``exc`` of the node's stream, named after the node (unless it is named already, or
        is not a failure: an interrupt, the end of a merged source)."""
        if (
            not isinstance(exc, Exception)
            or isinstance(exc, GraphInterrupt | StreamEnd | SourceEOF | FieldMappingError)
            or named_upstream(exc, self.origin)
        ):
            return exc
        return self._named(exc)

    def _named(self, cause: Exception) -> NodeRunError:
        err = NodeRunError(self.path, cause, phase="stream")
        err._origin = self.origin
        err.__traceback__ = cause.__traceback__
        return err

    def _check(self, chunk: Any) -> Any:
        cls = self.cls
        assert cls is not None
        if not isinstance(chunk, cls):
            err = NodeOutputTypeError(self.path, self.declared, type(chunk), chunk=True)
            err._origin = self.origin
            raise err
        key = self.key
        return chunk if key is None else {key: chunk}

    def _keyed(self, chunk: Any) -> Any:
        return {self.key: chunk}

    def _check_message(self, chunk: Any) -> Any:
        if not isinstance(chunk, Message):
            node = self.path[-1] if self.path else ""
            text = repr(chunk)
            text = text if len(text) <= 80 else text[:77] + "..."
            shown = "None" if chunk is None else f"{type(chunk).__qualname__} {text}"
            raise self._named(
                ModelResponseError(f"chat model node '{node}' ({self.model}): stream() yielded {shown}, not a Message")
            )
        key = self.key
        return chunk if key is None else {key: chunk}
