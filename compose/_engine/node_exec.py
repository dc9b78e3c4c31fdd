"""Running one node of a graph run: its input after the pre handler, its call (with the run's callbacks for it,
or a sub-graph's run), its output checked and wrapped, and the error a failure raises (``_exec_general`` of
``scheduler.GraphRun`` and the hot path of ``pregel.pregel_step`` make the same steps with these)."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from compose._engine.blame import OutputStream, named_upstream
from compose._engine.options import CallOptions
from compose._engine.resume import resumed_for
from compose._engine.run_callbacks import with_callbacks
from compose._engine.tables import NodeRT
from compose.checkpoint._snapshot import RunSnapshot
from compose.errors import FieldMappingError, GraphInterrupt, NodeOutputTypeError, NodeRunError
from compose.interrupt import _node_address, _resumed
from compose.lambdas import Paradigms
from compose.state import call_handler
from compose.stream import close_if_stream as _close
from compose.stream import concat
from compose.stream import one_chunk as _one

if TYPE_CHECKING:
    from compose._engine.run_state import RunState

_EMPTY: Mapping[str, Any] = {}


def _wrap_key(key: str, chunk: Any) -> Any:
    return {key: chunk}


async def node_input(self: RunState, node: NodeRT, x: Any) -> Any:
    """What the node's call takes: ``x`` after the node's pre handler; in a streaming run, concatenated for a
    node called with a value (``NodeRT.value_call``), and a value pre handler's value as it is for a node that
    takes a value (no stream of one chunk made to be concatenated back)."""
    if not self.streaming:
        if node.value_pre:
            return await call_handler(node.pre, x, self.frame)  # type: ignore[arg-type]
        return await self._pre(node, x)
    if node.value_pre:
        x = await call_handler(node.pre, await concat(x), self.frame)  # type: ignore[arg-type]
        return x if node.value_call or node.value_stream else _one(x)
    if node.has_pre:
        x = await self._pre(node, x)
    return await concat(x) if node.value_call else x

def node_call(self: RunState, node: NodeRT, x: Any) -> Awaitable[Any]:
    """The node's call on ``x`` (``_node_input``'s), with the run's callbacks for it: not yet awaited."""
    opts = self.options.node_options.get(node.key, _EMPTY)
    p = node.paradigms if self.cb is None else observed(self, node)
    assert p is not None
    if not self.streaming or node.value_call:
        return p.invoke(x, **opts)
    if node.value_pre and node.value_stream:
        return p.stream(x, **opts)  # the value of a value pre handler, to a node that streams from one
    return p.transform(x, **opts)

async def node_output(self: RunState, node: NodeRT, out: Any) -> Any:
    """The node's output as the run routes it: checked, under its output key, named on errors (a stream)."""
    cls, key = node.out_check, node.output_key
    if self.streaming and not node.value_call:
        if not node.blamed:  # a sub-graph's or a passthrough's stream: its errors are named upstream
            return out if key is None else out.map(partial(_wrap_key, key))
        blame = self.blames.get(node.index)
        if blame is None:
            blame = OutputStream((*self.path, node.key), self.origin, cls, node.declared, key, node.stream_model)
            self.blames = {**self.blames, node.index: blame}
        return blame.wrap(out)
    if cls is not None and not isinstance(out, cls):
        await _close(out)
        raise NodeOutputTypeError([*self.path, node.key], node.declared, type(out))
    if key is not None:
        out = {key: out}
    return _one(out) if self.streaming else out

def observed(self: RunState, node: NodeRT) -> Paradigms:
    """The node's paradigms with the run's callbacks for it, if any."""
    p = node.paradigms
    assert p is not None and self.cb is not None
    handlers = self.cb.for_path((*self.path, node.key))
    return with_callbacks(p, handlers, node.info) if handlers else p

async def exec_sub(self: RunState, node: NodeRT, x: Any, restore: tuple[RunSnapshot, Mapping[str, Any]] | None) -> Any:
    assert node.sub is not None
    return await node.sub._execute(
        x,
        streaming=self.streaming,
        options=CallOptions.parse(self.options.node_options.get(node.key, _EMPTY)),
        path=(*self.path, node.key),
        info=node.info,
        address=f"{self.address};node:{node.key}",
        restore=restore,
        origin=self.origin,
    )

async def node_failed(self: RunState, node: NodeRT, x: Any, exc: BaseException, phase: str) -> BaseException:
    """What a node's failure raises: ``exc`` itself when it is named already or not an error of the node,
    else a ``NodeRunError`` naming the node and the phase (the streaming input is closed first)."""
    if self.streaming:
        with anyio.CancelScope(shield=True):
            await _close(x)
    if isinstance(exc, GraphInterrupt) or not isinstance(exc, Exception):
        return exc
    if (
        isinstance(exc, FieldMappingError)
        or (node.sub is not None and isinstance(exc, NodeRunError))
        or named_upstream(exc, self.origin)
    ):
        # named already: a node of the sub-graph, the upstream node whose stream this node read, or a
        # Workflow mapping of the stream this node read
        return exc
    return NodeRunError([*self.path, node.key], exc, phase=phase)


async def exec_node(self: RunState, j: int, x: Any) -> Any:
    """Run node ``j`` on ``x`` (``RunState._exec``, which a recorded run wraps)."""
    if self.track:
        return await _exec_tracked(self, j, x)
    node = self.t.nodes[j]
    if self.resume_for and j in self.resume_for:
        return await _exec_resumed(self, j, x)
    if node.invoke1 is None or self.general:
        return await exec_general(self, j, x, None)
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

async def _exec_tracked(self: RunState, j: int, x: Any) -> Any:
    """``_exec`` with the node's address visible to what it runs (``compose.interrupt.current_address``)."""
    token = _node_address.set(f"{self.address};node:{self.t.nodes[j].key}")
    try:
        if self.resume_for and j in self.resume_for:
            return await _exec_resumed(self, j, x)
        return await exec_general(self, j, x, None)
    finally:
        _node_address.reset(token)

async def _exec_resumed(self: RunState, j: int, x: Any) -> Any:
    """Re-run a node that paused: it sees its saved interrupt state; a sub-graph continues from its snapshot."""
    record, resume = self.resume_for.pop(j)
    if record.sub is not None:
        return await exec_general(self, j, x, (record.sub, resume))
    assert record.signal is not None
    token = _resumed.set(resumed_for(record.signal, resume))
    try:
        return await exec_general(self, j, x, None)
    finally:
        _resumed.reset(token)

async def exec_general(
    self: RunState, j: int, x: Any, sub_restore: tuple[RunSnapshot, Mapping[str, Any]] | None
) -> Any:
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
