"""Pregel mode (``any_predecessor``): supersteps with a barrier (eino-semantics 1.3).

Each step first finishes the previous step's nodes (post handlers, then routing along edges and branches), then
returns END's value if END received one, else runs every node with a non-empty inbox (values from several
predecessors fan-in merged). The step limit is checked before a step runs, counting from 0 (START's routing is not
a step). Interrupts: static ones before/after listed nodes, signals raised by nodes (their siblings finish), and an
external interrupt at a step boundary or, with a grace period, in the middle of a step.

A run driven to its end fuses stretches of one-node steps over plain nodes (a run without callbacks, interrupts
or per-call node options; in a streaming run, nodes that implement invoke only) into one loop, ``_fused``: same
steps, limit and errors (node output checks included: ``Tables.fused_check``), without the per-step inbox and
gate. The compiled tables say which nodes qualify (``fuse.fuse``) and how a branch chooses (``Tables.value_route``/
``stream_route``, the choices routing makes).
Every ``YIELD_EVERY`` steps a run passes through the event loop, so a loop of nodes that never await still
honours timeouts and cancellation and shares the loop with other runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import anyio
import anyio.lowlevel

from compose._engine.fuse import WrongOutput
from compose._engine.node_exec import exec_general, node_call, node_failed, node_input, node_output
from compose._engine.resume import RERUN_SOURCE, pause
from compose._engine.tables import CALLING
from compose._engine.tables import NOTHING as _NOTHING
from compose.errors import (
    GraphInterrupt,
    MaxStepsExceededError,
    NodeOutputTypeError,
)
from compose.interrupt import StopRequest
from compose.stream import close_if_stream as _close
from compose.stream import concat
from compose.stream import one_chunk as _one

if TYPE_CHECKING:
    from compose._engine.run_state import RunState

# a run passes through the event loop at least every this many steps, even when its nodes never await anything:
# a deadline or cancellation can fire and other runs make progress
YIELD_EVERY = 512


async def pregel_step(self: RunState, fuse: bool = False, split: bool = False) -> Any:
    """One superstep; END's value when the run is over, else ``_NOTHING``. With ``fuse`` (a run driven to its
    end), a stretch of one-node steps over plain nodes runs as one loop (``_fused``).

    A run parked in a node holds this frame: the hot path (one node, no interrupt) keeps its locals few; a step
    of several nodes, a resumed step and a run with an external interrupt go on in ``_step_batch``.

    With ``split`` (``RunState.step``, the one driver), the hot path stops at its node's call: it returns
    ``CALLING`` with the call in ``self.calling``, for the driver to await in its own frame and end the step with
    ``call_done`` (or ``call_failed``): a run parked in that node holds no frame of this function's."""
    t = self.t
    if not self.steps % YIELD_EVERY and self.steps:
        await anyio.lowlevel.checkpoint()  # nodes that never await must not starve other tasks or a deadline
    inbox = self.inbox
    pending = self.pending
    deferred: Sequence[tuple[int, Any]] = ()  # no list made (and held across the step) when there is none
    if self.skip_before and self.rerun_restored:
        # resuming nodes that paused: they finish their superstep first, so the outputs of their siblings in
        # that superstep are routed together with theirs (as if the run had never paused)
        deferred = list(pending)
        pending.clear()
    direct = t.direct
    while pending:
        j, x = pending.pop(0)
        nxt = direct[j]
        if nxt >= 0:  # one plain edge: deliver without the general routing
            if not pending and not inbox:  # the step's only output, to one node: it runs next, alone
                break
            box = inbox.get(nxt)
            if box is None:
                inbox[nxt] = {j: x}
            else:
                box[j] = x
            continue
        try:
            await self._finish(j, x)
        except GraphInterrupt as exc:
            # the node's output stream paused (read by its post handler or branch): the node itself re-runs on
            # resume, as when the node raised it (a cancelled model stream: adk.cancel)
            await _close(x)
            self.last = t.alone[j]
            raise await pause(self, reruns=[(j, exc)]) from None
        except BaseException:
            await _close(x)
            raise
    else:
        nxt = -1  # every output routed into the inboxes
    if nxt >= 0:
        j = nxt  # x is its input: no inbox made for it
    else:
        if not inbox:
            raise self.no_tasks()
        # As Eino computes the next tasks: read every ready inbox (fan-in merges may fail here), then END wins,
        # then interrupts before nodes, then the step limit.
        if len(inbox) != 1:
            return await _step_batch(self, None, deferred)
        # the hot path: one node this step
        j, box = inbox.popitem()
        inbox.clear()  # frees the emptied table (a run parked in this step holds no 160 bytes for it)
        if len(box) == 1:  # from one predecessor: nothing to merge
            (x,) = box.values()
        else:
            inbox[j] = box
            x = self._take(j)
        del box  # not held while the node runs (a parked run holds its frames' locals)
    if j == t.end:
        return x  # nothing else is held: the inbox was END's alone and every output is routed
    if self.gated or self.steps >= self.max_steps:
        await _gate(self, [(j, x)])
    if deferred or (self.gated and _cutting(self) is not None):  # a run with a stop request is gated
        return await _step_batch(self, [(j, x)], deferred)
    if (
        fuse
        and (t.fused_stream if self.streaming else t.fused)[j] is not None
        and self.cb is None
        and not self.gated
        and not self.options.node_options
        and not self.resume_for
        and not self.track
    ):
        return await _fused(self, j, x)
    node = t.nodes[j]
    if (node.invoke1 is None or split) and node.sub is None and not self.track and not self.resume_for:
        # the node runs here, in _exec_general's three steps: a run parked in a node holds every frame of its
        # stack, and none of _exec_general's
        phase = "pre handler"
        try:
            if node.has_pre or self.streaming:
                x = await node_input(self, node, x)
            phase = ""
            # not general: no callbacks, not streaming, no per-call node options
            call = node.invoke1 or node.paradigms.invoke  # type: ignore[union-attr]
            out = node_call(self, node, x) if self.general else call(x)
            if split:
                self.calling, self.calling_j, self.calling_x = out, j, x
                return CALLING
            out = await out
        except BaseException as exc:
            await raised(self, j, x, exc, phase)
        if node.out_check is not None or node.output_key is not None or self.streaming:
            out = await node_output(self, node, out)
        pending.append((j, out))
    else:
        # the node's coroutine made first: this frame does not hold its input while it runs
        # (a sub-graph's node straight to the general path: no frame of _exec's)
        if node.sub is not None and not self.track and not self.resume_for:
            out = exec_general(self, j, x, None)
        else:
            out = self._exec(j, x)
        del x
        try:
            pending.append((j, await out))
        except GraphInterrupt as exc:
            await raised(self, j, None, exc, "")
    self.steps += 1
    self.last = t.alone[j]
    if t.interrupt_after and j in t.interrupt_after:
        raise await pause(self, after=[j])
    return _NOTHING


async def raised(self: RunState, j: int, x: Any, exc: BaseException, phase: str) -> NoReturn:
    """Raise what node ``j``'s failure ``exc`` (in ``phase``; "": its call) raises: a pause when it interrupted,
    else the error naming the node (``node_failed``)."""
    error = await node_failed(self, self.t.nodes[j], x, exc, phase)
    if isinstance(error, GraphInterrupt):
        self.last = self.t.alone[j]
        self.steps += 1
        raise await pause(self, reruns=[(j, error)]) from None
    if error is exc:
        raise exc
    raise error from exc


async def call_done(self: RunState, out: Any) -> None:
    """The split hot path's end when the node's call returned ``out``: the output checked and pending, the step
    counted, an interrupt after the node raised."""
    j = self.calling_j
    self.calling = self.calling_x = self.called = None
    node = self.t.nodes[j]
    if node.out_check is not None or node.output_key is not None or self.streaming:
        out = await node_output(self, node, out)
    self.pending.append((j, out))
    self.steps += 1
    self.last = self.t.alone[j]
    if self.t.interrupt_after and j in self.t.interrupt_after:
        raise await pause(self, after=[j])


async def call_failed(self: RunState, exc: BaseException) -> NoReturn:
    """The split hot path's end when the node's call raised ``exc``: raises what the superstep raises."""
    j, x = self.calling_j, self.calling_x
    self.calling = self.calling_x = None
    await raised(self, j, x, exc, "")


async def _step_batch(self: RunState, batch: list[tuple[int, Any]] | None, deferred: Sequence[tuple[int, Any]]) -> Any:
    """The rest of a superstep that runs its nodes together (``run_batch``): several ready inboxes (``batch``
    None: read here, END first), or one gated node of a resumed step or of a run with an external interrupt."""
    t = self.t
    if batch is None:
        inbox = self.inbox
        ready = sorted(inbox)
        batch = []
        try:
            for j in ready:
                batch.append((j, self._take(j)))
        except BaseException:
            for _, x in batch:
                await _close(x)
            raise
        if ready[-1] == t.end:  # END has the highest index
            result = batch.pop()[1]
            for _, x in batch:
                await _close(x)
            await self._close_all()
            return result
        if self.gated or self.steps >= self.max_steps:
            await _gate(self, batch)
    else:
        ready = [j for j, _ in batch]
    signals, abandoned, done = await _run(self, batch, deferred)
    self.last = ready
    self.steps += 1
    if signals or abandoned:
        raise await pause(self, after=done, reruns=signals, abandoned=abandoned)
    if t.interrupt_after:
        hit = [j for j in ready if j in t.interrupt_after]
        if hit:
            raise await pause(self, after=hit)
    return _NOTHING


async def _fused(self: RunState, j: int, x: Any) -> Any:
    """Run one-node supersteps back to back while each node is plain and its routing trivial: a direct edge or
    one synchronous value branch. Observably the same as stepping (steps counted and limited, errors and
    interrupts as in ``pregel_step``); what it saves is the per-step inbox, gate and coroutine frames. Leaves
    at the first node that needs the general path (its input in the inbox, or its output pending), or returns
    END's value.

    A streaming run fuses nodes that implement invoke only, whose transform is "concatenate the input, invoke,
    emit one chunk": the loop concatenates the first node's input stream, passes plain values between the nodes
    and hands one-chunk streams back to the general path."""
    t = self.t
    streaming = self.streaming
    fused = t.fused_stream if streaming else t.fused
    direct, checks, routes = t.direct, t.fused_check, (t.stream_route if streaming else t.value_route)
    end = t.end
    limit = self.max_steps
    steps = self.steps
    f = fused[j]
    assert f is not None
    wrap: Callable[[Any], Any] = _one if streaming else lambda v: v
    check = steps  # the next step that reaches the limit or passes through the event loop
    try:
        while True:
            if steps >= check:
                if steps >= limit:
                    await _close(x)
                    raise MaxStepsExceededError(limit)
                if not steps % YIELD_EVERY and steps:
                    try:
                        await anyio.lowlevel.checkpoint()
                    except BaseException:
                        with anyio.CancelScope(shield=True):
                            await _close(x)
                        raise
                check = min(limit, steps - steps % YIELD_EVERY + YIELD_EVERY)
            try:
                if streaming:
                    streaming = False  # only the first node's input is a stream
                    x = await concat(x)
                out = await f(x)
                cls = checks[j]
                if cls is not None and not isinstance(out, cls):
                    raise WrongOutput(out)
            except WrongOutput as wrong:
                await _close(wrong.value)
                raise NodeOutputTypeError([*self.path, t.keys[j]], t.nodes[j].declared, type(wrong.value)) from None
            except BaseException as exc:
                self.steps = steps
                await raised(self, j, x, exc, "")
            steps += 1
            nxt = direct[j]
            if nxt < 0:
                route = routes[j]
                if route is None:
                    self.pending.append((j, wrap(out)))
                    return _NOTHING
                try:
                    dst = route(out)
                    nxt = dst if isinstance(dst, int) else await dst
                except BaseException:
                    await _close(out)
                    raise
            if nxt == end:
                return wrap(out)
            f = fused[nxt]
            if f is None:
                self.inbox[nxt] = {j: wrap(out)}
                return _NOTHING
            j, x = nxt, out
    finally:
        self.steps = steps
        self.last = t.alone[j]


async def _gate(self: RunState, batch: list[tuple[int, Any]]) -> None:
    """Before a step runs: an external interrupt, then interrupts before nodes, then the step limit. Whatever
    stops the step gets the inputs back (into the inboxes for a checkpoint, else closed)."""
    t = self.t
    try:
        stop = self.options.external_interrupt
        if stop is not None and stop.stops_here(self.last_nodes, [t.keys[j] for j, _ in batch]):
            ready = [j for j, _ in batch]
            _put_back(self, batch)
            if not self.last:  # before the first node: the run pauses before the nodes it was to start with
                raise await pause(self, before=ready)
            raise await pause(self, after=self.last)
        if self.skip_before:
            self.skip_before = False  # tasks restored from a checkpoint run without re-checking interrupt_before
            self.gated = bool(t.interrupt_before or stop is not None)
        elif t.interrupt_before:
            hit = [j for j, _ in batch if j in t.interrupt_before]
            if hit:
                _put_back(self, batch)
                raise await pause(self, before=hit)
        if self.steps >= self.max_steps:
            raise MaxStepsExceededError(self.max_steps)
    except BaseException:
        for _, x in batch:
            await _close(x)
        raise


def _cutting(self: RunState) -> StopRequest | None:
    """The run's stop request when the engine cuts off its running nodes (not one that cuts off its own calls)."""
    stop = self.options.external_interrupt
    return stop if stop is not None and stop.cuts_nodes else None


async def _run(
    self: RunState, batch: list[tuple[int, Any]], deferred: Sequence[tuple[int, Any]]
) -> tuple[list[tuple[int, GraphInterrupt]], list[tuple[int, Any]], list[int]]:
    """Run the step's tasks together; queue their outputs (after the deferred ones of a resumed step)."""
    outputs, signals, abandoned = await run_batch(self, batch)
    self.pending.extend(deferred)
    self.pending.extend(outputs)
    done = [j for j, _ in outputs] if abandoned else []
    return signals, abandoned, done


def _put_back(self: RunState, batch: list[tuple[int, Any]]) -> None:
    """Return inputs already read (and merged) to their inboxes, for a checkpoint taken before they run."""
    for j, x in batch:
        self.inbox[j] = {RERUN_SOURCE: x}
    batch.clear()


async def run_batch(
    self: RunState, batch: list[tuple[int, Any]]
) -> tuple[list[tuple[int, Any]], list[tuple[int, GraphInterrupt]], list[tuple[int, Any]]]:
    """Run a superstep's tasks together: (outputs, interrupts, tasks abandoned by an external interrupt with
    their inputs). A failure cancels the others and is raised."""
    n = len(batch)
    results: list[Any] = [_NOTHING] * n
    errors: list[BaseException | None] = [None] * n
    external = _cutting(self)
    spares: list[Any] = [None] * n
    scopes = [anyio.CancelScope() for _ in range(n)]
    if external is not None:  # keep every input: a task cut off by the grace period re-runs with it
        for i, (j, x) in enumerate(batch):
            if self.streaming:
                x, spares[i] = x.copy(2)
                batch[i] = (j, x)
            else:
                spares[i] = x
    left = [n]
    all_done = anyio.Event()
    watcher = anyio.CancelScope()

    async def task(i: int, j: int, x: Any, scope: anyio.CancelScope) -> None:
        with scopes[i]:
            try:
                results[i] = await self._exec(j, x)
            except GraphInterrupt as sig:
                results[i] = sig  # interrupts are not failures: the siblings finish
            except Exception as exc:
                errors[i] = exc
                scope.cancel()
        left[0] -= 1
        if left[0] == 0:
            all_done.set()
            if external is None or not external.requested:
                watcher.cancel()

    async def watch(ext: StopRequest) -> None:
        with watcher:
            await ext._event().wait()
        if ext.grace_period is None:
            return  # the tasks finish; the run pauses at the next step boundary
        with anyio.move_on_after(ext.grace_period):
            await all_done.wait()
        for i in range(n):
            if results[i] is _NOTHING and errors[i] is None:
                scopes[i].cancel()

    try:
        async with anyio.create_task_group() as tg:
            for i, (j, x) in enumerate(batch):
                tg.start_soon(task, i, j, x, tg.cancel_scope)
            if external is not None:
                tg.start_soon(watch, external)
    except BaseException:
        with anyio.CancelScope(shield=True):
            for r in (*results, *spares):
                await _close(r)
        raise
    failed = [e for e in errors if e is not None]
    if failed:
        with anyio.CancelScope(shield=True):
            for r in (*results, *spares):
                await _close(r)
        first = failed[0]
        for other in failed[1:]:
            first.add_note(f"pyeino: a sibling node failed too: {other}")
        raise first
    outputs: list[tuple[int, Any]] = []
    signals: list[tuple[int, GraphInterrupt]] = []
    abandoned: list[tuple[int, Any]] = []
    for i, (j, _) in enumerate(batch):
        r = results[i]
        if r is _NOTHING:
            abandoned.append((j, spares[i]))
            continue
        await _close(spares[i])
        (signals if isinstance(r, GraphInterrupt) else outputs).append((j, r))
    return outputs, signals, abandoned
