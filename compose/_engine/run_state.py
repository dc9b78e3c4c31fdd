"""A graph run's mutable state, one record: ``RunState``. The run functions (``pregel``, ``dag``, ``routing``,
``node_exec``, ``resume``) take it with the tables it holds (``t``); the driver (``scheduler.GraphRun``) is a
``RunState`` that binds the hooks below to them, and a watched run (``stepped``, ``history``) wraps the hooks.

Nothing here imports a run function: the hooks are looked up on the run's class, as methods are (no slot, no
call of a hook table per step).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from functools import partial
from types import MappingProxyType
from typing import Any

from compose._engine.blame import OutputStream, named_upstream
from compose._engine.names import NOTHING as _NOTHING
from compose._engine.options import _DEFAULT_OPTIONS, CallOptions
from compose._engine.tables import NodeRT, Tables
from compose.callbacks import CallbackConfig, RunInfo
from compose.checkpoint._snapshot import RerunRecord, RunSnapshot
from compose.errors import GraphInterrupt, GraphRunError, NodeRunError
from compose.interrupt import _node_address
from compose.merge import merge_stream_values, merge_values
from compose.state import _StateFrame, call_handler
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


class RunState:
    """What one run of compiled ``Tables`` holds and changes: inboxes, pending outputs, step count, its state
    frame and callbacks, and (a DAG run) readiness. The run functions read and write it; the driver owns it."""

    __slots__ = (
        "address",
        "blames",
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
        # a streaming run's output checks, one per node that emitted (``node_exec.node_output``)
        self.blames: dict[int, OutputStream] = _NONE_FOR
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

    def __repr__(self) -> str:
        waiting = [self.t.keys[i] for i in self.inbox]
        mode = "dag" if self.t.dag else "pregel"
        return f"GraphRun({self.t.name!r}, step={self.steps}, mode={mode}, inbox={waiting})"

    @property
    def last_nodes(self) -> list[str]:
        """The nodes of the last superstep run."""
        return [self.t.keys[j] for j in self.last]

    def no_tasks(self) -> GraphRunError:
        """Eino's error for a run left with nothing to run and END not reached, naming the nodes that completed
        last as Eino prints them (``[a, b]``)."""
        tail = f", last completed nodes: [{', '.join(self.last_nodes)}]" if self.last else " after graph start"
        return GraphRunError(f"no tasks to execute{tail}")

    # ------------------------------------------------------------------ hooks
    # bound by the driver (``scheduler.GraphRun``) to the run functions; a watched run wraps them

    async def _exec(self, j: int, x: Any) -> Any:
        """Run node ``j`` on ``x`` (``node_exec.exec_node``)."""
        raise NotImplementedError

    async def _finish(self, src: int, out: Any) -> None:
        """Route ``src``'s output along its edges and branches (``routing.route``)."""
        raise NotImplementedError

    def _deliver(self, src: int, dst: int, value: Any) -> None:
        """Put ``value`` in ``dst``'s inbox from ``src`` (``routing.deliver``)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ inboxes and handlers

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
