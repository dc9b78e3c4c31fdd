"""The scheduler: runs compiled ``Tables`` in Pregel or DAG mode (eino-semantics 1.3, 1.4, 1.7).

Pregel (``any_predecessor``): supersteps with a barrier. Each step first finishes the previous step's nodes (post
handlers, then routing: edges and branches write into the successors' inboxes), then returns END's value if END
received one, else runs every node with a non-empty inbox (values from several predecessors fan-in merged).
The step limit is checked before running a step, counting from 0 (START's routing is not a step).

DAG (``all_predecessor``): eager. A node becomes ready when every predecessor has delivered or been skipped; a node
all of whose predecessors were skipped is skipped itself, and the skip propagates. Tasks start as soon as they
are ready; the first time END is ready its value is returned and anything still running is cancelled.

In a streaming run every value on an edge is a ``StreamReader``; fan-out copies it, every stream the run holds is
closed when the run ends, whatever the way it ends.

A node's output is checked against its declared type where ``NodeRT.out_check`` says how (one ``isinstance``):
a wrong value raises ``NodeOutputTypeError`` naming the node before it is routed anywhere; in a streaming run a
lazy ``map`` checks each chunk (a chat model's: a ``Message``), so a wrong chunk becomes that error as an item
of the stream, raised wherever the stream is read, with no task of its own. The same map names every other
error item of the stream after the node (``blame``): a node, handler or branch reading it passes it on rather
than taking the blame.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from types import MappingProxyType
from typing import Any

import anyio

from compose._engine.blame import named_upstream
from compose._engine.dag import run_dag
from compose._engine.node_exec import exec_sub, node_call, node_failed, node_input, node_output
from compose._engine.options import _DEFAULT_OPTIONS, CallOptions
from compose._engine.pregel import call_done, call_failed, pregel_step
from compose._engine.resume import restore, resumed_for
from compose._engine.routing import deliver, route
from compose._engine.run_callbacks import callback_config, fail_early
from compose._engine.tables import CALLING, NodeRT, Tables
from compose._engine.tables import NOTHING as _NOTHING
from compose.callbacks import (
    CallbackConfig,
    CallbackHandler,
    RunInfo,
    _current_config,
    fire_cancel,
    fire_end,
    fire_end_stream,
    fire_failure,
    fire_start,
    fire_start_stream,
)
from compose.checkpoint._snapshot import RerunRecord, RunSnapshot
from compose.errors import (
    GraphInterrupt,
    GraphRunError,
    NodeOutputTypeError,
    NodeRunError,
)
from compose.interrupt import _node_address, _resumed
from compose.merge import merge_stream_values, merge_values
from compose.state import _current_frame, _StateFrame, call_handler
from compose.stream import SKIP, StreamReader, concat
from compose.stream import close_if_stream as _close
from compose.stream import one_chunk as _one

_NO_READY: deque[int] = deque(maxlen=0)
_NONE_FOR: Any = MappingProxyType({})  # an empty table shared by the runs that never fill it (read-only)
_NO_NODES: tuple[int, ...] = ()  # ``last`` before the first step (replaced, never appended to)


def _pick(key: str, chunk: Any) -> Any:
    if isinstance(chunk, dict) and key in chunk:
        return chunk[key]
    return SKIP


class GraphRun:
    """One run of a compiled graph: ``begin()`` once, then ``step()`` until it returns True (``RunHandle``)."""

    __slots__ = (
        "address",
        "called",
        "calling",
        "calling_j",
        "calling_x",
        "cb",
        "frame",
        "gated",
        "general",
        "inbox",
        "info",
        "last",
        "live",
        "max_steps",
        "options",
        "origin",
        "path",
        "pending",
        "ready",
        "reported",
        "rerun_restored",
        "restore_from",
        "result",
        "resume_for",
        "skip_before",
        "skipped",
        "steps",
        "streaming",
        "t",
        "track",
    )
    # a split superstep's node call (``pregel_step(split=True)``), awaited by ``step``: its node and input, and
    # what it returned when ``step`` stopped before ending that step (its ``until`` met: the next ``step`` ends it)
    calling: Any  # the call's awaitable; None when no call is pending
    calling_j: int
    calling_x: Any
    called: Any
    _split = True  # ``step`` awaits a step's node in its own frame (not a watched run: ``stepped.SteppedRun``)

    def __init__(
        self,
        tables: Tables,
        *,
        streaming: bool,
        options: CallOptions,
        path: tuple[str, ...],
        info: RunInfo,
        address: str = "",
        restore_from: tuple[RunSnapshot, Mapping[str, Any]] | None = None,
        origin: object = None,
    ) -> None:
        self.t = tables
        # shared by a root run and its sub-graph runs: marks the errors their streams named (``blame``)
        self.origin = origin if origin is not None else object()
        self.address = address or tables.address
        self.restore_from = restore_from
        self.streaming = streaming
        self.options = options
        self.path = path
        self.info = info
        self.inbox: dict[int, dict[int, Any]] = {}
        # outputs to route at the next step's start (a list: a few at a time; an empty deque is 600 bytes)
        self.pending: list[tuple[int, Any]] = []
        self.steps = 0
        self.calling = self.called = None
        self.frame: _StateFrame | None = None
        self.cb: CallbackConfig | None = _NOTHING  # looked up at the first entry (_prepare)
        self.general = True
        self.live = False  # its handlers saw the start and not yet the end (aclose then reports a cancel)
        self.track = _node_address.get() is not None  # nodes run with their address set (track_addresses)
        self.result: Any = _NOTHING
        self.last: Sequence[int] = _NO_NODES
        # what only a restored run (resume_for, skip_before, rerun_restored) or a DAG run (ready, reported,
        # skipped) changes is shared and read-only until then (``resume.restore`` and ``dag`` replace them):
        # a run holds no empty containers of its own for them (an empty deque is 600 bytes, a dict 64)
        self.resume_for: dict[int, tuple[RerunRecord, Mapping[str, Any]]] = _NONE_FOR
        self.skip_before = self.rerun_restored = False
        if tables.dag:
            self.ready: deque[int] = deque()
            self.reported: dict[int, set[int]] = {}
            self.skipped: dict[int, set[int]] = {}
        else:
            self.ready = _NO_READY
            self.reported = self.skipped = _NONE_FOR
        max_steps = tables.max_steps
        if options is _DEFAULT_OPTIONS:  # the common case (a call without options): none of the checks below
            self.max_steps: int = max_steps if max_steps is not None else 0  # 0: no limit (DAG)
            # whether a step must pass _gate (interrupts before nodes, a stop request, a restored run)
            self.gated = bool(tables.interrupt_before)
            return
        if options.max_run_steps is not None:
            if tables.dag:
                raise GraphRunError("cannot set max run steps in dag")
            if options.max_run_steps < 1:
                raise GraphRunError("max run steps limit must be at least 1")
            max_steps = options.max_run_steps
        self.max_steps = max_steps if max_steps is not None else 0
        if not path and (options.node_options or options.designate):
            options.check(tables, top=True)  # recurses into sub-graphs: their runs need no check of their own
        self.gated = bool(tables.interrupt_before or options.external_interrupt is not None)

    # one superstep (``pregel.pregel_step``); a method so that a watched run (``stepped.SteppedRun``, a recorded
    # one) can settle and snapshot around it while a plain run pays nothing for that
    _pregel = pregel_step

    def __repr__(self) -> str:
        waiting = [self.t.keys[i] for i in self.inbox]
        mode = "dag" if self.t.dag else "pregel"
        return f"GraphRun({self.t.name!r}, step={self.steps}, mode={mode}, inbox={waiting})"

    # ------------------------------------------------------------------ the run

    async def begin(self, value: Any) -> None:
        """Start a run that the caller drives with ``step()`` (the agent runner does, to emit events between
        supersteps). Context (state, callbacks) is entered and left around each call that runs anything: a
        fresh run without handlers only queues its input."""
        try:
            cb = self._prepare()
        except BaseException as exc:
            await fail_early(self.options, self.path, self.info, self.streaming, value, exc)
            raise
        if cb is None and self.restore_from is None:  # no handler to fire, no snapshot to restore
            self.pending.append((self.t.start, value))
            return
        tokens = self._enter()
        try:
            await self._begin(value)
        finally:
            self._exit(tokens)

    async def step(self, to_end: bool = False, until: Callable[[], bool] | None = None) -> bool:
        """The one driver of a run (``RunHandle.step``): run one superstep (Pregel) or the whole run (DAG); True
        once ``result`` is set. With ``until``, keep running supersteps until it returns True after one (the
        agent runner stops when there are events); with ``to_end``, all of them (``invoke``: plain stretches
        fused). The run's state frame and callbacks are set for what runs now, and reset before it returns (the
        caller's code between steps sees neither).

        A Pregel run driven ``until`` a condition (not watched) awaits each step's node here (``pregel_step``'s
        ``split``), so that a run parked in a node holds this frame and the node's, none of the superstep's."""
        cb = self.cb
        if cb is _NOTHING:
            cb = self._prepare()
        frame = self.frame
        # what it sets, reset at the end: the frame it replaced when only the frame changes (a run parked in a
        # node holds no Token object then)
        entered: Any = _NOTHING
        if cb is not _current_config.get():
            entered = (_current_frame.set(frame) if frame is not None else None, _current_config.set(cb))
        elif frame is not None:
            entered = _current_frame.get()
            _current_frame.set(frame)
        try:
            if self.calling is not None:  # the last call returned with ``until`` met: its step ends now
                await call_done(self, self.called)
            if self.t.dag:
                out = await run_dag(self)
            elif until is None or not self._split:
                out = await self._pregel(to_end)
                while out is _NOTHING and (to_end or (until is not None and not until())):
                    out = await self._pregel(to_end)
                if out is _NOTHING:
                    return False
            else:
                while True:
                    out = await pregel_step(self, False, True)
                    if out is CALLING:  # the step's node, called from this frame
                        try:
                            out = await self.calling
                        except BaseException as exc:
                            await call_failed(self, exc)
                        if until():
                            self.called = out  # what the call made goes out before its step ends (next call)
                            return False
                        await call_done(self, out)
                    elif out is not _NOTHING:
                        break
                    if until():
                        return False
            if self.cb is None:
                self.result = out
            else:
                await self._end_run(out)
            return True
        except BaseException as exc:
            await self._fail(exc)
            raise
        finally:
            if type(entered) is tuple:
                self._exit(entered)
            elif entered is not _NOTHING:
                _current_frame.set(entered)

    @property
    def last_nodes(self) -> list[str]:
        """The nodes of the last superstep run."""
        return [self.t.keys[j] for j in self.last]

    async def aclose(self) -> None:
        """Abandon the run: close every stream it holds (idempotent); a run not finished reports a cancel.

        No cancel scope: closing the streams suspends only in a reader over the producer's async iterator, and
        the cancel callbacks run, each shielded where it runs (``StreamReader.aclose``, ``fire_cancel``), so a
        caller in a cancelled scope closes everything."""
        if self.inbox or self.pending or self.calling is not None:
            await self._close_all()
        if self.live:
            self.live = False
            await fire_cancel(self._handlers(), self.info)

    def _prepare(self) -> CallbackConfig | None:
        """At the run's first entry: make its state (the factory is called once per run) and look up its
        callbacks."""
        factory = self.t.state_factory
        if factory is not None and self.frame is None:
            try:
                state = factory()
            except Exception as exc:
                raise GraphRunError(
                    f"state factory of graph '{self.t.name}' failed: {type(exc).__name__}: {exc}"
                ) from exc
            self.frame = _StateFrame(state, _current_frame.get())
        cb = self.cb = callback_config(self.options, self.path)
        # whether every node takes the general path (streaming, callbacks or per-call node options)
        self.general = self.streaming or cb is not None or bool(self.options.node_options)
        return cb

    def _enter(self) -> tuple[Any, Any]:
        """Set the run's state frame and callbacks for what runs now (``step`` does the same inline)."""
        cb = self.cb
        if cb is _NOTHING:
            cb = self._prepare()
        frame = self.frame
        return (
            _current_frame.set(frame) if frame is not None else None,
            _current_config.set(cb) if cb is not _current_config.get() else None,
        )

    def _exit(self, tokens: tuple[Any, Any]) -> None:
        tok_frame, tok_cb = tokens
        if tok_cb is not None:
            _current_config.reset(tok_cb)
        if tok_frame is not None:
            _current_frame.reset(tok_frame)

    def _handlers(self) -> tuple[CallbackHandler, ...]:
        return self.cb.for_path(self.path) if self.cb is not None else ()

    async def _begin(self, value: Any) -> None:
        try:
            handlers = self._handlers()
            if handlers:
                if self.streaming:
                    value = await fire_start_stream(handlers, self.info, value)
                else:
                    await fire_start(handlers, self.info, value)
                self.live = True
            if self.restore_from is not None:
                await _close(value)
                snap, resume = self.restore_from
                restore(self, snap, resume, self.options.state_modifier)
            else:
                self.pending.append((self.t.start, value))
        except BaseException as exc:
            await _close(value)
            await self._fail(exc)
            raise

    async def _end_run(self, out: Any) -> None:
        """The run ended with ``out``: the graph's end callbacks see it (they may wrap a stream), then it is the
        result."""
        handlers = self._handlers()
        if handlers:
            self.live = False
            if self.streaming:
                out = await fire_end_stream(handlers, self.info, out)
            else:
                await fire_end(handlers, self.info, out)
        self.result = out

    async def _fail(self, exc: BaseException) -> None:
        handlers = self._handlers()
        with anyio.CancelScope(shield=True):
            await self._close_all()
            if handlers and (self.live or (isinstance(exc, Exception) and not isinstance(exc, GraphInterrupt))):
                self.live = False
                await fire_failure(handlers, self.info, exc)
        if isinstance(exc, anyio.get_cancelled_exc_class()):
            exc.add_note(f"pyeino: run of graph '{self.t.name}' was cancelled at step {self.steps}")

    async def _close_all(self) -> None:
        if self.calling is not None:  # a split step's node returned (its output not yet pending)
            self.pending.append((self.calling_j, self.called))
            self.calling = self.calling_x = self.called = None
        inbox = self.inbox
        if inbox:
            for box in inbox.values():
                for v in box.values():
                    if isinstance(v, StreamReader):
                        await v.aclose()
            inbox.clear()
        pending = self.pending
        while pending:
            v = pending.pop(0)[1]
            if isinstance(v, StreamReader):
                await v.aclose()

    # ------------------------------------------------------------------ nodes

    def _take(self, j: int) -> Any:
        box = self.inbox.pop(j)
        if len(box) == 1:
            return next(iter(box.values()))
        t = self.t
        key = t.keys[j]
        if not self.streaming:
            return merge_values(key, list(box.values()))
        cfg = t.fan_in.get(j)
        try:
            return merge_stream_values(
                key,
                [(t.keys[p], r, t.out_types[p]) for p, r in box.items()],
                source_eof=bool(cfg and cfg.stream_merge_with_source_eof),
            )
        except BaseException:
            self.inbox[j] = box  # closed by _close_all
            raise

    async def _exec(self, j: int, x: Any) -> Any:
        if self.track:
            return await self._exec_tracked(j, x)
        node = self.t.nodes[j]
        if self.resume_for and j in self.resume_for:
            return await self._exec_resumed(j, x)
        if node.invoke1 is None or self.general:
            return await self._exec_general(j, x, None)
        try:
            out = await node.invoke1(x)
        except Exception as exc:
            if isinstance(exc, GraphInterrupt):
                raise
            raise NodeRunError([*self.path, node.key], exc) from exc
        cls = node.out_check
        if cls is not None and not isinstance(out, cls):
            await _close(out)
            raise NodeOutputTypeError([*self.path, node.key], node.declared, type(out))
        return out

    async def _exec_tracked(self, j: int, x: Any) -> Any:
        """``_exec`` with the node's address visible to what it runs (``compose.interrupt.current_address``)."""
        token = _node_address.set(f"{self.address};node:{self.t.nodes[j].key}")
        try:
            if self.resume_for and j in self.resume_for:
                return await self._exec_resumed(j, x)
            return await self._exec_general(j, x, None)
        finally:
            _node_address.reset(token)

    async def _exec_resumed(self, j: int, x: Any) -> Any:
        """Re-run a node that paused: it sees its saved interrupt state; a sub-graph continues from its snapshot."""
        record, resume = self.resume_for.pop(j)
        if record.sub is not None:
            return await self._exec_general(j, x, (record.sub, resume))
        assert record.signal is not None
        token = _resumed.set(resumed_for(record.signal, resume))
        try:
            return await self._exec_general(j, x, None)
        finally:
            _resumed.reset(token)

    async def _exec_general(self, j: int, x: Any, sub_restore: tuple[RunSnapshot, Mapping[str, Any]] | None) -> Any:
        """Run node ``j`` on ``x``: its pre handler, its call (a sub-graph's run), its output checked and wrapped.
        The hot path of ``pregel_step`` makes the same three steps itself (no frame of this held while the node
        runs); every other caller comes here."""
        node = self.t.nodes[j]
        phase = "pre handler"
        try:
            if node.has_pre or self.streaming:
                x = await node_input(self, node, x)
            phase = ""
            if node.sub is not None:
                out = await exec_sub(self, node, x, sub_restore)
            elif self.cb is None and not self.streaming and not self.options.node_options:
                out = await node.paradigms.invoke(x)  # type: ignore[union-attr]
            else:
                out = await node_call(self, node, x)
        except BaseException as exc:
            error = await node_failed(self, node, x, exc, phase)
            if error is exc:
                raise
            raise error from exc
        if node.out_check is not None or node.output_key is not None or self.streaming:
            return await node_output(self, node, out)
        return out

    async def _pre(self, node: NodeRT, x: Any) -> Any:
        frame = self.frame
        if self.streaming:
            if node.pre is not None:
                assert frame is not None
                x = _one(await call_handler(node.pre, await concat(x), frame))
            elif node.stream_pre is not None:
                assert frame is not None
                x = await call_handler(node.stream_pre, x, frame)
            if node.input_key is not None:
                x = x.map(partial(_pick, node.input_key))
            return x
        if node.pre is not None:
            assert frame is not None
            x = await call_handler(node.pre, x, frame)
        elif node.stream_pre is not None:
            assert frame is not None
            x = await concat(await call_handler(node.stream_pre, _one(x), frame))
        if node.input_key is not None:
            if not isinstance(x, dict) or node.input_key not in x:
                raise GraphRunError(f"cannot find input key: {node.input_key} (node '{node.key}')")
            x = x[node.input_key]
        return x

    async def _post(self, node: NodeRT, out: Any) -> Any:
        frame = self.frame
        assert frame is not None
        try:
            if self.streaming:
                if node.post is not None:
                    return _one(await call_handler(node.post, await concat(out), frame))
                assert node.stream_post is not None
                return await call_handler(node.stream_post, out, frame)
            if node.post is not None:
                return await call_handler(node.post, out, frame)
            assert node.stream_post is not None
            return await concat(await call_handler(node.stream_post, _one(out), frame))
        except GraphInterrupt:
            raise
        except Exception as exc:
            if named_upstream(exc, self.origin):
                raise  # an error item of the node's own output stream, which names the node already
            await _close(out)
            raise NodeRunError([*self.path, node.key], exc, phase="post handler") from exc

    # routing a node's output along its edges and branches (``routing``): methods, so that a watched run
    # (``stepped.SteppedRun``, ``history.RecordedRun``) can end a DAG step and record what is routed
    _finish = route
    _deliver = deliver
