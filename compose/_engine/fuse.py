"""The fused fast path, an optional pass over compiled tables (``compose.graph._compiler`` calls it): which nodes
``pregel._fused`` may call back to back. Its branches choose as routing does (``routing.choose``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from compose._engine.tables import NodeRT, Tables

__all__ = ["WrongOutput", "fuse"]


class WrongOutput(Exception):
    """A fused node's output that fails its check (``Tables.fused_check``, or inside a call that applies an output
    key); the fused loop turns it into a ``NodeOutputTypeError`` naming the node on the run's path."""

    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value


def fuse(t: Tables) -> Tables:
    """``t`` with ``Tables.fused``, ``fused_stream`` and ``fused_check`` filled."""
    fused = tuple(None if node.index in t.interrupt_after else _call(node) for node in t.nodes)
    # a streaming run fuses the nodes that implement invoke only (their transform: concatenate, invoke, one chunk)
    only = [node.paradigms is not None and node.paradigms.implemented == {"invoke"} for node in t.nodes]
    checks = tuple(None if node.output_key is not None else node.out_check for node in t.nodes)
    stream = tuple(f if ok else None for f, ok in zip(fused, only, strict=True))
    return dataclasses.replace(t, fused=fused, fused_stream=stream, fused_check=checks)


def _call(node: NodeRT) -> Callable[[Any], Any] | None:
    """What a fused run awaits for ``node``: its invoke with a value and no options (the output key applied);
    None when the node needs the general path (handlers, an input key, a sub-graph)."""
    p = node.paradigms
    handled = node.pre or node.post or node.stream_pre or node.stream_post or node.input_key
    if handled or node.sub is not None or p is None:
        return None
    invoke = p.invoke1 or p.invoke
    key = node.output_key
    if key is None:
        return invoke
    cls = node.out_check

    async def keyed(x: Any) -> Any:
        out = await invoke(x)
        if cls is not None and not isinstance(out, cls):
            raise WrongOutput(out)
        return {key: out}

    return keyed
