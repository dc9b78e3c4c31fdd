"""ToolsNode: runs the tool calls of one assistant message and answers with one tool message per call.

A port of Eino's ``compose.ToolsNode`` (eino-semantics section 2):

- The input is one assistant :class:`~compose.schema.Message` with at least one tool call, else
  :class:`~compose.errors.ToolInputError`. The output is the list of tool messages in tool-call order.
- A call to a tool the node does not have fails the node before any tool runs
  (:class:`~compose.errors.ToolNotFoundError`), unless ``unknown_tools_handler`` answers for it.
- ``tool_arguments_handler`` rewrites each call's arguments before anything runs, in call order (as in Eino,
  where it runs while the calls are prepared); its failure fails the node.
- Calls run in parallel (one anyio task each, at most ``max_concurrency`` at a time, started in call order),
  or one after the other with ``execute_sequentially=True``. Every call runs to its end; then the first
  failure in call order fails the node with :class:`~compose.errors.ToolExecutionError` naming tool and call
  id, and the other results are dropped. Interrupts (:class:`~compose.interrupt.InterruptSignal`) are not
  failures: when no call failed, the node raises one composite interrupt whose children are the calls that
  paused and whose state keeps the input and the finished results; re-run on resume, the node runs only the
  calls that had not finished (each tool sees its own resume context).
- Middlewares (:mod:`compose.tools.middleware`) wrap each tool's endpoints, the first in the list outermost.
- In stream mode every call fills its own slot of ``list[Message | None]`` chunks; slots interleave in arrival
  order and ``concat_message_lists`` rebuilds the messages.
- :func:`get_tool_call_id` gives the current call id to the middlewares, the tool, and the tool's stream while
  it is read.
- A tool's ``timeout`` (see :func:`~compose.tools.tool_timeout`) bounds its call and the reading of its
  stream; running out fails the call with :class:`ToolTimeoutError`.

Differences from Eino, chosen for Python: duplicate tool names are an error at construction; a stream-only
tool called through :meth:`ToolsNode.invoke` with an empty stream answers ``""`` (Eino fails on the empty
concat); the arguments handler's failure is a :class:`ToolArgumentsHandlerError` (a
:class:`~compose.errors.ToolExecutionError`); tool streams already started are closed when the node fails, and
all are closed with the node's stream. As in Eino, a tool stream that ends without a chunk leaves its slot
empty, and an error inside a tool stream reaches the reader as an error item (the stream goes on after it);
unlike Eino, that item is a ``ToolExecutionError`` (``streaming=True``) naming the tool and call id with the
tool's error as its cause, as a failure to start is, so the next node that concatenates the messages reports
which tool broke. The same holds in :meth:`ToolsNode.invoke` for a stream-only tool: its stream failing (or
yielding a chunk that is not a ``str``) is that ``ToolExecutionError`` with ``streaming=True``. The error is made
once, where the call's stream is first read (an agent's tool-result collector, outermost, already names it),
and passed on as it is. Middlewares see the tool's own error, before the node wraps it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import anyio

from compose._engine.resume import resumed_for
from compose.errors import (
    GraphInterrupt,
    ToolArgumentsHandlerError,
    ToolExecutionError,
    ToolInputError,
    ToolNotFoundError,
)
from compose.interrupt import InterruptSignal, _Resumed, _resumed
from compose.schema import Message, ToolInfo, tool_message
from compose.stream import StreamReader, merge_streams
from compose.stream._convert import ConvertingReader
from compose.stream._core import _Signal
from compose.tools.base import _TOOL_NAME_RULE, BaseTool, _valid_tool_name
from compose.tools.middleware import (
    ToolInput,
    ToolMiddleware,
    ToolOutput,
    _build_endpoints,
    _close,
    _Endpoints,
    _MessageOutput,
    _tool_call_id,
    stream_call_error,
    tool_chunk_text,
)

__all__ = ["ToolArgumentsHandler", "ToolsNode", "UnknownToolsHandler"]

T = TypeVar("T")
_OUTPUTS = {ToolOutput, _MessageOutput}

# ----------------------------------------------------------------------------------------------------------
# The node


UnknownToolsHandler = Callable[[str, str], Awaitable[str]]
ToolArgumentsHandler = Callable[[str, str], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class _Call:
    """One prepared call: the endpoints are None for an unknown tool answered by the unknown-tools handler."""

    name: str
    call_id: str
    arguments: str
    endpoints: _Endpoints | None


class ToolsNode:
    """Runs the tool calls of an assistant message; a graph node (``graph.add_tools_node``) or used alone.

    Args:
        tools: the tools, each invokable and/or streamable, with distinct names.
        execute_sequentially: run the calls one after the other, in call order (default: in parallel).
        max_concurrency: at most this many calls run at the same time (parallel mode); None for no limit.
        unknown_tools_handler: ``async (name, arguments) -> str`` answering calls to tools the node lacks.
        tool_arguments_handler: ``async (name, arguments) -> str`` rewriting each call's arguments first.
        middlewares: endpoint wrappers, the first outermost.

    Raises:
        TypeError: a tool is neither invokable nor streamable.
        ValueError: a tool's name is not one providers accept (letters, digits, ``_`` and ``-``, at most 64,
            as ``@tool`` requires), two tools share a name, or ``max_concurrency`` is below 1.

    Example:
        >>> from compose.schema import FunctionCall, ToolCall, assistant_message
        >>> from compose.tools.base import tool
        >>> @tool
        ... async def add(a: int, b: int) -> int:
        ...     return a + b
        >>> node = ToolsNode([add], max_concurrency=4)
        >>> node
        ToolsNode(tools=['add'], parallel, max_concurrency=4, middlewares=0)
        >>> call = ToolCall(id="c1", function=FunctionCall(name="add", arguments='{"a": 1, "b": 2}'))
        >>> [m.content for m in anyio.run(node.invoke, assistant_message("", [call]))]
        ['3']
    """

    def __init__(
        self,
        tools: Sequence[BaseTool],
        *,
        execute_sequentially: bool = False,
        max_concurrency: int | None = None,
        unknown_tools_handler: UnknownToolsHandler | None = None,
        tool_arguments_handler: ToolArgumentsHandler | None = None,
        middlewares: Sequence[ToolMiddleware] = (),
    ) -> None:
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        self.execute_sequentially = execute_sequentially
        self.max_concurrency = max_concurrency
        self._unknown_tools_handler = unknown_tools_handler
        self._tool_arguments_handler = tool_arguments_handler
        self._middlewares = tuple(middlewares)
        self._tools = tuple(tools)
        self._infos: list[ToolInfo] = []
        self._endpoints: dict[str, _Endpoints] = {}
        for i, t in enumerate(self._tools):
            info_fn = getattr(t, "info", None)
            info = info_fn() if callable(info_fn) else None
            if not isinstance(info, ToolInfo):
                raise TypeError(
                    f"tools[{i}] is not a tool: {type(t).__qualname__} (a tool has info() -> ToolInfo and an async "
                    "run(arguments) or stream(arguments); build one from a function with @tool)"
                )
            if not _valid_tool_name(info.name):
                raise ValueError(
                    f"tools[{i}] ({type(t).__qualname__}) is named {info.name!r}, which chat model providers "
                    f"reject (a tool name is {_TOOL_NAME_RULE}): change the name its info() returns"
                )
            if info.name in self._endpoints:
                raise ValueError(
                    f"two tools are named {info.name!r}; tool names must be unique in a ToolsNode"
                )
            self._endpoints[info.name] = _build_endpoints(t, info.name, self._middlewares)
            self._infos.append(info)

    @property
    def tools(self) -> tuple[BaseTool, ...]:
        """The node's tools, in the order given."""
        return self._tools

    def tool_infos(self) -> list[ToolInfo]:
        """The tools' descriptions, in order, for a chat model's ``with_tools``."""
        return list(self._infos)

    def __repr__(self) -> str:
        mode = "sequential" if self.execute_sequentially else "parallel"
        limit = "" if self.max_concurrency is None else f", max_concurrency={self.max_concurrency}"
        names = [i.name for i in self._infos]
        return f"ToolsNode(tools={names}, {mode}{limit}, middlewares={len(self._middlewares)})"

    async def invoke(self, message: Message, **opts: Any) -> list[Message]:
        """Run every tool call of ``message`` and return the tool messages in call order.

        ``opts`` are per-call options; none are used yet and unknown ones are ignored.

        Raises:
            ToolInputError: ``message`` is not an assistant message with tool calls.
            ToolNotFoundError: a call names an unknown tool and there is no unknown-tools handler.
            ToolExecutionError: a call failed (the first in call order); the cause is ``__cause__``.
        """
        if _resumed.get() is None and self._tool_arguments_handler is None and type(message) is Message:
            tcs = message.tool_calls
            if len(tcs) == 1 and message.role == "assistant":  # the hot path: one call of a known tool, run inline
                tc = tcs[0]
                name = tc.function.name
                endpoints = self._endpoints.get(name)
                if endpoints is not None:
                    return [await self._invoke_single(message, _Call(name, tc.id, tc.function.arguments, endpoints))]
        message, executed, resumed = _restore_rerun(message)
        calls = await self._prepare(message)
        # a tool sees its own saved interrupt, never its node's: needed only inside a resumed run
        isolate = resumed is not None or _resumed.get() is not None
        if len(calls) == 1 and not executed:  # the common case: one call, run inline
            call = calls[0]
            out = await self._invoke_one(call, resumed, isolate)
            if type(out) not in _OUTPUTS:
                _raise_first_failure(calls, [out], streaming=False)
                _raise_interrupts(message, calls, [out])
            return [_message_of(cast(ToolOutput, out), call)]
        results: list[ToolOutput | Exception | None] = [None] * len(calls)

        async def run_one(i: int) -> None:
            call = calls[i]
            if call.call_id in executed:  # finished before the interrupt: never run twice
                results[i] = ToolOutput(executed[call.call_id])
                return
            results[i] = await self._invoke_one(call, resumed, isolate)

        await self._run_all(run_one, len(calls))
        if not set(map(type, results)) <= _OUTPUTS:  # all outputs, without a generator frame per call
            texts = [r.result if isinstance(r, ToolOutput) else r for r in results]
            _raise_first_failure(calls, texts, streaming=False)
            _raise_interrupts(message, calls, texts)
        outputs = cast(list[ToolOutput], results)  # no failure left: every slot holds the call's output
        return [
            tool_message(out.result, c.call_id, tool_name=c.name) if type(out) is ToolOutput else _message_of(out, c)
            for c, out in zip(calls, outputs, strict=True)
        ]

    async def _invoke_single(self, message: Message, call: _Call) -> Message:
        """``message``'s one call of a known tool, outside a resumed run (``invoke``'s common case)."""
        assert call.endpoints is not None
        token = _tool_call_id.set(call.call_id)
        try:
            inp = ToolInput(call.name, call.arguments, call.call_id)
            out: ToolOutput | Exception = await call.endpoints.invoke(inp)
        except Exception as exc:
            out = exc
        finally:
            _tool_call_id.reset(token)
        if type(out) not in _OUTPUTS:
            if not isinstance(out, Exception):  # a middleware's own output type: its result is what counts
                return _message_of(ToolOutput(out.result), call)
            _raise_first_failure((call,), (out,), streaming=False)
            _raise_interrupts(message, (call,), (out,))
        return _message_of(cast(ToolOutput, out), call)

    async def _invoke_one(self, call: _Call, resumed: _Resumed | None, isolate: bool) -> ToolOutput | Exception:
        """One call's output, or its failure (a result too: the node decides)."""
        token = _tool_call_id.set(call.call_id)
        rtoken = _resumed.set(_child_resumed(resumed, call)) if isolate else None
        try:
            if call.endpoints is None:
                return ToolOutput(await self._unknown(call))
            out = await call.endpoints.invoke(ToolInput(call.name, call.arguments, call.call_id))
            if type(out) not in _OUTPUTS:
                return ToolOutput(out.result)  # a middleware's own output type: its result is what counts
            return out
        except Exception as exc:
            return exc
        finally:
            if rtoken is not None:
                _resumed.reset(rtoken)
            _tool_call_id.reset(token)

    async def stream(self, message: Message, **opts: Any) -> StreamReader[list[Message | None]]:
        """Start every tool call of ``message``; return one stream of their results, slot ``i`` for call i.

        Each chunk is a list with one tool message in the slot of the call that produced it and None
        elsewhere; chunks of different calls interleave in arrival order. The calls are started (arguments
        handled, middlewares and invokable tools run, streamable tools' readers obtained) before this returns,
        in parallel or, with ``execute_sequentially``, one after the other (as in Eino, only the starts are
        sequential); their streams are read as the returned reader is. Closing it closes every tool stream.

        ``opts`` are per-call options; none are used yet and unknown ones are ignored.

        Raises:
            ToolInputError: ``message`` is not an assistant message with tool calls.
            ToolNotFoundError: a call names an unknown tool and there is no unknown-tools handler.
            ToolExecutionError: a call failed to start (the first in call order), with ``streaming=True``.
                A failure while a tool stream is read (the tool raised, a chunk is not a string or cannot be
                serialised) is an error item of the returned reader: its ``recv()`` raises a
                ``ToolExecutionError`` with ``streaming=True`` naming tool and call id, the tool's error as
                ``__cause__``, and the stream goes on with the other calls' chunks.
        """
        message, executed, resumed = _restore_rerun(message)
        calls = await self._prepare(message)
        n = len(calls)
        readers: list[StreamReader[str] | Exception | None] = [None] * n

        async def start_one(i: int) -> None:
            call = calls[i]
            if call.call_id in executed:  # finished before the interrupt: never run twice
                readers[i] = StreamReader.from_iterable([executed[call.call_id]])
                return
            token = _tool_call_id.set(call.call_id)
            rtoken = _resumed.set(_child_resumed(resumed, call))
            try:
                if call.endpoints is None:
                    readers[i] = StreamReader.from_iterable([await self._unknown(call)])
                else:
                    inp = ToolInput(call.name, call.arguments, call.call_id)
                    readers[i] = (await call.endpoints.stream(inp)).result
            except Exception as exc:  # a failed call is a result; the node decides below
                readers[i] = exc
            finally:
                _resumed.reset(rtoken)
                _tool_call_id.reset(token)

        try:
            await self._run_all(start_one, n)
            _raise_first_failure(calls, readers, streaming=True)
            if any(isinstance(r, GraphInterrupt) for r in readers):
                # the finished calls' streams are read now and saved as text, so resuming never reruns them
                texts: list[object] = []
                for call, r in zip(calls, readers, strict=True):
                    texts.append(await _read_finished(call, r) if isinstance(r, StreamReader) else r)
                _raise_interrupts(message, calls, texts)
        except BaseException:
            for r in readers:
                if isinstance(r, StreamReader):
                    await _close(r)
            raise
        started = cast(list[StreamReader[str]], readers)  # no failure left: every slot holds a reader
        return merge_streams([_SlotReader(i, n, calls[i], reader) for i, reader in enumerate(started)])

    async def _prepare(self, message: Message) -> list[_Call]:
        if not isinstance(message, Message):
            raise ToolInputError(f"ToolsNode expects an assistant Message, got {type(message).__name__}")
        if message.role != "assistant":
            raise ToolInputError(f"expected message role is assistant, got {message.role}")
        if not message.tool_calls:
            raise ToolInputError("no tool call found in input message")
        calls: list[_Call] = []
        for tc in message.tool_calls:
            name = tc.function.name
            endpoints = self._endpoints.get(name)
            if endpoints is None and self._unknown_tools_handler is None:
                raise ToolNotFoundError(name)
            calls.append(_Call(name, tc.id, tc.function.arguments, endpoints))
        handler = self._tool_arguments_handler
        if handler is None:
            return calls
        prepared: list[_Call] = []
        for call in calls:
            if call.endpoints is not None:
                token = _tool_call_id.set(call.call_id)
                try:
                    arguments = await handler(call.name, call.arguments)
                except Exception as exc:
                    raise ToolArgumentsHandlerError(call.name, call.call_id, call.arguments, exc) from exc
                finally:
                    _tool_call_id.reset(token)
                call = _Call(call.name, call.call_id, arguments, call.endpoints)
            prepared.append(call)
        return prepared

    async def _unknown(self, call: _Call) -> str:
        assert self._unknown_tools_handler is not None
        return await self._unknown_tools_handler(call.name, call.arguments)

    async def _run_all(self, run_one: Callable[[int], Coroutine[Any, Any, None]], n: int) -> None:
        """Run ``run_one(0..n-1)``: inline for one call or in sequential mode, else one task each."""
        if n == 1 or self.execute_sequentially:
            for i in range(n):
                await run_one(i)
            return
        limit = self.max_concurrency
        async with anyio.create_task_group() as tg:
            if limit is None or limit >= n:
                for i in range(n):
                    tg.start_soon(run_one, i)
                return
            # Taking the slot before spawning starts the calls in call order whatever the scheduler does.
            slots = anyio.Semaphore(limit)

            async def run_and_release(i: int) -> None:
                try:
                    await run_one(i)
                finally:
                    slots.release()

            for i in range(n):
                await slots.acquire()
                tg.start_soon(run_and_release, i)


async def _read_finished(call: _Call, reader: StreamReader[str]) -> str:
    """The text of a call that finished while another interrupted, to save it; a failure while reading it (its
    stream broke, or a chunk is not a string) fails the node as the call's failure would have. An empty stream
    is ``""``, as for :meth:`ToolsNode.invoke`."""
    try:
        return "".join([tool_chunk_text(call.name, call.call_id, chunk) async for chunk in reader])
    except GraphInterrupt:
        raise
    except Exception as exc:
        named = stream_call_error(call.name, call.call_id, exc)
        if named is exc:
            raise
        raise named from exc


def _message_of(out: ToolOutput, call: _Call) -> Message:
    """The call's tool message: the one a middleware built already (the agent's event collector: its event and
    the node's output share it), else a new one."""
    if type(out) is _MessageOutput:
        msg = out.message
        if msg.tool_call_id == call.call_id and msg.tool_name == call.name:
            return msg
    return tool_message(out.result, call.call_id, tool_name=call.name)


def _raise_first_failure(calls: Sequence[_Call], results: Sequence[object], *, streaming: bool) -> None:
    """A real failure (first in call order) fails the node, even when other calls interrupted."""
    for call, result in zip(calls, results, strict=True):
        if isinstance(result, Exception) and not isinstance(result, GraphInterrupt):
            if isinstance(result, ToolExecutionError) and _names(result, call):
                raise result  # the call's stream failed (read by the derived invoke): named already
            raise ToolExecutionError(call.name, call.call_id, result, streaming=streaming) from result


def _names(err: ToolExecutionError, call: _Call) -> bool:
    return err.tool_name == call.name and err.call_id == call.call_id


_RERUN_KIND = "pyeino.tools_node"


def _raise_interrupts(message: Message, calls: Sequence[_Call], results: Sequence[object]) -> None:
    """If calls interrupted, pause the node: one composite interrupt whose state keeps the input message and
    the results of the calls that finished (eino-semantics 2, "Interrupts")."""
    signals: list[InterruptSignal] = []
    executed: dict[str, str] = {}
    for call, result in zip(calls, results, strict=True):
        if isinstance(result, InterruptSignal):
            result.segment = f"tool:{call.name}:{call.call_id}"
            signals.append(result)
        elif isinstance(result, GraphInterrupt):  # a plain GraphInterrupt from a nested run inside the tool
            sig = InterruptSignal(result.info)
            sig.segment = f"tool:{call.name}:{call.call_id}"
            signals.append(sig)
        elif isinstance(result, str):
            executed[call.call_id] = result
    if not signals:
        return
    rerun = [s.segment.rsplit(":", 1)[1] for s in signals]
    state = {"kind": _RERUN_KIND, "input": message.model_dump(mode="json"), "executed": executed}
    info = {"rerun_tools": rerun, "executed_tools": sorted(executed)}
    raise InterruptSignal(info, state=state, has_state=True, subs=signals)


def _restore_rerun(message: Message) -> tuple[Message, dict[str, str], _Resumed | None]:
    """On a rerun after an interrupt: the saved input message and finished results (the node's own input is the
    zero value then, as in Eino); otherwise the input as it is."""
    resumed = _resumed.get()
    if resumed is None or not resumed.has_state or not isinstance(resumed.state, dict):
        return message, {}, None
    state = resumed.state
    if state.get("kind") != _RERUN_KIND:
        return message, {}, None
    return Message.model_validate(state["input"]), dict(state["executed"]), resumed


def _child_resumed(resumed: _Resumed | None, call: _Call) -> _Resumed | None:
    """What ``get_interrupt_state``/``get_resume_context`` answer inside one tool: its own saved interrupt (when
    it is the one that paused), else nothing, so a tool never sees its node's context."""
    if resumed is None or resumed.record is None:
        return None
    segment = f"tool:{call.name}:{call.call_id}"
    for rec in resumed.record.subs:
        if rec.segment == segment:
            return resumed_for(rec, resumed.resume)
    return None


class _SlotReader(ConvertingReader[list[Message | None]]):
    """One call's tool stream as the node's chunks: each string chunk in slot ``i`` of ``n``, and each error
    item as a :class:`ToolExecutionError` naming the tool and call id (``streaming=True``, the error as its
    cause), so a reader far downstream (the next node's concat) still says which tool failed. A chunk that is
    not a string (a class-based tool's stream) is such an error too. Interrupts and ``StreamEnd`` items pass
    unchanged (cancellation is never an item). The middlewares, inside, see the tool's own errors
    (``tool_errors_as_results`` turns them into a chunk before they get here)."""

    _kind = "tool-slot"

    def __init__(self, i: int, n: int, call: _Call, src: StreamReader[str]) -> None:
        super().__init__(src)
        self._call = call
        self._before: list[Message | None] = [None] * i
        self._after: list[Message | None] = [None] * (n - i - 1)

    def _convert(self, x: object) -> object:
        call = self._call
        if type(x) is _Signal:
            exc = x.exc
            if exc is None:
                self._done = True
                return x
            if not isinstance(exc, Exception):
                return x
            named = stream_call_error(call.name, call.call_id, exc)
            return x if named is exc else _Signal(named)
        try:
            text = tool_chunk_text(call.name, call.call_id, x)
        except ToolExecutionError as exc:
            return _Signal(exc)
        return [*self._before, tool_message(text, call.call_id, tool_name=call.name), *self._after]

    def __repr__(self) -> str:
        return f"<StreamReader tool-slot({self._call.name}:{self._call.call_id}) {self._state()} source={self._src!r}>"
