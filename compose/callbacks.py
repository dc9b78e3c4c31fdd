"""Callbacks: observe graphs and nodes as they start, end and fail (eino-semantics 1.8).

Handlers come from three places: global (``append_global_callbacks``), per call (``callbacks=[...]`` applies to the
graph and every node, nested graphs included), and per node (``callbacks=[...]`` with ``designate=["key"]`` or a
path such as ``designate=[("sub", "inner")]``). ``on_start`` handlers run in reverse registration order,
``on_end``/``on_error`` in order. A stream callback receives its own copy of the stream (``copy(len(handlers)+1)``)
and must close it; the last copy continues to the consumer. Node callbacks fire around what the node implements:
a lambda that only implements invoke, run in a streaming graph, reports its concatenated input and output.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from compose.stream import StreamReader

__all__ = ["CallbackHandler", "RunInfo", "append_global_callbacks", "clear_global_callbacks"]


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What is running: ``name`` (the node's ``name=``, else its key; the graph's compile name), ``type`` (the
    implementation, e.g. ``"ScriptedChatModel"``) and ``component`` (``"Graph"``, ``"Lambda"``, ``"ChatModel"``,
    ``"ChatTemplate"``, ``"ToolsNode"``, ``"Tool"``, ``"Passthrough"``)."""

    name: str
    type: str
    component: str


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


def make_config(
    callbacks: Sequence[CallbackHandler] | None,
    designate: Sequence[str | Sequence[str]] | None,
    base_path: tuple[str, ...],
) -> CallbackConfig | None:
    """Merge the enclosing run's handlers with this call's (``base_path`` is where this graph sits)."""
    parent = _current_config.get()
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


async def fire_start_stream(
    handlers: tuple[CallbackHandler, ...], info: RunInfo, reader: StreamReader[Any]
) -> StreamReader[Any]:
    copies = reader.copy(len(handlers) + 1)
    for h, c in zip(reversed(handlers), copies, strict=False):
        await h.on_start_with_stream_input(info, c)
    return copies[-1]


async def fire_end_stream(
    handlers: tuple[CallbackHandler, ...], info: RunInfo, reader: StreamReader[Any]
) -> StreamReader[Any]:
    copies = reader.copy(len(handlers) + 1)
    for h, c in zip(handlers, copies, strict=False):
        await h.on_end_with_stream_output(info, c)
    return copies[-1]
