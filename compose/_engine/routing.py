"""Routing a node's output (``RunState._finish`` / ``_deliver``): its post handler, then its edges and branches
write into the successors' inboxes, each value checked against the edge's type where the compiled tables say so
(eino-semantics 1.2, 1.3). A streaming output is copied once per successor and per branch condition; the
common invoke case, one branch with a synchronous condition, is one call of ``choose``, the branch choice the
fused loop makes too (``Tables.value_route``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from compose._engine.dag import report
from compose._engine.tables import BranchRT, EdgeCheck, branch_targets
from compose._types import type_name
from compose.errors import BranchError, NodeRunError, RuntimeTypeError
from compose.stream import close_if_stream as _close
from compose.stream._copy import copies_of_own
from compose.stream._core import _IterReader

if TYPE_CHECKING:
    from compose._engine.run_state import RunState

__all__ = ["choose", "deliver", "route"]


def _check_chunk(check: EdgeCheck, chunk: Any) -> Any:
    if not check.check(chunk):
        raise RuntimeTypeError(
            f"runtime type check fail on edge[{check.start}]-[{check.end}]: expected type: "
            f"{type_name(check.expected)}, actual type: {type(chunk).__qualname__}"
        )
    return chunk


def _check_condition_input(key: str, b: BranchRT, chunk: Any) -> Any:
    assert b.check is not None
    if not b.check(chunk):
        raise RuntimeTypeError(
            f"runtime type check fail on the input of branch[{key}]-[{b.idx}]'s condition: expected type: "
            f"{type_name(b.branch.input_type)}, actual type: {type(chunk).__qualname__}"
        )
    return chunk


async def route(self: RunState, src: int, out: Any) -> None:
    """Post-handle ``src``'s output and route it along its edges and branches."""
    t = self.t
    if src < t.n:
        node = t.nodes[src]
        if node.post is not None or node.stream_post is not None:
            out = await self._post(node, out)
    succ = t.succ[src]
    brs = t.branches[src]
    if brs and src < t.n and not self.streaming:
        vr = t.value_route[src]
        if vr is not None:  # the common case: one branch choosing with a synchronous condition
            dst = vr(out)
            self._deliver(src, dst if isinstance(dst, int) else await dst, out)
            return
    if not brs and len(succ) < 2:
        if succ:
            self._deliver(src, succ[0], out)
        else:
            await _close(out)
        return
    key = t.keys[src]
    chosen = []
    streaming = self.streaming
    # a stream of one known value (as a model node's post handler returns): its copies are cursors over the
    # value, nothing buffered, and a value branch decides on the value (its condition would see the stream
    # concatenated: the same value)
    one = streaming and type(out) is _IterReader and out._n - out._i == 1
    vr = t.stream_route[src] if one and src < t.n else None
    if vr is not None:
        dst = vr(out._items[out._i])
        self._deliver(src, dst if isinstance(dst, int) else await dst, out)
        return
    n = len(succ) + len(brs) + 1
    copies = copies_of_own(out, n) if one else out.copy(n) if streaming else [out] * n
    reserve = copies.pop()
    for s, v in zip(succ, copies, strict=False):
        self._deliver(src, s, v)
    conds = copies[len(succ) :]
    try:
        for b, c in zip(brs, conds, strict=True):
            if b.check is not None:  # a stream checked chunk by chunk, as the condition (or its concat) reads
                c = c.map(partial(_check_condition_input, key, b)) if streaming else _check_condition_input(key, b, c)
            chosen.append(await (b.branch.decide_stream(c, key) if streaming else b.branch.decide_value(c, key)))
    except BaseException:
        with anyio.CancelScope(shield=True):
            for c in conds[len(chosen) + 1 :]:
                await _close(c)
            await _close(reserve)
        raise
    deliver, skipped = branch_targets(t, src, chosen)
    if deliver:
        for s, v in zip(deliver, reserve.copy(len(deliver)) if streaming else [out] * len(deliver), strict=True):
            self._deliver(src, s, v)
    else:
        await _close(reserve)
    if t.dag:
        for s in skipped:
            report(self, src, s, True)
        if t.data_edges:  # chosen branch end nodes that took their data along a data-only edge
            for s in {e for b, keys in zip(brs, chosen, strict=True) for k in keys for e in [b.index_of[k]]}:
                if (src, s) in t.data_edges and (src, s) not in t.data_only:
                    report(self, src, s, False)


def choose(condition: Callable[[Any], Any], rt: BranchRT, key: str, out: Any) -> int | Awaitable[int]:
    """The one branch choice on a value (bound per node: ``Tables.value_route``): the node that node ``key``'s
    branch ``rt`` chooses with ``condition`` for ``out``, or an awaitable of it when the result is no end node's
    key (an awaitable, or a wrong key: ``Branch.settle`` raises ``BranchError``)."""
    try:
        chosen = condition(out)
    except (BranchError, RuntimeTypeError, NodeRunError):
        raise  # the condition read a stream that broke: the node that produced it is named already
    except Exception as exc:
        raise rt.branch.failed(exc, key) from exc
    try:
        return rt.index_of[chosen] if type(chosen) is str else _settle(rt, chosen, key)
    except KeyError:
        return _settle(rt, chosen, key)


async def _settle(rt: BranchRT, chosen: Any, key: str) -> int:
    return rt.index_of[await rt.branch.settle(chosen, key)]


def deliver(self: RunState, src: int, dst: int, value: Any) -> None:
    """Put ``value`` in ``dst``'s inbox from ``src`` (checked against the edge's type, chunk by chunk in a streaming
    run); in a DAG run, report the edge delivered."""
    t = self.t
    check = t.checks.get((src, dst)) if t.checks else None
    if check is not None:
        if self.streaming:
            value = value.map(partial(_check_chunk, check))
        else:
            _check_chunk(check, value)
    self.inbox.setdefault(dst, {})[src] = value
    if t.dag and not ((src, dst) in t.data_edges and (src, dst) not in t.data_only):
        report(self, src, dst, False)  # a data edge to a branch end node: the branch's choice reports
