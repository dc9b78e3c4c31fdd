"""DAG mode (``all_predecessor``): eager scheduling with skip propagation (eino-semantics 1.3).

A node becomes ready when every predecessor has delivered or been skipped; a node all of whose predecessors were
skipped is skipped itself, and the skip propagates. Tasks start as soon as they are ready; the first time END is
ready its value is returned and anything still running is cancelled. Interrupts: the run stops starting tasks,
lets the running ones finish, then pauses; an external interrupt with a grace period cancels the tasks still
running when it is over, and they re-run on resume with the input they had (kept for that from the start).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import anyio

from compose._engine.resume import RERUN_SOURCE, pause
from compose._engine.tables import NOTHING as _NOTHING
from compose._types import zero_value
from compose.errors import GraphInterrupt
from compose.interrupt import StopRequest
from compose.merge import merge_stream_values, merge_values
from compose.stream import close_if_stream as _close
from compose.stream import one_chunk as _one

if TYPE_CHECKING:
    from compose._engine.run_state import RunState
    from compose._engine.tables import RunMapping

_ABANDONED: Any = object()  # what a task cut off by an external interrupt's grace period reports


async def run_dag(self: RunState) -> Any:
    t = self.t
    end = t.end
    ready = self.ready
    while self.pending:
        src, value = self.pending.pop(0)
        await self._finish(src, value)
    # nodes restored from a checkpoint run without re-checking interrupt_before
    unchecked = set(ready) if self.skip_before else set()
    self.skip_before = False
    # an external interrupt pauses the run once the running tasks finish or, with a grace period, once that is
    # over: the tasks still running then are cancelled and re-run on resume with their kept input
    stop = self.options.external_interrupt
    external = stop if stop is not None and stop.cuts_nodes else None  # cuts off running nodes (grace period)
    done_by_external = False
    finished: list[int] = []
    send, recv = anyio.create_memory_object_stream[tuple[int, Any, BaseException | None]](math.inf)
    running = 0
    error: BaseException | None = None
    result: Any = _NOTHING
    before: list[int] = []
    after: list[int] = []
    signals: list[tuple[int, GraphInterrupt]] = []
    pausing = False
    spares: dict[int, Any] = {}  # with an external interrupt: each running task's input, for a re-run
    scopes: dict[int, anyio.CancelScope] = {}
    abandoned: list[tuple[int, Any]] = []

    async def task(j: int, x: Any) -> None:
        with scopes.get(j) or anyio.CancelScope():
            try:
                out = await self._exec(j, x)
            except Exception as exc:
                send.send_nowait((j, None, exc))
            else:
                send.send_nowait((j, out, None))
            return
        send.send_nowait((j, _ABANDONED, None))  # cut off when the grace period was over

    async def watch(ext: StopRequest) -> None:
        await ext._event().wait()
        if ext.grace_period is None:
            return
        await anyio.sleep(max(ext.grace_period, 0))
        for scope in scopes.values():
            scope.cancel()

    def start(j: int, x: Any) -> None:
        if external is not None:
            x, spares[j] = x.copy(2) if self.streaming else (x, x)
            scopes[j] = anyio.CancelScope()
        tg.start_soon(task, j, x)

    async def completed(j: int, out: Any, exc: BaseException | None) -> BaseException | None:
        """Route a finished task; an interrupt or after-interrupt makes the run pause once idle."""
        scopes.pop(j, None)
        if out is _ABANDONED:
            abandoned.append((j, spares.pop(j)))
            return None
        await _close(spares.pop(j, None))
        if isinstance(exc, GraphInterrupt):
            signals.append((j, exc))
            return None
        if exc is not None:
            return exc
        try:
            await self._finish(j, out)
        except Exception as exc2:
            return exc2
        finished.append(j)
        self.last = [j]  # as Eino's eager mode: the one task its last wait returned
        if j in t.interrupt_after:
            after.append(j)
        return None

    try:
        async with anyio.create_task_group() as tg:
            if external is not None:
                tg.start_soon(watch, external)
            try:
                while result is _NOTHING and error is None:
                    if stop is not None and not done_by_external and stop.stops_here(self.last_nodes, []):
                        done_by_external = True
                    pausing = bool(before or after or signals or done_by_external)
                    while ready and result is _NOTHING and not pausing:
                        j = ready.popleft()
                        if j == end:
                            result = take_dag(self, j)
                        elif j in t.interrupt_before and j not in unchecked:
                            before.append(j)  # its input stays in the inbox for the checkpoint
                            pausing = True
                        elif running == 0 and not ready and external is None:
                            x = take_dag(self, j)
                            failure: BaseException | None = None
                            try:
                                out = await self._exec(j, x)
                            except Exception as exc:
                                out, failure = None, exc
                            error = await completed(j, out, failure)
                            pausing = bool(before or after or signals)
                            if error is not None:
                                break
                        else:
                            start(j, take_dag(self, j))
                            running += 1
                    if result is not _NOTHING or error is not None:
                        break
                    if running == 0:
                        if not pausing:
                            # every node left was skipped (a branch chose none of them)
                            error = self.no_tasks()
                        break
                    j, out, failure = await recv.receive()
                    running -= 1
                    error = await completed(j, out, failure)
            except Exception as exc:  # the task group's body must not raise: it would wrap the error
                error = exc
            tg.cancel_scope.cancel()
        pausing = error is None and result is _NOTHING
    finally:
        send.close()
        with anyio.CancelScope(shield=True):
            async with recv:
                async for _, out, _ in recv:
                    await _close(out)
            # kept inputs: those of abandoned tasks go into the checkpoint when the run pauses, else are closed
            for spare in (*spares.values(), *(() if pausing else (x for _, x in abandoned))):
                await _close(spare)
    if error is not None:
        await _close(result)
        raise error
    if result is _NOTHING:
        if not signals and not abandoned:
            # as Eino: a pause (after nodes, before nodes, an external interrupt) also names the ready nodes
            # listed in interrupt_before, so that a node after an interrupt_after node pauses the run once
            hit = [j for j in ready if j in t.interrupt_before and j not in unchecked and j not in before]
            if hit:
                for j in hit:
                    ready.remove(j)
                before.extend(hit)
        ready.extendleft(reversed(before))
        if done_by_external:
            after = after or finished[-1:]
        raise await pause(self, before=before, after=after, reruns=signals, abandoned=abandoned)
    await self._close_all()
    return result

def take_dag(self: RunState, j: int) -> Any:
    if j in self.inbox:
        build = self.t.builds.get(j)
        if build is None:
            return self._take(j)
        return take_mapped(self, j, build)
    tp = self.t.nodes[j].input_type if j < self.t.n else self.t.output_type
    zero = zero_value(tp)
    return _one(zero) if self.streaming else zero

def take_mapped(self: RunState, j: int, build: RunMapping) -> Any:
    """A Workflow node's input: each predecessor's value (stream) mapped along its edge, as it is taken (so a
    node that is skipped never maps what reached it), fan-in merged, then built (eino-semantics 1.13)."""
    t = self.t
    box = self.inbox[j]
    if RERUN_SOURCE in box:  # a node re-run after an interrupt: its input (the zero value, or the kept input)
        return box.pop(RERUN_SOURCE)  # anything else delivered to it is closed with the run
    del self.inbox[j]
    key = t.keys[j]
    if self.streaming:
        mapped = [(t.keys[p], t.edge_maps[(p, j)].stream(r, self.path), dict) for p, r in box.items()]
        if len(mapped) == 1:
            return build.stream(mapped[0][1], self.path)
        cfg = t.fan_in.get(j)
        eof = bool(cfg and cfg.stream_merge_with_source_eof)
        return build.stream(merge_stream_values(key, mapped, source_eof=eof), self.path)
    values = [t.edge_maps[(p, j)].invoke(v, self.path) for p, v in box.items()]
    return build.invoke(values[0] if len(values) == 1 else merge_values(key, values), self.path)


def report(self: RunState, src: int, dst: int, skipped: bool) -> None:
    t = self.t
    rep = self.reported.setdefault(dst, set())
    rep.add(src)
    if skipped:
        self.skipped.setdefault(dst, set()).add(src)
    preds = t.preds[dst]
    if len(rep) < len(preds):
        return
    del self.reported[dst]
    sk = self.skipped.pop(dst, set())
    if t.data_only:  # a Workflow: only control predecessors decide whether the node is skipped
        sk |= {p for p in preds if (p, dst) in t.data_only}
    if len(sk) < len(preds):
        self.ready.append(dst)
        return
    # every predecessor was skipped: the node is skipped and the skip propagates
    if dst != t.end:
        for s in t.all_succ[dst]:
            report(self, dst, s, True)
