"""Runs whose steps are watched (history, stream modes): each step settled where it ends.

A plain Pregel run routes a superstep's outputs (post handlers, then edges and branches) at the start of the
next superstep, so between two supersteps the state does not show the post handlers of the step that ran yet.
A ``SteppedRun`` settles each step where it ends: a superstep's outputs are routed before the superstep returns
(a DAG run routes each node completion as it happens, as every DAG run does; a stepped one counts them in
``steps``, which a plain DAG run leaves at 0). Then the step is over and ``_settled`` says so: a recorded run
writes its snapshot there (``history.RecordedRun``), a run watched with stream modes gives its ``values`` and
debug ``snapshot`` parts there (``CallOptions.step_watch``). So both see the state after the step's post
handlers, once per step, numbered on across a pause and its resume.

Plain runs are ``GraphRun``s: nothing here is on their path (``Runnable._open`` makes a ``SteppedRun`` only for
a run with history or a ``step_watch``).
"""

from __future__ import annotations

from typing import Any

from compose._engine.pregel import pregel_step
from compose._engine.resume import pause
from compose._engine.routing import route
from compose._engine.scheduler import GraphRun
from compose._engine.tables import NOTHING
from compose.errors import GraphInterrupt
from compose.stream import close_if_stream as _close


class SteppedRun(GraphRun):
    """A ``GraphRun`` that settles each step where it ends (see the module docstring)."""

    __slots__ = ()
    _split = False

    async def _pregel(self, fuse: bool = False, split: bool = False) -> Any:
        """One superstep, settled: what is pending from before (START's input, a restored run's outputs) is
        routed first, the superstep's own outputs before it returns (never fused or split: the run is driven by
        ``step``)."""
        await self.settle()
        out = await pregel_step(self, False)
        if out is NOTHING:
            await self.settle()
        return out

    async def settle(self) -> None:
        """Route the outputs pending from the last superstep (post handlers, edges, branches) as the next
        superstep would at its start, then ``_settled``. Nothing when nothing is pending, or in a resumed step
        whose restored outputs wait to be routed with those of the nodes it re-runs."""
        pending = self.pending
        if not pending or (self.skip_before and self.rerun_restored):
            return
        srcs: list[int] = []
        while pending:
            src, out = pending.pop(0)
            try:
                await self._finish(src, out)
            except GraphInterrupt as exc:
                # the output stream paused (read by a post handler or branch): the node re-runs on resume, as
                # in ``pregel_step``
                await _close(out)
                self.last = self.t.alone[src]
                raise await pause(self, reruns=[(src, exc)]) from None
            except BaseException:
                await _close(out)
                raise
            srcs.append(src)
        await self._settled(srcs)

    async def _finish(self, src: int, out: Any) -> None:
        await route(self, src, out)
        if self.t.dag:  # a DAG step: one node completion (or START's input), routed
            if src != self.t.start:
                self.steps += 1  # counted in the run (and its checkpoint), so a resumed run numbers on
            await self._settled([src])

    async def _settled(self, srcs: list[int]) -> None:
        """A step is over: ``srcs`` are the nodes whose outputs it routed (START alone: the input, step 0)."""
        watch = self.options.step_watch
        if watch is not None and srcs != [self.t.start]:
            watch(self)
