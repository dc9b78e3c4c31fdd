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

from collections.abc import Callable
from typing import Any

import anyio

from compose._engine.dag import run_dag
from compose._engine.node_exec import exec_node
from compose._engine.pregel import call_done, call_failed, pregel_step
from compose._engine.resume import restore
from compose._engine.routing import deliver, route
from compose._engine.run_callbacks import callback_config, fail_early
from compose._engine.run_state import RunState
from compose._engine.tables import CALLING
from compose._engine.tables import NOTHING as _NOTHING
from compose.callbacks import (
    CallbackConfig,
    CallbackHandler,
    _current_config,
    fire_cancel,
    fire_end,
    fire_end_stream,
    fire_failure,
    fire_start,
    fire_start_stream,
)
from compose.errors import (
    GraphInterrupt,
    GraphRunError,
)
from compose.state import _current_frame, _StateFrame
from compose.stream import close_if_stream as _close


class GraphRun(RunState):
    """One run of a compiled graph, its driver: ``begin()`` once, then ``step()`` until it returns True
    (``RunHandle``). Its state is the ``RunState`` it is; the steps are the run functions it binds below."""

    __slots__ = ()
    _split = True  # ``step`` awaits a step's node in its own frame (not a watched run: ``stepped.SteppedRun``)
    # the hooks (``RunState``): methods, so that a watched run (``stepped.SteppedRun``, ``history.RecordedRun``)
    # can end a DAG step and record what runs and is routed
    _exec = exec_node
    _finish = route
    _deliver = deliver

    # one superstep (``pregel.pregel_step``); a method so that a watched run (``stepped.SteppedRun``, a recorded
    # one) can settle and snapshot around it while a plain run pays nothing for that
    _pregel = pregel_step

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
