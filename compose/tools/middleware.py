"""The tool call endpoint model and tool middlewares (eino-semantics section 2, "Middlewares").

An endpoint is an async function of :class:`ToolInput` returning :class:`ToolOutput` (invoke) or
:class:`StreamToolOutput` (stream); a middleware wraps an endpoint into another (``wrap(next) -> endpoint``).
A tool implementing one paradigm gets the other derived from its *wrapped* native endpoint, so a stream-only tool
called through invoke still goes through the streamable middlewares. :func:`get_tool_call_id` gives the current
call id to the middlewares, the tool, and the tool's stream while it is read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import anyio

from compose.callbacks import (
    CallbackHandler,
    RunInfo,
    _node_handlers,
    fire_end,
    fire_end_stream,
    fire_failure,
    fire_start,
)
from compose.errors import GraphInterrupt, StreamEnd, ToolExecutionError, ToolTimeoutError
from compose.schema import Message
from compose.stream import StreamReader
from compose.stream._core import _EMPTY, _END, MapReader, _Signal
from compose.stream._merge import SourceEOF
from compose.tools.base import BaseTool, InvokableTool, StreamableTool, tool_timeout

__all__ = [
    "InvokableToolEndpoint",
    "InvokableToolMiddleware",
    "StreamToolOutput",
    "StreamableToolEndpoint",
    "StreamableToolMiddleware",
    "ToolInput",
    "ToolMiddleware",
    "ToolOutput",
    "get_tool_call_id",
    "tool_errors_as_results",
]

T = TypeVar("T")

_tool_call_id: ContextVar[str | None] = ContextVar("pyeino_tool_call_id", default=None)


def get_tool_call_id() -> str | None:
    """The id of the tool call being run: inside a tool, its middlewares, and while its stream is read.

    Returns None outside a tool call.
    """
    return _tool_call_id.get()


# ----------------------------------------------------------------------------------------------------------
# Endpoints and middlewares


@dataclass(slots=True)
class ToolInput:
    """One tool call as middlewares see it; a middleware may pass a changed copy (or this one, changed) on."""

    name: str
    arguments: str
    call_id: str


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """The result of an invokable endpoint."""

    result: str


@dataclass(frozen=True, slots=True)
class _MessageOutput(ToolOutput):
    """A ``ToolOutput`` with the call's tool message built already (by the agent's event collector, for its
    event): ``tool_message(result, call_id, tool_name=name)``, which the ToolsNode returns as it is."""

    message: Message = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class StreamToolOutput:
    """The result of a streamable endpoint; whoever receives it owns (and closes) the reader."""

    result: StreamReader[str]


InvokableToolEndpoint = Callable[[ToolInput], Awaitable[ToolOutput]]
StreamableToolEndpoint = Callable[[ToolInput], Awaitable[StreamToolOutput]]
InvokableToolMiddleware = Callable[[InvokableToolEndpoint], InvokableToolEndpoint]
StreamableToolMiddleware = Callable[[StreamableToolEndpoint], StreamableToolEndpoint]


@dataclass(frozen=True, slots=True)
class ToolMiddleware:
    """Wrappers of tool endpoints: ``wrap(next) -> endpoint``, for invokable and/or streamable tools.

    Example:
        >>> def shout(next):
        ...     async def endpoint(inp):
        ...         out = await next(inp)
        ...         return ToolOutput(out.result.upper())
        ...     return endpoint
        >>> mw = ToolMiddleware(invokable=shout)
    """

    invokable: InvokableToolMiddleware | None = None
    streamable: StreamableToolMiddleware | None = None


@dataclass(frozen=True, slots=True)
class _Endpoints:
    invoke: InvokableToolEndpoint
    stream: StreamableToolEndpoint


def _build_endpoints(t: BaseTool, name: str, middlewares: Sequence[ToolMiddleware]) -> _Endpoints:
    timeout = tool_timeout(t)
    info = RunInfo(name, type(t).__qualname__, "Tool")
    invoke: InvokableToolEndpoint | None = None
    stream: StreamableToolEndpoint | None = None
    if isinstance(t, InvokableTool):
        invoke = _native_invoke(t, name, timeout, info)
        for mw in reversed(middlewares):
            if mw.invokable is not None:
                invoke = mw.invokable(invoke)
    if isinstance(t, StreamableTool):
        stream = _native_stream(t, name, timeout, info)
        for mw in reversed(middlewares):
            if mw.streamable is not None:
                stream = mw.streamable(stream)
    if invoke is None:
        if stream is None:
            raise TypeError(
                f"tool {name} is not invokable or streamable (it needs an async run() or stream())"
            )
        invoke = _invoke_from_stream(stream)
    elif stream is None:
        stream = _stream_from_invoke(invoke)
    return _Endpoints(invoke, stream)


def _native_invoke(t: InvokableTool, name: str, timeout: float | None, info: RunInfo) -> InvokableToolEndpoint:
    """The tool's own ``run``; the node's callback handlers (if any) see it as ``info``, innermost."""
    if timeout is None:

        async def endpoint(inp: ToolInput) -> ToolOutput:
            handlers = _node_handlers.get()
            if handlers:
                return ToolOutput(await _reported_invoke(handlers, info, inp, t.run))
            return ToolOutput(await t.run(inp.arguments))

        return endpoint

    async def timed_run(arguments: str) -> str:
        with anyio.move_on_after(timeout):
            return await t.run(arguments)
        # Only this scope's own deadline lands here; a TimeoutError raised by the tool propagates as it is.
        raise ToolTimeoutError(name, timeout)

    async def timed_endpoint(inp: ToolInput) -> ToolOutput:
        handlers = _node_handlers.get()
        if handlers:
            return ToolOutput(await _reported_invoke(handlers, info, inp, timed_run))
        return ToolOutput(await timed_run(inp.arguments))

    return timed_endpoint


def _native_stream(t: StreamableTool, name: str, timeout: float | None, info: RunInfo) -> StreamableToolEndpoint:
    async def start(inp: ToolInput) -> StreamReader[str]:
        if timeout is None:
            return _guard(await t.stream(inp.arguments), inp.call_id, None, name, 0.0)
        deadline = anyio.current_time() + timeout
        with anyio.move_on_at(deadline):
            reader = await t.stream(inp.arguments)
            return _guard(reader, inp.call_id, deadline, name, timeout)
        raise ToolTimeoutError(name, timeout)

    async def endpoint(inp: ToolInput) -> StreamToolOutput:
        handlers = _node_handlers.get()
        if handlers:
            return StreamToolOutput(await _reported_stream(handlers, info, inp, start))
        return StreamToolOutput(await start(inp))

    return endpoint


async def _reported_invoke(
    handlers: tuple[CallbackHandler, ...], info: RunInfo, inp: ToolInput, run: Callable[[str], Awaitable[str]]
) -> str:
    await fire_start(handlers, info, inp)
    try:
        out = await run(inp.arguments)
    except BaseException as exc:
        with anyio.CancelScope(shield=True):
            await fire_failure(handlers, info, exc)
        raise
    await fire_end(handlers, info, out)
    return out


async def _reported_stream(
    handlers: tuple[CallbackHandler, ...],
    info: RunInfo,
    inp: ToolInput,
    start: Callable[[ToolInput], Awaitable[StreamReader[str]]],
) -> StreamReader[str]:
    await fire_start(handlers, info, inp)
    try:
        out = await start(inp)
    except BaseException as exc:
        with anyio.CancelScope(shield=True):
            await fire_failure(handlers, info, exc)
        raise
    return await fire_end_stream(handlers, info, out)


def _guard(
    reader: StreamReader[str], call_id: str, deadline: float | None, name: str, timeout: float
) -> StreamReader[str]:
    """``reader`` with the call id set while it produces, and each chunk due before ``deadline``.

    A cancel-safe reader without deadline is returned as it is: it runs no tool code inside ``recv()``. A
    reader that is not cancel-safe (a tool's async generator) runs the tool inside ``recv()``, in whatever
    task reads it (a merge's fetch task, say), so the call id is set around each pull.
    """
    if reader.cancel_safe and deadline is None:
        return reader
    return _GuardedReader(reader, call_id, deadline, name, timeout)


class _GuardedReader(StreamReader[str]):
    """See :func:`_guard`. Chunks its source already holds (the first chunk of a started tool) are visible
    to ``_poll`` without running tool code, so a merge takes them without waiting on another tool."""

    _kind = "tool-stream"

    def __init__(
        self, src: StreamReader[str], call_id: str, deadline: float | None, name: str, timeout: float
    ) -> None:
        super().__init__()
        self._src = src
        self._call_id = call_id
        self._deadline = deadline
        self._name = name
        self._timeout = timeout
        self._expired = False  # the deadline passed: the timeout error was delivered, the stream ends
        self._cancel_safe = src.cancel_safe

    def _poll(self) -> object:
        if self._expired:
            self._done = True
            return _END
        x = self._src._poll()
        if x is _END:
            self._done = True
        return x

    async def _pull(self) -> object:
        token = _tool_call_id.set(self._call_id)
        try:
            if self._deadline is None:
                x = await self._src._pull()
            else:
                x = _EMPTY
                with anyio.move_on_at(self._deadline):
                    x = await self._src._pull()
                if x is _EMPTY:  # only this scope's own deadline lands here
                    self._expired = True
                    return _Signal(ToolTimeoutError(self._name, self._timeout))
        finally:
            _tool_call_id.reset(token)
        if x is _END:
            self._done = True
        return x

    async def _aclose_owned(self) -> None:
        await self._src.aclose()

    def __repr__(self) -> str:
        return f"<StreamReader tool-stream({self._name}:{self._call_id}) {self._state()} source={self._src!r}>"


class _ReaderIterator(AsyncIterator[T]):
    """Iterates by calling ``step``; closing it closes ``reader``, whether the iteration started or not.

    (An async generator closed before its first step would skip its ``finally`` and leave the reader open.)
    """

    __slots__ = ("_reader", "_step")

    def __init__(self, reader: StreamReader[Any], step: Callable[[], Awaitable[T]]) -> None:
        self._reader = reader
        self._step = step

    async def __anext__(self) -> T:
        return await self._step()

    async def aclose(self) -> None:
        await _close(self._reader)


def _invoke_from_stream(stream: StreamableToolEndpoint) -> InvokableToolEndpoint:
    """The invoke endpoint of a stream-only tool: its stream's text. A failure while the stream is read (the
    tool raised mid-stream, a chunk is not a string) is the ``ToolExecutionError`` (``streaming=True``) that a
    reader of the stream sees, so an invoke run reports it as a streaming one does."""

    async def endpoint(inp: ToolInput) -> ToolOutput:
        reader = (await stream(inp)).result
        chunks: list[str] = []
        try:
            while True:
                try:
                    chunk = await reader.recv()
                except StreamEnd:
                    return ToolOutput("".join(chunks))
                except Exception as exc:
                    named = stream_call_error(inp.name, inp.call_id, exc)
                    if named is exc:
                        raise
                    raise named from exc
                chunks.append(tool_chunk_text(inp.name, inp.call_id, chunk))
        finally:
            await _close(reader)

    return endpoint


def tool_chunk_text(name: str, call_id: str, chunk: object) -> str:
    """``chunk`` of the stream of tool call ``call_id``, which must be a ``str``: else the call's
    ``ToolExecutionError`` (``streaming=True``) with a ``TypeError`` cause saying what it was."""
    if type(chunk) is str:
        return chunk
    problem = TypeError(f"a tool stream chunk must be a str, got {type(chunk).__qualname__}: {chunk!r:.80}")
    raise ToolExecutionError(name, call_id, problem, streaming=True) from problem


def stream_call_error(name: str, call_id: str, exc: Exception) -> Exception:
    """The error a reader of tool call ``call_id``'s stream sees for the error item ``exc``: the call's
    ``ToolExecutionError`` (``streaming=True``, ``exc`` its cause), made once where the item is first read
    (the collector, the node's slot, the derived invoke) and passed on as it is from then on. Interrupts and
    the end of a merged source are left as they are."""
    if isinstance(exc, GraphInterrupt | StreamEnd | SourceEOF):
        return exc
    if isinstance(exc, ToolExecutionError) and exc.tool_name == name and exc.call_id == call_id:
        return exc
    return ToolExecutionError(name, call_id, exc, streaming=True)  # its __cause__ is exc


def named_tool_stream(reader: StreamReader[Any], name: str, call_id: str) -> StreamReader[str]:
    """``reader`` (tool call ``call_id``'s stream) with every chunk checked to be a ``str`` and every error item
    the call's ``ToolExecutionError`` (see :func:`stream_call_error`): what every reader of it sees."""

    def on_error(exc: BaseException) -> BaseException:
        return stream_call_error(name, call_id, exc) if isinstance(exc, Exception) else exc

    return MapReader(reader, partial(tool_chunk_text, name, call_id), on_error, is_async=False)


def _stream_from_invoke(invoke: InvokableToolEndpoint) -> StreamableToolEndpoint:
    async def endpoint(inp: ToolInput) -> StreamToolOutput:
        return StreamToolOutput(StreamReader.from_iterable([(await invoke(inp)).result]))

    return endpoint


async def _close(reader: StreamReader[Any]) -> None:
    with anyio.CancelScope(shield=True):
        await reader.aclose()


# ----------------------------------------------------------------------------------------------------------
# Ready middleware


def _describe_error(inp: ToolInput, exc: Exception) -> str:
    return f"[tool error] tool '{inp.name}' failed: {type(exc).__name__}: {exc}"


def tool_errors_as_results(
    formatter: Callable[[ToolInput, Exception], str] = _describe_error,
) -> ToolMiddleware:
    """A middleware turning a failing tool into a tool message the model can read, so an agent can recover.

    The message names the tool, the error type and the error message (or is whatever ``formatter`` returns). A
    failure in the middle of a stream ends the stream with that message as its last chunk; ``formatter`` gets
    the tool's own error, as in invoke mode (the ToolsNode wraps a stream's errors in ``ToolExecutionError``
    only outside every middleware). Interrupts
    (:class:`~compose.errors.GraphInterrupt`) and cancellation pass through untouched. Put it first in
    ``middlewares`` to cover the other middlewares too.

    Example:
        >>> from compose.schema import FunctionCall, ToolCall, assistant_message
        >>> from compose.tools.node import ToolsNode
        >>> from compose.tools.base import tool
        >>> @tool
        ... def divide(a: int, b: int) -> float:
        ...     return a / b
        >>> node = ToolsNode([divide], middlewares=[tool_errors_as_results()])
        >>> call = ToolCall(id="c1", function=FunctionCall(name="divide", arguments='{"a": 1, "b": 0}'))
        >>> anyio.run(node.invoke, assistant_message("", [call]))[0].content
        "[tool error] tool 'divide' failed: ZeroDivisionError: division by zero"
    """

    def invokable(next_: InvokableToolEndpoint) -> InvokableToolEndpoint:
        async def endpoint(inp: ToolInput) -> ToolOutput:
            try:
                return await next_(inp)
            except GraphInterrupt:
                raise
            except Exception as exc:
                return ToolOutput(formatter(inp, exc))

        return endpoint

    def streamable(next_: StreamableToolEndpoint) -> StreamableToolEndpoint:
        async def endpoint(inp: ToolInput) -> StreamToolOutput:
            try:
                out = await next_(inp)
            except GraphInterrupt:
                raise
            except Exception as exc:
                return StreamToolOutput(StreamReader.from_iterable([formatter(inp, exc)]))
            return StreamToolOutput(_errors_as_chunk(out.result, inp, formatter))

        return endpoint

    return ToolMiddleware(invokable=invokable, streamable=streamable)


def _errors_as_chunk(
    reader: StreamReader[str], inp: ToolInput, formatter: Callable[[ToolInput, Exception], str]
) -> StreamReader[str]:
    """``reader``, ended by ``formatter``'s message in place of the first error item."""
    failed = False

    async def step() -> str:
        nonlocal failed
        if failed:
            raise StopAsyncIteration
        try:
            return await reader.recv()
        except StreamEnd:
            raise StopAsyncIteration from None
        except GraphInterrupt:
            raise
        except Exception as exc:
            failed = True
            return formatter(inp, exc)

    return StreamReader.from_async_iterator(_ReaderIterator(reader, step))
