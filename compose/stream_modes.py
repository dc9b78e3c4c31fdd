"""Stream modes: watching a graph run as a stream of ``StreamPart`` s (``runnable.stream(x, stream_mode=...)``).

The parts come from the callback mechanism, live: a callback handler turns node starts and ends into parts as
they happen, node output streams are observed as they are read (``wrap_stream_output``, no copy), and the
reader takes the parts as they are queued. Modes:

* ``"values"``: the top graph's state after each step (graphs with state), once per step, after the step's
  post handlers ran (the state its history snapshot holds). A Pregel step is a superstep; a DAG step is one node
  completion (as the history numbers them). A run that ends without a step of its own (a resumed run ending
  where it paused) gives its state once at the end;
* ``"updates"``: ``{node: output}`` as each node finishes (a streamed output once its stream has been read to
  its end; one closed before its end gives no part);
* ``"messages"``: ``(chunk, {"node": key, "namespace": ns})`` for every chat model token anywhere in the run, as
  it streams (with its namespace even when ``subgraphs=False``);
* ``"custom"``: what node code writes with ``get_stream_writer()(data)``, as it writes it;
* ``"debug"``: ``{"type": "task_start" | "task_end" | "snapshot", "step": k, "node": key}``: a task event with
  step ``k`` happens between the top graph's snapshots ``k - 1`` and ``k``;
* ``"output"``: the run's output chunks, as ``stream()`` yields them (left out unless asked).

A part's ``namespace`` is the tuple of node keys through sub-graphs (``()`` for the top graph). Without
``subgraphs=True`` only the top graph's ``updates``/``values``/``custom``/``debug`` parts are yielded. Each mode
keeps its own order; parts of several modes interleave as they happen.

Why the run has a task of its own here (one per watched run, none per node): a part must reach the reader
while the run is in the middle of a node (a sub-graph's inner nodes finishing, a model's tokens read by the next
node, a DAG node finishing while its siblings still run). Those frames are suspended inside the run's stack,
and a coroutine stack can only be suspended in a task other than the reader's. So the reader opens a task
group at its first ``recv()`` and runs the graph in one task there; callbacks queue the parts, the reader's
``recv()`` takes them. The run still goes at the reader's pace where it can: between Pregel supersteps and
between output chunks it waits until the reader has taken everything queued. Nothing of this exists for a run
without ``stream_mode``.

The task group lives from the first ``recv()`` to the end of the stream (or ``aclose()``), in the task that
reads: read the parts in one task, and end the stream (read it to its end, or close it, e.g. with ``async
with``) inside any cancel scope you started reading it in.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, get_args

import anyio

from compose._engine.options import CallOptions
from compose.callbacks import CallbackHandler, RunInfo, StreamObserver, _current_config, observe_stream
from compose.errors import StreamEnd, StreamError
from compose.interrupt import _node_address
from compose.stream import StreamReader
from compose.stream._concat import concat_items
from compose.stream._core import _EMPTY, _END, _Signal

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from compose._engine.scheduler import GraphRun

__all__ = ["StreamMode", "StreamPart", "get_stream_writer"]

StreamMode = Literal["values", "updates", "messages", "custom", "debug", "output"]
_MODES = frozenset(get_args(StreamMode))


@dataclass(frozen=True, slots=True)
class StreamPart:
    """One part of a watched run: its ``mode``, its ``data`` and the ``namespace`` (node keys through
    sub-graphs, ``()`` for the top graph) it comes from."""

    mode: str
    data: Any
    namespace: tuple[str, ...] = ()


_sink: ContextVar[_Collector | None] = ContextVar("pyeino_stream_sink", default=None)


def _no_writer(data: Any) -> None:
    """Outside a run watched with ``stream_mode="custom"``: nothing to write to."""


def get_stream_writer() -> Callable[[Any], None]:
    """The writer of ``"custom"`` parts for the node running now: ``get_stream_writer()(data)``; a no-op
    outside a run streamed with ``stream_mode`` including ``"custom"``.

    Example::

        async def node(x: str) -> str:
            get_stream_writer()({"progress": 0.5})
            return x
    """
    sink = _sink.get()
    if sink is None or "custom" not in sink.modes:
        return _no_writer
    where = sink.where()
    ns = where[0] if where is not None else ()
    return lambda data: sink.add("custom", data, ns)


@dataclass(slots=True)
class _Streamed:
    """An ``updates`` part of a streamed output read to its end: its chunks, concatenated when taken."""

    namespace: tuple[str, ...]
    node: str
    chunks: list[Any]


class _Barrier:
    """Queued by the run where it waits for the reader: set once the reader has taken what came before."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = anyio.Event()


class _Observer(StreamObserver):
    def __init__(self, sink: _Collector, ns: tuple[str, ...], node: str, chat: bool, updates: bool) -> None:
        self.sink, self.ns, self.node = sink, ns, node
        self.chat = chat and "messages" in sink.modes
        self.chunks: list[Any] | None = [] if updates else None

    def on_chunk(self, chunk: Any) -> None:
        if self.chat:
            self.sink.add("messages", (chunk, {"node": self.node, "namespace": self.ns}), self.ns)
        if self.chunks is not None:
            self.chunks.append(chunk)

    def on_finish(self, closed: bool) -> None:
        if self.chunks is not None and not closed:
            self.sink.push(_Streamed(self.ns, self.node, self.chunks))


class _Collector(CallbackHandler):
    """Turns callbacks into parts, queued until the reader takes them."""

    def __init__(self, modes: frozenset[str], subgraphs: bool) -> None:
        self.modes = modes
        self.subgraphs = subgraphs
        self.queue: deque[StreamPart | _Streamed | _Barrier] = deque()
        self.wake: anyio.Event | None = None  # the reader waits on it for the next item
        self.step = 0  # the top graph's snapshots taken so far
        self.valued = False  # a values part was given (the end gives one only when no step did)
        self.run: GraphRun | None = None
        self.root = ""  # the top run's address: nodes of other runs (a runnable a node calls) are not its own

    def push(self, item: StreamPart | _Streamed | _Barrier) -> None:
        self.queue.append(item)
        if self.wake is not None:
            self.wake.set()

    def add(self, mode: str, data: Any, ns: tuple[str, ...]) -> None:
        if mode == "messages" or self.subgraphs or not ns:
            self.push(StreamPart(mode, data, ns))

    async def barrier(self) -> None:
        """Wait until the reader has taken every part queued so far."""
        mark = _Barrier()
        self.push(mark)
        await mark.event.wait()

    def where(self) -> tuple[tuple[str, ...], str | None] | None:
        """(namespace, node) of the node running now, from its address (``runnable:g;node:a;node:b``): None
        outside the watched run; node None for the graph itself."""
        address = _node_address.get() or ""
        if not (address == self.root or address.startswith(self.root + ";")):
            return None
        if self.run is not None and _current_config.get() is not self.run.cb:
            return None  # a runnable a node calls: its own run (its handlers merged anew), not a sub-graph's
        keys = [seg[5:] for seg in address.split(";")[1:]]
        if not keys:
            return (), None
        return tuple(keys[:-1]), keys[-1]

    def _node(self, info: RunInfo) -> tuple[tuple[str, ...], str] | None:
        where = self.where()
        if where is None or where[1] is None or info.component == "Tool":
            return None
        return where[0], where[1]

    def _debug(self, kind: str, ns: tuple[str, ...], node: str | None) -> None:
        if "debug" in self.modes:
            self.add("debug", {"type": kind, "step": self.step + 1, "node": node}, ns)

    def settled(self, run: GraphRun) -> None:
        """A step of the top graph is over, its post handlers run (``CallOptions.step_watch``): its ``values``
        and ``debug`` snapshot parts."""
        if run is not self.run:
            return
        self.step = run.steps  # a DAG step: one node completion (``SteppedRun`` counts them)
        if "values" in self.modes:
            self.values(run)
        if "debug" in self.modes:
            self.push(StreamPart("debug", {"type": "snapshot", "step": self.step, "node": None}))

    def values(self, run: GraphRun) -> None:
        if run.frame is not None:
            self.valued = True
            self.push(StreamPart("values", copy.deepcopy(run.frame.state)))

    async def on_start(self, run_info: RunInfo, input: Any) -> None:
        where = self._node(run_info)
        if where is not None:
            self._debug("task_start", *where)

    async def on_start_with_stream_input(self, run_info: RunInfo, reader: StreamReader[Any]) -> None:
        await reader.aclose()
        await self.on_start(run_info, None)

    async def on_end(self, run_info: RunInfo, output: Any) -> None:
        where = self._node(run_info)
        if where is None:
            return
        ns, node = where
        if run_info.component == "ChatModel" and "messages" in self.modes:
            self.add("messages", (output, {"node": node, "namespace": ns}), ns)
        self._debug("task_end", ns, node)
        if "updates" in self.modes:
            self.add("updates", {node: output}, ns)

    async def wrap_stream_output(self, run_info: RunInfo, reader: StreamReader[Any]) -> StreamReader[Any]:
        where = self._node(run_info)
        if where is None:
            return reader
        ns, node = where
        self._debug("task_end", ns, node)
        updates = "updates" in self.modes and (self.subgraphs or not ns)
        chat = run_info.component == "ChatModel" and "messages" in self.modes
        if not (updates or chat):
            return reader
        return observe_stream(reader, _Observer(self, ns, node, chat, updates))


_OVER: Any = object()  # the run's task has not ended yet


class _PartsReader(StreamReader[StreamPart]):
    """The reader of ``stream(x, stream_mode=...)``: runs the graph in a task of its own task group, opened at
    the first pull in the reading task and left at the end (see the module docstring)."""

    _kind = "stream-parts"
    _cancel_safe = False

    def __init__(
        self,
        open_run: OpenRun,
        source: StreamReader[Any],
        modes: frozenset[str],
        subgraphs: bool,
        opts: dict[str, Any],
        check: tuple[Any] | None,
    ) -> None:
        super().__init__()
        self._sink = _Collector(modes, subgraphs)
        self._start: tuple[OpenRun, StreamReader[Any], dict[str, Any]] | None = (open_run, source, opts)
        self._check = check
        self._tg: TaskGroup | None = None
        self._reader_task: int | None = None
        self._outcome: Any = _OVER  # once the run's task ended: None, or the exception it ended with
        self._run_scope = anyio.CancelScope()  # the run's task's: cancelling it never touches the reader's scopes
        self._busy = False

    def _poll(self) -> object:
        if self._closed:
            return _Signal(StreamError("recv() on a closed stream reader"))
        queue = self._sink.queue
        while queue:
            item = queue.popleft()
            if isinstance(item, _Barrier):
                item.event.set()
                continue
            if isinstance(item, _Streamed):
                try:
                    return StreamPart("updates", {item.node: concat_items(item.chunks)}, item.namespace)
                except Exception as exc:
                    return _Signal(exc)
            return item
        if self._tg is not None or self._outcome is _OVER:
            return _EMPTY  # the run goes on (or has not started)
        self._done = True
        outcome, self._outcome = self._outcome, None
        return _END if outcome is None else _Signal(outcome)

    async def _pull(self) -> object:
        x = self._poll()
        if x is not _EMPTY:
            return x
        if self._busy:
            raise StreamError("another task is already receiving from this stream reader")
        me = anyio.get_current_task().id
        if self._reader_task is not None and self._reader_task != me:
            raise StreamError(
                "a stream_mode reader is read by the task that started reading it (its run's task group "
                "lives there): read it in one task"
            )
        self._busy = True
        opened = False
        try:
            if self._start is not None:
                self._reader_task = me
                opened = True
                await self._open()
            while True:
                x = self._poll()
                if x is not _EMPTY:
                    return x
                if self._outcome is not _OVER:
                    await self._leave()  # the run's task is over: every part is queued
                    continue
                self._sink.wake = anyio.Event()
                await self._sink.wake.wait()
        except BaseException as exc:
            # cancelled while waiting: the run is cancelled with it (its task, never the task group's scope,
            # which the reader's own code runs inside between reads); the task group is left here if it was
            # entered in this call, else by the next read or aclose()
            if self._outcome is _OVER:
                self._outcome = StreamError(
                    "a recv() of this stream_mode reader was cancelled, and the run with it (the stream ends here)"
                )
            self._run_scope.cancel()
            if opened and self._tg is not None:
                tg, self._tg = self._tg, None
                tg.cancel_scope.cancel()
                await tg.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        finally:
            self._busy = False

    async def _open(self) -> None:
        assert self._start is not None
        open_run, source, opts = self._start
        self._start = None
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        tg.start_soon(self._drive, open_run, source, opts)

    async def _leave(self) -> None:
        tg, self._tg = self._tg, None
        if tg is not None:
            await tg.__aexit__(None, None, None)

    async def _drive(self, open_run: OpenRun, source: StreamReader[Any], opts: dict[str, Any]) -> None:
        """The run's task; its outcome (None, or the exception to raise) for the reader."""
        outcome: BaseException | None = None
        with self._run_scope:
            try:
                await self._run(open_run, source, opts)
            except BaseException as exc:
                if isinstance(exc, anyio.get_cancelled_exc_class()):
                    raise
                outcome = exc  # the reader raises it (a child that raised would cancel the reader's task group)
        if self._outcome is _OVER:
            self._outcome = outcome
        if self._sink.wake is not None:
            self._sink.wake.set()

    async def _run(self, open_run: OpenRun, source: StreamReader[Any], opts: dict[str, Any]) -> None:
        """The graph run driven to its end, its parts queued by the callbacks."""
        sink = self._sink
        modes = sink.modes
        _sink.set(sink)  # this task's own context
        _node_address.set(_node_address.get() or "")  # nodes run with their address (where() reads it)
        result: StreamReader[Any] | None = None
        handle = None
        try:
            options = CallOptions.parse({**opts, "callbacks": [*(opts.get("callbacks") or ()), sink]})
            options = replace(options, step_watch=sink.settled)
            handle, run = await open_run(source, options, self._check)
            sink.run, sink.root = run, run.address
            pregel = not run.t.dag
            sink.step = run.steps
            done = False
            while not done:
                done = await handle.step()  # a step's snapshot parts come as it is settled (``settled``)
                if pregel and not done:
                    await sink.barrier()
            result = handle.result
            assert result is not None
            while True:
                try:
                    chunk = await result.recv()
                except StreamEnd:
                    break
                if "output" in modes:
                    sink.push(StreamPart("output", chunk))
                    await sink.barrier()
            if "values" in modes and not sink.valued:
                sink.values(run)
        finally:
            with anyio.CancelScope(shield=True):
                if result is not None:
                    await result.aclose()
                elif handle is not None:
                    await handle.aclose()
                else:
                    await source.aclose()

    async def _aclose_owned(self) -> None:
        if self._start is not None:  # never read: the run never started
            _, source, _ = self._start
            self._start = None
            await source.aclose()
            return
        tg, self._tg = self._tg, None
        if tg is None:
            return
        if anyio.get_current_task().id != self._reader_task:
            raise StreamError(
                "a stream_mode reader is closed by the task that read it (its run's task group lives there)"
            )
        tg.cancel_scope.cancel()
        await tg.__aexit__(None, None, None)

    def _release(self) -> None:
        self._sink.queue.clear()

    def __repr__(self) -> str:
        return f"<StreamReader stream-parts {self._state()} modes={sorted(self._sink.modes)}>"


def parse_modes(stream_mode: str | Sequence[str]) -> frozenset[str]:
    modes = [stream_mode] if isinstance(stream_mode, str) else list(stream_mode)
    unknown = [m for m in modes if m not in _MODES]
    if unknown or not modes:
        raise ValueError(f"unknown stream_mode {unknown or modes!r}; expected some of {sorted(_MODES)}")
    return frozenset(modes)


# how a watched run is opened (``Runnable._open_watched``): the run's handle (what is driven) and the graph run in it
OpenRun = Callable[[StreamReader[Any], CallOptions, tuple[Any] | None], Awaitable[tuple[Any, "GraphRun"]]]


def stream_parts(
    open_run: OpenRun,
    x: Any,
    modes: frozenset[str],
    subgraphs: bool,
    opts: dict[str, Any],
    source: StreamReader[Any] | None = None,
) -> StreamReader[StreamPart]:
    """The reader of ``runnable.stream(x, stream_mode=...)`` (or ``transform(source, stream_mode=...)``, which
    it then owns): the run starts at its first ``recv()``."""
    if source is None:
        return _PartsReader(open_run, StreamReader.from_iterable((x,)), modes, subgraphs, opts, (x,))
    return _PartsReader(open_run, source, modes, subgraphs, opts, None)
