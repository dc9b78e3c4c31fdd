"""Stream modes: watching a graph run as a stream of ``StreamPart`` s (``runnable.stream(x, stream_mode=...)``).

The parts come from the callback mechanism, produced as the caller reads, with no task of their own: the run is
driven superstep by superstep (``start_run``/``step``) inside the reader's ``recv()``, a callback handler turns
node starts and ends into parts, and node output streams are observed as they are read (``wrap_stream_output``,
no copy). Modes:

* ``"values"``: the graph state after each step (graphs with state; in DAG mode, once the run ends), and once
  more at the end (a step's post handlers run as its outputs are routed, which starts the next step: their
  changes show in the next part);
* ``"updates"``: ``{node: output}`` as each node finishes (a streamed output once its stream has been read);
* ``"messages"``: ``(chunk, {"node": key, "namespace": ns})`` for every chat model token anywhere in the run, as
  it streams (with its namespace even when ``subgraphs=False``);
* ``"custom"``: what node code writes with ``get_stream_writer()(data)``;
* ``"debug"``: ``{"type": "task_start" | "task_end" | "snapshot", "step": k, "node": key}``;
* ``"output"``: the run's output chunks, as ``stream()`` yields them (left out unless asked).

A part's ``namespace`` is the tuple of node keys through sub-graphs (``()`` for the top graph). Without
``subgraphs=True`` only the top graph's ``updates``/``values``/``custom``/``debug`` parts are yielded. Each mode
keeps its own order; parts of several modes interleave as they happen.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from compose.callbacks import CallbackHandler, RunInfo, StreamObserver, observe_stream
from compose.errors import StreamEnd
from compose.interrupt import _node_address
from compose.stream import StreamReader
from compose.stream._concat import concat_items

if TYPE_CHECKING:
    from compose.runnable import Runnable

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
    ns, _ = _where()
    return lambda data: sink.add("custom", data, ns)


def _where() -> tuple[tuple[str, ...], str | None]:
    """(namespace, node) of the node running now, from its address (``runnable:g;node:a;node:b``)."""
    address = _node_address.get() or ""
    keys = [seg[5:] for seg in address.split(";") if seg.startswith("node:")]
    if not keys or not address.split(";")[-1].startswith("node:"):
        return tuple(keys), None
    return tuple(keys[:-1]), keys[-1]


@dataclass(slots=True)
class _Pending:
    """An ``updates`` part whose output stream was observed: its chunks, concatenated when yielded."""

    namespace: tuple[str, ...]
    node: str
    chunks: list[Any]
    done: bool = False
    dropped: bool = False  # closed before its end: no part


class _Observer(StreamObserver):
    def __init__(self, sink: _Collector, ns: tuple[str, ...], node: str, chat: bool, pending: _Pending | None):
        self.sink, self.ns, self.node, self.chat, self.pending = sink, ns, node, chat, pending

    def on_chunk(self, chunk: Any) -> None:
        if self.chat and "messages" in self.sink.modes:
            self.sink.add("messages", (chunk, {"node": self.node, "namespace": self.ns}), self.ns)
        if self.pending is not None:
            self.pending.chunks.append(chunk)

    def on_finish(self, closed: bool) -> None:
        if self.pending is not None:
            self.pending.done, self.pending.dropped = not closed, closed


class _Collector(CallbackHandler):
    """Turns callbacks into parts, queued until the reader takes them."""

    def __init__(self, modes: frozenset[str], subgraphs: bool) -> None:
        self.modes = modes
        self.subgraphs = subgraphs
        self.queue: deque[StreamPart | _Pending] = deque()
        self.step = 0

    def add(self, mode: str, data: Any, ns: tuple[str, ...]) -> None:
        if mode == "messages" or self.subgraphs or not ns:
            self.queue.append(StreamPart(mode, data, ns))

    def _node(self, info: RunInfo) -> tuple[tuple[str, ...], str] | None:
        ns, node = _where()
        if node is None or info.component == "Tool":
            return None
        return ns, node

    def _debug(self, kind: str, ns: tuple[str, ...], node: str) -> None:
        if "debug" in self.modes:
            self.add("debug", {"type": kind, "step": self.step + 1, "node": node}, ns)

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
        pending = None
        if "updates" in self.modes and (self.subgraphs or not ns):
            pending = _Pending(ns, node, [])
            self.queue.append(pending)
        chat = run_info.component == "ChatModel"
        if pending is None and not (chat and "messages" in self.modes):
            return reader
        return observe_stream(reader, _Observer(self, ns, node, chat, pending))

    def ready(self, last: bool = False) -> Iterator[StreamPart]:
        """The parts that can be yielded now, in order. An ``updates`` part of a stream not yet read to its end
        holds back the ``updates`` parts after it (each mode keeps its order), not the other modes' parts; at
        the ``last`` call one whose stream nobody read to its end is left out."""
        keep: deque[StreamPart | _Pending] = deque()
        blocked = False
        while self.queue:
            item = self.queue.popleft()
            if isinstance(item, _Pending) or item.mode == "updates":
                if blocked:
                    keep.append(item)
                    continue
                if isinstance(item, _Pending):
                    if not (item.done or item.dropped or last):
                        blocked = True
                        keep.append(item)
                        continue
                    if not item.done:
                        continue
                    item = StreamPart("updates", {item.node: concat_items(item.chunks)}, item.namespace)
            yield item
        self.queue = keep


def parse_modes(stream_mode: str | Sequence[str]) -> frozenset[str]:
    modes = [stream_mode] if isinstance(stream_mode, str) else list(stream_mode)
    unknown = [m for m in modes if m not in _MODES]
    if unknown or not modes:
        raise ValueError(f"unknown stream_mode {unknown or modes!r}; expected some of {sorted(_MODES)}")
    return frozenset(modes)


def stream_parts(
    runnable: Runnable[Any, Any], x: Any, modes: frozenset[str], subgraphs: bool, opts: dict[str, Any]
) -> StreamReader[StreamPart]:
    """The reader of ``runnable.stream(x, stream_mode=...)``: the run happens as it is read."""
    return StreamReader.from_async_iterator(_parts(runnable, x, modes, subgraphs, opts))


async def _parts(
    runnable: Runnable[Any, Any], x: Any, modes: frozenset[str], subgraphs: bool, opts: dict[str, Any]
) -> AsyncIterator[StreamPart]:
    sink = _Collector(modes, subgraphs)

    @contextmanager
    def watching() -> Iterator[None]:
        # set around each await of the run only: the generator yields to its reader's context in between
        t1 = _sink.set(sink)
        t2 = _node_address.set(_node_address.get() or "")
        try:
            yield
        finally:
            _node_address.reset(t2)
            _sink.reset(t1)

    options = {**opts, "callbacks": [*(opts.get("callbacks") or ()), sink]}
    with watching():
        handle = await runnable.start_run(StreamReader.from_iterable((x,)), streaming=True, **options)
    result: StreamReader[Any] | None = None
    try:
        run = handle._run
        done = False
        while not done:
            sink.step = run.steps
            try:
                with watching():
                    done = await handle.step()
            except BaseException:
                for part in sink.ready():
                    yield part
                raise
            for part in sink.ready():
                yield part
            if not done or run.t.dag:
                if "values" in modes and run.frame is not None:
                    yield StreamPart("values", copy.deepcopy(run.frame.state))
                if "debug" in modes:
                    yield StreamPart("debug", {"type": "snapshot", "step": run.steps, "node": None})
        result = handle.result
        assert result is not None
        while True:
            try:
                with watching():
                    chunk = await result.recv()
            except StreamEnd:
                break
            for part in sink.ready():
                yield part
            if "output" in modes:
                yield StreamPart("output", chunk)
        for part in sink.ready(last=True):
            yield part
        if "values" in modes and run.frame is not None and not run.t.dag:
            yield StreamPart("values", copy.deepcopy(run.frame.state))
    finally:
        if result is not None:
            await result.aclose()
        else:
            await handle.aclose()
