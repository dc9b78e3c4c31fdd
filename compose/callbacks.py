"""Callbacks: observe graphs and nodes as they start, end and fail (eino-semantics 1.8).

Handlers come from three places: global (``append_global_callbacks``), per call (``callbacks=[...]`` applies to the
graph and every node, nested graphs included), and per node (``callbacks=[...]`` with ``designate=["key"]`` or a
path such as ``designate=[("sub", "inner")]``). ``on_start`` handlers run in reverse registration order,
``on_end``/``on_error`` in order. A stream callback receives its own copy of the stream (``copy(len(handlers)+1)``)
and must close it; the last copy continues to the consumer. Node callbacks fire around what the node implements:
a lambda that only implements invoke, run in a streaming graph, reports its concatenated input and output.

Every run that started ends in exactly one of ``on_end`` / ``on_end_with_stream_output`` (or
``wrap_stream_output``), ``on_error``, ``on_interrupt`` (it paused: not an error) and ``on_cancel`` (cancelled, or
abandoned before it finished). The start and its end are called in the same task, nested runs' inside their
parent's, so a handler may set a ``ContextVar`` in ``on_start`` (an OpenTelemetry span made current, say) and
reset it in the end callback: the node's own code (a lambda, a tool) runs with it set. A graph driven step by
step (``start_run``, as the agent runner does) keeps that pairing when one task drives it.

Tools: inside a ToolsNode each call reports to the node's handlers as ``RunInfo(tool name, tool class, "Tool")``
with the :class:`~compose.tools.middleware.ToolInput` (name, arguments, call id) as input and the result text (or
its stream) as output, innermost (inside the middlewares), around what the tool implements. Chat models: a
chat-model node's ``RunInfo`` names the request ``model`` and its ``provider`` (see ``model_identity``); the
answer's ``response_meta.model`` is the model the provider says answered.

Streams without a background task: a handler overriding ``wrap_stream_output`` is given the output stream itself
and returns the stream the consumer reads instead (see :class:`StreamObserver` and :func:`observe_stream`), so
it sees each chunk, the end, an early close or a failure as the consumer reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import anyio

from compose.errors import GraphInterrupt
from compose.stream import StreamReader
from compose.stream._core import _EMPTY, _END, _Signal

__all__ = [
    "CallbackHandler",
    "RunInfo",
    "StreamObserver",
    "append_global_callbacks",
    "clear_global_callbacks",
    "observe_stream",
]


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What is running: ``name`` (the node's ``name=``, else its key; the graph's compile name), ``type`` (the
    implementation, e.g. ``"ScriptedChatModel"``) and ``component`` (``"Graph"``, ``"Lambda"``, ``"ChatModel"``,
    ``"ChatTemplate"``, ``"ToolsNode"``, ``"Tool"``, ``"Passthrough"``, ``"Agent"``). A chat-model node also
    has ``model`` (the request model's name) and ``provider`` (e.g. ``"openai"``), empty when unknown."""

    name: str
    type: str
    component: str
    model: str = ""
    provider: str = ""


class CallbackHandler:
    """Base class of callback handlers; every method is an async no-op (stream methods close their copy)."""

    async def on_start(self, run_info: RunInfo, input: Any) -> None:
        """Before a node or graph runs with a value input."""

    async def on_end(self, run_info: RunInfo, output: Any) -> None:
        """After a node or graph produced a value output."""

    async def on_error(self, run_info: RunInfo, error: BaseException) -> None:
        """When a node or graph failed."""

    async def on_start_with_stream_input(self, run_info: RunInfo, reader: StreamReader[Any]) -> None:
        """Before a node or graph runs with a stream input; the handler owns ``reader`` and must close it."""
        await reader.aclose()

    async def on_end_with_stream_output(self, run_info: RunInfo, reader: StreamReader[Any]) -> None:
        """After a node or graph returned a stream; the handler owns ``reader`` and must close it."""
        await reader.aclose()

    async def on_interrupt(self, run_info: RunInfo, interrupt: GraphInterrupt) -> None:
        """When a node, tool or graph paused at an interrupt (not a failure; the run may be resumed)."""

    async def on_cancel(self, run_info: RunInfo) -> None:
        """When a node, tool or graph was cancelled, or abandoned (closed) before it finished."""

    async def wrap_stream_output(self, run_info: RunInfo, reader: StreamReader[Any]) -> StreamReader[Any]:
        """After a node or graph returned a stream: the stream the consumer reads instead of ``reader``.

        Override it (instead of ``on_end_with_stream_output``) to observe the stream as the consumer reads it,
        with no copy and no background task: return ``observe_stream(reader, observer)`` or another reader
        that owns ``reader``. Handlers that do not override it get a copy in ``on_end_with_stream_output``.
        """
        return reader


class StreamObserver:
    """What :func:`observe_stream` tells as the consumer reads: each chunk, each error item, and the finish
    (exactly once: the end, or ``closed=True`` when the reader was closed before its end). Methods are
    synchronous and called inside the consumer's ``recv()``; keep them quick."""

    def on_chunk(self, chunk: Any) -> None:
        """A chunk was read."""

    def on_error(self, error: BaseException) -> None:
        """An error item was read (the stream may go on after it)."""

    def on_finish(self, closed: bool) -> None:
        """The stream ended (``closed=False``) or was closed before its end (``closed=True``)."""


def observe_stream(reader: StreamReader[Any], observer: StreamObserver) -> StreamReader[Any]:
    """``reader``, reporting to ``observer`` as it is read; the result owns ``reader``."""
    return _ObservedReader(reader, observer)


class _ObservedReader(StreamReader[Any]):
    _kind = "observed"

    def __init__(self, src: StreamReader[Any], observer: StreamObserver) -> None:
        super().__init__()
        self._src = src
        self._observer = observer
        self._finished = False
        self._cancel_safe = src.cancel_safe

    def _see(self, x: object) -> object:
        if type(x) is _Signal:
            if x is _END or x.exc is None:
                self._done = True
                if not self._finished:
                    self._finished = True
                    self._observer.on_finish(False)
            else:
                self._observer.on_error(x.exc)
        else:
            self._observer.on_chunk(x)
        return x

    def _poll(self) -> object:
        x = self._src._poll()
        return x if x is _EMPTY else self._see(x)

    async def _pull(self) -> object:
        x = self._src._poll()
        if x is _EMPTY:
            x = await self._src._pull()
        return self._see(x)

    async def _aclose_owned(self) -> None:
        try:
            await self._src.aclose()
        finally:
            if not self._finished:
                self._finished = True
                self._observer.on_finish(True)

    def __repr__(self) -> str:
        return f"<StreamReader observed {self._state()} source={self._src!r}>"


_global_handlers: list[CallbackHandler] = []


def append_global_callbacks(*handlers: CallbackHandler) -> None:
    """Register handlers that observe every run in this process (Eino's ``AppendGlobalHandlers``)."""
    _global_handlers.extend(handlers)


def clear_global_callbacks() -> None:
    """Remove every global handler (for tests)."""
    _global_handlers.clear()


@dataclass(frozen=True, slots=True)
class CallbackConfig:
    """The handlers of one run: those for everything, and those designated to node paths."""

    everywhere: tuple[CallbackHandler, ...]
    designated: dict[tuple[str, ...], tuple[CallbackHandler, ...]]

    def for_path(self, path: tuple[str, ...]) -> tuple[CallbackHandler, ...]:
        extra = self.designated.get(path)
        return self.everywhere + extra if extra else self.everywhere


_current_config: ContextVar[CallbackConfig | None] = ContextVar("pyeino_callbacks", default=None)

# The handlers of the node being run: what it runs inside (a ToolsNode's tools) reports to them.
_node_handlers: ContextVar[tuple[CallbackHandler, ...]] = ContextVar("pyeino_node_callbacks", default=())


def make_config(
    callbacks: Sequence[CallbackHandler] | None,
    designate: Sequence[str | Sequence[str]] | None,
    base_path: tuple[str, ...],
) -> CallbackConfig | None:
    """Merge the enclosing run's handlers with this call's (``base_path`` is where this graph sits)."""
    parent = _current_config.get()
    if parent is None and not callbacks and not _global_handlers:
        return None  # the common case: no handler anywhere
    everywhere: tuple[CallbackHandler, ...] = parent.everywhere if parent else tuple(_global_handlers)
    designated = dict(parent.designated) if parent else {}
    if callbacks:
        if designate:
            for target in designate:
                path = (target,) if isinstance(target, str) else tuple(target)
                key = base_path + path
                designated[key] = designated.get(key, ()) + tuple(callbacks)
        else:
            everywhere = everywhere + tuple(callbacks)
    if not everywhere and not designated:
        return None
    return CallbackConfig(everywhere, designated)


async def fire_start(handlers: tuple[CallbackHandler, ...], info: RunInfo, value: Any) -> None:
    for h in reversed(handlers):
        await h.on_start(info, value)


async def fire_end(handlers: tuple[CallbackHandler, ...], info: RunInfo, value: Any) -> None:
    for h in handlers:
        await h.on_end(info, value)


async def fire_error(handlers: tuple[CallbackHandler, ...], info: RunInfo, error: BaseException) -> None:
    for h in handlers:
        await h.on_error(info, error)


async def fire_interrupt(handlers: tuple[CallbackHandler, ...], info: RunInfo, exc: GraphInterrupt) -> None:
    for h in handlers:
        await h.on_interrupt(info, exc)


async def fire_cancel(handlers: tuple[CallbackHandler, ...], info: RunInfo) -> None:
    with anyio.CancelScope(shield=True):
        for h in handlers:
            await h.on_cancel(info)


async def fire_failure(handlers: tuple[CallbackHandler, ...], info: RunInfo, exc: BaseException) -> None:
    """The end callback of a run that raised ``exc``: an error, an interrupt or a cancellation."""
    if isinstance(exc, GraphInterrupt):
        await fire_interrupt(handlers, info, exc)
    elif isinstance(exc, Exception):
        await fire_error(handlers, info, exc)
    else:
        await fire_cancel(handlers, info)


async def fire_start_stream(
    handlers: tuple[CallbackHandler, ...], info: RunInfo, reader: StreamReader[Any]
) -> StreamReader[Any]:
    copies = reader.copy(len(handlers) + 1)
    for h, c in zip(reversed(handlers), copies, strict=False):
        await h.on_start_with_stream_input(info, c)
    return copies[-1]


def _wraps(h: CallbackHandler) -> bool:
    return type(h).wrap_stream_output is not CallbackHandler.wrap_stream_output


async def fire_end_stream(
    handlers: tuple[CallbackHandler, ...], info: RunInfo, reader: StreamReader[Any]
) -> StreamReader[Any]:
    """Copies for the handlers that take one (in order), then the wrapping handlers' wraps (in order)."""
    copying = [h for h in handlers if not _wraps(h)]
    if copying:
        copies = reader.copy(len(copying) + 1)
        for h, c in zip(copying, copies, strict=False):
            await h.on_end_with_stream_output(info, c)
        reader = copies[-1]
    if len(copying) < len(handlers):
        for h in handlers:
            if _wraps(h):
                reader = await h.wrap_stream_output(info, reader)
    return reader
